-- Single-use Capability Authorizations.

CREATE TABLE capabilities (
  capability_id   text PRIMARY KEY,
  organization_id text NOT NULL REFERENCES organizations,
  -- At most one Capability per decision, ever: the database enforces it.
  decision_id     text NOT NULL UNIQUE REFERENCES decisions,
  agent_id        text NOT NULL REFERENCES agents,
  integration_id  text REFERENCES integrations,
  audience        text NOT NULL,
  issued_by       text NOT NULL,
  action          text NOT NULL,
  resource        text NOT NULL,
  constraints     jsonb NOT NULL,
  issued_at       timestamptz NOT NULL,
  expires_at      timestamptz NOT NULL,
  consumed_at     timestamptz,
  consumed_by     text
);
