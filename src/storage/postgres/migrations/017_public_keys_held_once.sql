-- A public key is one identity's, ever: an agent's certificate or an integration's adapter
-- (a trusted adapter or a destination, "not the agent"), never both. Each table keeps its own
-- unique key; public_keys holds every key of both, and a trigger claims the key in the very
-- statement that inserts the row, so the refusal holds whichever path inserts (registration,
-- key rotation, adapter registration) and however two of them race: the second claim waits for
-- the first to commit or roll back.
CREATE TABLE public_keys (
  public_key text PRIMARY KEY,
  held_by    text NOT NULL CHECK (held_by IN ('certificate', 'adapter'))
);
INSERT INTO public_keys (public_key, held_by) SELECT public_key, 'certificate' FROM certificates;
-- A key both held before this migration stays as it is; nothing new can share it.
INSERT INTO public_keys (public_key, held_by) SELECT public_key, 'adapter' FROM adapters ON CONFLICT (public_key) DO NOTHING;

-- Claims NEW.public_key for TG_ARGV[0]. Held by the other kind: unique_violation on the constraint
-- name `public_key_held_by_<kind>`. Held by the same kind: the table's own unique key refuses the row.
CREATE FUNCTION claim_public_key() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  holder text;
BEGIN
  INSERT INTO public_keys (public_key, held_by) VALUES (NEW.public_key, TG_ARGV[0]) ON CONFLICT (public_key) DO NOTHING;
  IF NOT FOUND THEN
    SELECT held_by INTO holder FROM public_keys WHERE public_key = NEW.public_key;
    IF holder <> TG_ARGV[0] THEN
      RAISE unique_violation USING MESSAGE = format('the public key is already held by another identity (%s)', holder), CONSTRAINT = 'public_key_held_by_' || holder;
    END IF;
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER certificates_claim_public_key BEFORE INSERT ON certificates
  FOR EACH ROW EXECUTE FUNCTION claim_public_key('certificate');
CREATE TRIGGER adapters_claim_public_key BEFORE INSERT ON adapters
  FOR EACH ROW EXECUTE FUNCTION claim_public_key('adapter');
