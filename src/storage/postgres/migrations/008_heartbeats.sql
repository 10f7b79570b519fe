-- A heartbeat is accepted only if it was sent after the last accepted one, so a
-- captured heartbeat cannot be replayed within the clock-skew window.
ALTER TABLE agents ADD COLUMN last_heartbeat_sent_at timestamptz;
