-- The rows every decision writes no longer check foreign keys: each check is a trigger that looks
-- up and share-locks the referenced row, once per row, a measurable share of Postgres's work per
-- recorded decision (docs/performance.md, Postgres). What they guaranteed still holds:
-- - the statements that write these rows check it themselves, and more: a decision and its
--   evidence record are written only for an organization whose chain head they move
--   (evidence_heads references organizations), and a decision only when its agent is the agent
--   of its signer's live certificate (certificates reference agents);
-- - organizations and agents are never deleted, and other rows keep them from being deleted:
--   every organization that has evidence has a chain head, and every agent has a certificate.
ALTER TABLE decisions
  DROP CONSTRAINT decisions_organization_id_fkey,
  DROP CONSTRAINT decisions_agent_id_fkey;
ALTER TABLE evidence_records
  DROP CONSTRAINT evidence_records_organization_id_fkey;
