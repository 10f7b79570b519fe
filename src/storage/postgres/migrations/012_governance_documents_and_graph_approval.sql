-- Governance documents get a name (unique among an organization's documents that are not
-- deleted), their row count and their author; deletion is a mark, so the table stays
-- history (the service role holds no DELETE) and a deleted name can be used again. Graph
-- versions get the four-eyes step policies have: draft → approved → active, with the approver.

ALTER TABLE governance_documents
  ADD COLUMN name       text,
  ADD COLUMN row_count  int NOT NULL DEFAULT 0,
  ADD COLUMN author     text NOT NULL DEFAULT '',
  ADD COLUMN deleted_at timestamptz;
-- Documents uploaded before names existed are known by their id.
UPDATE governance_documents SET name = document_id WHERE name IS NULL;
ALTER TABLE governance_documents
  ALTER COLUMN name SET NOT NULL,
  ADD CONSTRAINT governance_documents_name_length CHECK (char_length(name) BETWEEN 1 AND 200);
CREATE UNIQUE INDEX governance_documents_name ON governance_documents (organization_id, name) WHERE deleted_at IS NULL;

ALTER TABLE graph_versions
  ADD COLUMN approver text,
  DROP CONSTRAINT graph_versions_state_check,
  ADD CONSTRAINT graph_versions_state_check CHECK (state IN ('draft', 'approved', 'active', 'superseded'));
