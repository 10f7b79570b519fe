-- Decisions, their reviews, integrations and their contracts.

CREATE TABLE decisions (
  decision_id     text PRIMARY KEY,
  organization_id text NOT NULL REFERENCES organizations,
  agent_id        text NOT NULL REFERENCES agents,
  nonce           text NOT NULL,
  -- SHA-256 of the exact signed bytes: a replayed nonce must carry the same bytes.
  body_sha256     bytea NOT NULL,
  intent          jsonb NOT NULL,
  action          text NOT NULL,
  outcome         text NOT NULL CHECK (outcome IN ('ALLOW', 'DENY', 'HUMAN_REVIEW')),
  reason          text NOT NULL,
  status          text CHECK (status IN ('PENDING', 'RESOLVED')),
  evidence_id     text NOT NULL,
  policy_versions jsonb NOT NULL DEFAULT '{}',
  graph_version   int NOT NULL DEFAULT 0,
  bundle_digest   text NOT NULL DEFAULT '',
  integration_id  text,
  contract_version int,
  evaluated_at    timestamptz NOT NULL,
  resolution      jsonb,
  approvals       jsonb NOT NULL DEFAULT '[]',
  -- HUMAN_REVIEW needs status; ALLOW and DENY never have one.
  CHECK ((outcome = 'HUMAN_REVIEW') = (status IS NOT NULL)),
  UNIQUE (agent_id, nonce)
);
CREATE INDEX decisions_queue ON decisions (organization_id, evaluated_at DESC, decision_id DESC);
CREATE INDEX decisions_pending ON decisions (organization_id, status) WHERE status = 'PENDING';

CREATE TABLE integrations (
  integration_id  text PRIMARY KEY,
  organization_id text NOT NULL REFERENCES organizations,
  name            text NOT NULL,
  actions         text[] NOT NULL,
  state           text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'suspended', 'revoked')),
  created_at      timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now())
);

-- An action belongs to at most one integration per organization.
CREATE TABLE integration_actions (
  organization_id text NOT NULL,
  action          text NOT NULL,
  integration_id  text NOT NULL REFERENCES integrations,
  PRIMARY KEY (organization_id, action)
);

CREATE TABLE contract_versions (
  integration_id   text NOT NULL REFERENCES integrations,
  version          int NOT NULL,
  state            text NOT NULL CHECK (state IN ('proposed', 'active', 'superseded')),
  resource_path    text NOT NULL,
  context_bindings jsonb NOT NULL,
  author           text NOT NULL,
  approver         text,
  created_at       timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
  PRIMARY KEY (integration_id, version)
);
CREATE UNIQUE INDEX contract_versions_one_active ON contract_versions (integration_id) WHERE state = 'active';

CREATE TABLE adapters (
  adapter_id      text PRIMARY KEY,
  integration_id  text NOT NULL REFERENCES integrations,
  organization_id text NOT NULL REFERENCES organizations,
  name            text NOT NULL,
  public_key      text NOT NULL UNIQUE,
  state           text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'suspended', 'revoked')),
  created_at      timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now())
);
