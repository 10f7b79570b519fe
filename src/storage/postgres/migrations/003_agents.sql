-- Principals, agents and their certificates.

CREATE TABLE principals (
  principal_id    text PRIMARY KEY,
  organization_id text NOT NULL REFERENCES organizations,
  display_name    text NOT NULL,
  kind            text NOT NULL CHECK (kind IN ('person', 'role', 'org_unit', 'service')),
  external_ref    text,
  created_at      timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
  UNIQUE (organization_id, external_ref)
);
CREATE INDEX principals_org ON principals (organization_id, created_at, principal_id);

CREATE TABLE agents (
  agent_id                text PRIMARY KEY,
  organization_id         text NOT NULL REFERENCES organizations,
  name                    text NOT NULL,
  acting_for_principal_id text NOT NULL REFERENCES principals,
  public_key              text NOT NULL,
  owner                   text NOT NULL DEFAULT '',
  business_unit           text NOT NULL DEFAULT '',
  environment             text NOT NULL DEFAULT '',
  state                   text NOT NULL CHECK (state IN ('registered', 'active', 'suspended', 'revoked', 'retired')),
  created_at              timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
  updated_at              timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
  last_heartbeat_at       timestamptz
);
CREATE INDEX agents_org ON agents (organization_id, created_at, agent_id);

-- A public key identifies exactly one agent, ever (registration is idempotent
-- per key, and a key can never move to another organization).
CREATE TABLE certificates (
  certificate_id  text PRIMARY KEY,
  agent_id        text NOT NULL REFERENCES agents,
  organization_id text NOT NULL REFERENCES organizations,
  public_key      text NOT NULL UNIQUE,
  state           text NOT NULL CHECK (state IN ('active', 'replaced', 'revoked')),
  created_at      timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
  ended_at        timestamptz
);
CREATE UNIQUE INDEX certificates_one_active ON certificates (agent_id) WHERE state = 'active';
