-- The signed, hash-chained evidence log (docs/architecture.md, The evidence chain).

CREATE TABLE evidence_keys (
  kid             text PRIMARY KEY,
  -- PKCS#8 PEM; NULL once a retired key's private half is destroyed.
  private_key_pem text,
  public_jwk      jsonb NOT NULL,
  active          boolean NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now())
);
CREATE UNIQUE INDEX evidence_keys_one_active ON evidence_keys (active) WHERE active;

-- The head of each organization's chain; appending locks this row, which
-- serializes appends per organization so seq and prev_digest never fork.
CREATE TABLE evidence_heads (
  organization_id text PRIMARY KEY REFERENCES organizations,
  seq             bigint NOT NULL,
  digest          text NOT NULL
);

CREATE TABLE evidence_records (
  evidence_id     text PRIMARY KEY,
  organization_id text NOT NULL REFERENCES organizations,
  seq             bigint NOT NULL,
  kind            text NOT NULL,
  subject_id      text NOT NULL,
  -- The sealed record exactly as signed (canonical JSON).
  document        text NOT NULL,
  created_at      timestamptz NOT NULL,
  UNIQUE (organization_id, seq)
);
CREATE INDEX evidence_records_subject ON evidence_records (organization_id, subject_id, seq);

-- Append-only: the database itself refuses to change or remove evidence.
CREATE FUNCTION evidence_records_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'evidence_records is append-only (% refused)', TG_OP USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER evidence_records_no_update BEFORE UPDATE OR DELETE ON evidence_records
  FOR EACH ROW EXECUTE FUNCTION evidence_records_append_only();
CREATE TRIGGER evidence_records_no_truncate BEFORE TRUNCATE ON evidence_records
  FOR EACH STATEMENT EXECUTE FUNCTION evidence_records_append_only();
