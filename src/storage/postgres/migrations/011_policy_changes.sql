-- Rollback and disable of runtime policies (docs/architecture.md, Policies: Rollback and
-- disable). A version deactivated by a disable is `disabled`; each version remembers the version
-- its publication replaced, which a rollback from it restores; and a change waits in
-- policy_changes until a second identity applies it.

ALTER TABLE policy_versions DROP CONSTRAINT policy_versions_state_check;
ALTER TABLE policy_versions ADD CONSTRAINT policy_versions_state_check
  CHECK (state IN ('draft', 'in_review', 'approved', 'active', 'superseded', 'disabled'));

-- The policy's version that was active when this one was published (null: none was). Set once, by
-- the publication; a rollback restores it and leaves it as it is, so repeated rollbacks walk back
-- through the publications in order.
ALTER TABLE policy_versions ADD COLUMN previous_version int;

CREATE TABLE policy_changes (
  change_id       text PRIMARY KEY,
  organization_id text NOT NULL,
  policy_key      text NOT NULL,
  kind            text NOT NULL CHECK (kind IN ('rollback', 'disable')),
  -- pending_approval → applied; or stale, when the active version moved before a second identity
  -- applied it (what it was requested against no longer holds).
  state           text NOT NULL CHECK (state IN ('pending_approval', 'applied', 'stale')),
  -- The version active when requested, and the one active once applied (0: none, a disable).
  from_version    int NOT NULL,
  to_version      int NOT NULL,
  requested_by    text NOT NULL,
  approved_by     text,
  note            text NOT NULL DEFAULT '',
  requested_at    timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
  applied_at      timestamptz,
  FOREIGN KEY (organization_id, policy_key) REFERENCES policies,
  CHECK ((state = 'applied') = (approved_by IS NOT NULL AND applied_at IS NOT NULL)),
  CHECK (approved_by IS NULL OR approved_by <> requested_by)
);
-- At most one change per policy waits for a second identity.
CREATE UNIQUE INDEX policy_changes_one_pending ON policy_changes (organization_id, policy_key) WHERE state = 'pending_approval';
