-- Organizations, their API keys and the sandbox creation ledger.

CREATE TABLE organizations (
  organization_id text PRIMARY KEY,
  name            text NOT NULL,
  sandbox         boolean NOT NULL DEFAULT false,
  state           text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'suspended')),
  created_at      timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now())
);

CREATE TABLE api_keys (
  key_id          text PRIMARY KEY,
  organization_id text NOT NULL REFERENCES organizations,
  name            text NOT NULL,
  -- SHA-256 of the secret; the secret itself is never stored.
  secret_sha256   bytea NOT NULL UNIQUE,
  permissions     text[] NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
  revoked_at      timestamptz
);
CREATE INDEX api_keys_org ON api_keys (organization_id, created_at);

-- One row per sandbox creation; rate limits and the total cap count rows here,
-- so they hold across replicas.
CREATE TABLE sandbox_signups (
  organization_id text PRIMARY KEY REFERENCES organizations,
  email           text NOT NULL,
  client_address  text NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now())
);
CREATE INDEX sandbox_signups_address ON sandbox_signups (client_address, created_at);
CREATE INDEX sandbox_signups_email ON sandbox_signups (email, created_at);
