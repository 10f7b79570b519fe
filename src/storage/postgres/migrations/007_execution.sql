-- Early access: trusted adapter reports, execution receipts and reconciliations.

ALTER TABLE adapters ADD COLUMN role text NOT NULL DEFAULT 'adapter' CHECK (role IN ('adapter', 'destination'));

CREATE TABLE execution_receipts (
  organization_id text NOT NULL REFERENCES organizations,
  receipt_id      text NOT NULL,
  capability_id   text NOT NULL REFERENCES capabilities,
  decision_id     text NOT NULL REFERENCES decisions,
  reported_by     text NOT NULL REFERENCES adapters,
  status          text NOT NULL CHECK (status IN ('executed', 'failed', 'partial')),
  executed_fields jsonb NOT NULL,
  reported_at     timestamptz NOT NULL,
  -- A repeated receipt_id must carry the same bytes to be the same receipt.
  body_sha256     bytea NOT NULL,
  evidence_id     text NOT NULL,
  received_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, receipt_id)
);
CREATE INDEX execution_receipts_decision ON execution_receipts (decision_id, received_at);

CREATE TABLE adapter_reports (
  organization_id  text NOT NULL REFERENCES organizations,
  report_id        text NOT NULL,
  decision_id      text NOT NULL REFERENCES decisions,
  adapter_id       text NOT NULL REFERENCES adapters,
  operation        jsonb NOT NULL,
  comparison       text NOT NULL CHECK (comparison IN ('MATCHED', 'MISMATCHED')),
  differing_fields text[] NOT NULL,
  body_sha256      bytea NOT NULL,
  evidence_id      text NOT NULL,
  received_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, report_id)
);

CREATE TABLE reconciliations (
  reconciliation_id text PRIMARY KEY,
  organization_id   text NOT NULL REFERENCES organizations,
  decision_id       text NOT NULL REFERENCES decisions,
  status            text NOT NULL CHECK (status IN ('MATCHED', 'MISMATCHED', 'EXECUTION_FAILED', 'PARTIAL', 'RECEIPT_MISSING', 'INDETERMINATE')),
  receipt_id        text NOT NULL DEFAULT '',
  reported_by       text NOT NULL DEFAULT '',
  reconciled_at     timestamptz NOT NULL,
  evidence_id       text NOT NULL
);
CREATE INDEX reconciliations_decision ON reconciliations (decision_id, reconciled_at DESC);
