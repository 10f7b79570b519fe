-- Wakes event readers when evidence commits (docs/events.md, Waking). Events are a projection of
-- evidence_records, so the notification is a hint only: readers re-read the table after it. One
-- NOTIFY per statement (not per row), naming the organizations it appended to; Postgres delivers
-- it at commit and drops it on rollback, and collapses identical payloads within a transaction.
CREATE FUNCTION evidence_records_notify() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  orgs text;
BEGIN
  SELECT string_agg(DISTINCT organization_id, ',') INTO orgs FROM appended;
  IF orgs IS NULL THEN
    RETURN NULL;
  END IF;
  -- A NOTIFY payload must stay under 8000 bytes (an over-long one would abort the transaction that
  -- records the change); a statement spanning that many organizations wakes every reader instead.
  IF octet_length(orgs) > 7500 THEN
    orgs := '*';
  END IF;
  PERFORM pg_notify('mandate_events', orgs);
  RETURN NULL;
END $$;

CREATE TRIGGER evidence_records_notify AFTER INSERT ON evidence_records
  REFERENCING NEW TABLE AS appended
  FOR EACH STATEMENT EXECUTE FUNCTION evidence_records_notify();
