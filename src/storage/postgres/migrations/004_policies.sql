-- Runtime policies, the authority graph, and the compiled bundles built from them.

CREATE TABLE policies (
  organization_id text NOT NULL REFERENCES organizations,
  policy_key      text NOT NULL,
  description     text NOT NULL DEFAULT '',
  created_at      timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
  PRIMARY KEY (organization_id, policy_key)
);

CREATE TABLE policy_versions (
  organization_id text NOT NULL,
  policy_key      text NOT NULL,
  version         int NOT NULL,
  state           text NOT NULL CHECK (state IN ('draft', 'in_review', 'approved', 'active', 'superseded')),
  -- {"rules": {...}} | {"rules_yaml": "..."} | {"rego": "..."}
  source          jsonb NOT NULL,
  rego            text NOT NULL,
  actions         text[] NOT NULL DEFAULT '{}',
  author          text NOT NULL,
  approver        text,
  created_at      timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
  published_at    timestamptz,
  PRIMARY KEY (organization_id, policy_key, version),
  FOREIGN KEY (organization_id, policy_key) REFERENCES policies
);
CREATE UNIQUE INDEX policy_versions_one_active ON policy_versions (organization_id, policy_key) WHERE state = 'active';

-- Content-addressed compiled bundles (opa build -t wasm), shared by every
-- organization whose policies and graph compile to the same bytes.
CREATE TABLE policy_bundles (
  digest     text PRIMARY KEY,
  bundle     bytea NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- What each organization evaluates against right now. Publications lock this row.
CREATE TABLE policy_heads (
  organization_id text PRIMARY KEY REFERENCES organizations,
  bundle_digest   text NOT NULL REFERENCES policy_bundles,
  policy_versions jsonb NOT NULL,
  graph_version   int NOT NULL DEFAULT 0,
  updated_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE governance_documents (
  document_id     text PRIMARY KEY,
  organization_id text NOT NULL REFERENCES organizations,
  kind            text NOT NULL CHECK (kind IN ('delegation_of_authority', 'approval_matrix', 'signing_schedule')),
  format          text NOT NULL CHECK (format IN ('csv', 'yaml', 'json')),
  content         text NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now())
);
CREATE INDEX governance_documents_org ON governance_documents (organization_id, created_at);

CREATE TABLE graph_versions (
  organization_id text NOT NULL REFERENCES organizations,
  version         int NOT NULL,
  state           text NOT NULL CHECK (state IN ('draft', 'active', 'superseded')),
  graph           jsonb NOT NULL,
  author          text NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
  published_at    timestamptz,
  PRIMARY KEY (organization_id, version)
);
CREATE UNIQUE INDEX graph_versions_one_active ON graph_versions (organization_id) WHERE state = 'active';
