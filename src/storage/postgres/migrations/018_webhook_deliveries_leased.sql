-- The deliveries in flight (leased and pending): what leasing counts, per webhook and per
-- organization, on every lease. Without this index each count walked every pending delivery, the
-- whole backlog when receivers fall behind. A lease sets lease_id and recording its attempt clears
-- it, so the index holds only the attempts in flight (and leases of a replica that died, until
-- another takes them).
CREATE INDEX webhook_deliveries_leased ON webhook_deliveries (webhook_id, lease_until) WHERE state = 'pending' AND lease_id IS NOT NULL;
