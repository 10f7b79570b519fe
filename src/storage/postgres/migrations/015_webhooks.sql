-- Webhooks (docs/webhooks.md): subscriptions, the cursor each one has reached in its
-- organization's evidence log, and the deliveries with their attempts. Events themselves are
-- not stored here: they are projected from evidence_records, which is the outbox.

CREATE TABLE webhooks (
  webhook_id      text PRIMARY KEY,
  organization_id text NOT NULL REFERENCES organizations,
  url             text NOT NULL CHECK (char_length(url) BETWEEN 1 AND 2048),
  -- Event names delivered; empty means every event.
  events          text[] NOT NULL,
  description     text NOT NULL DEFAULT '' CHECK (char_length(description) <= 500),
  -- The `whsec_…` signing secret. Kept (not hashed): every delivery is signed with it.
  secret          text NOT NULL,
  state           text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'failing')),
  created_at      timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
  -- Deletion is a mark: its deliveries stop at once and are trimmed with the others.
  deleted_at      timestamptz
);
CREATE INDEX webhooks_org ON webhooks (organization_id, created_at) WHERE deleted_at IS NULL;

-- Where each webhook stands in its organization's evidence log: every record up to cursor_seq
-- has been turned into deliveries. A row of its own so that moving it (locked FOR UPDATE SKIP
-- LOCKED, with the deliveries it inserts) never waits on, nor makes skip, the webhook row that
-- leasing locks.
CREATE TABLE webhook_cursors (
  webhook_id      text PRIMARY KEY REFERENCES webhooks,
  organization_id text NOT NULL,
  cursor_seq      bigint NOT NULL CHECK (cursor_seq >= 0)
);
CREATE INDEX webhook_cursors_org ON webhook_cursors (organization_id);

CREATE TABLE webhook_deliveries (
  -- Also the `webhook-id` header of every attempt.
  delivery_id     text PRIMARY KEY,
  webhook_id      text NOT NULL REFERENCES webhooks,
  organization_id text NOT NULL,
  event_id        text NOT NULL,
  event           text NOT NULL,
  occurred_at     timestamptz NOT NULL,
  -- The envelope JSON exactly as every attempt sends it (the signature covers these bytes).
  body            text NOT NULL,
  state           text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
  -- Attempts made on the retry schedule (a redelivery is not one of them).
  scheduled_attempts int NOT NULL DEFAULT 0,
  -- A redelivery: one attempt, outside the schedule.
  redelivery      boolean NOT NULL DEFAULT false,
  -- [{attempted_at, status, latency_ms, error}], oldest first.
  attempts        jsonb NOT NULL DEFAULT '[]',
  next_attempt_at timestamptz NOT NULL,
  -- A replica holds the delivery while lease_until is in the future; lease_id names that hold,
  -- so an attempt that outlived its lease records nothing.
  lease_id        text,
  lease_until     timestamptz,
  created_at      timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
  -- An event reaches a webhook once, however many replicas enqueue it. Also the listing's order:
  -- within an organization event ids sort as the events were recorded.
  CONSTRAINT webhook_deliveries_event UNIQUE (webhook_id, event_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';
-- A webhook's pending deliveries in event order: what leasing reads (the oldest due, and the count
-- in flight), without walking the delivered ones the unique index also holds.
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (webhook_id, event_id) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_age ON webhook_deliveries (created_at);
