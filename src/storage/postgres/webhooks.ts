import { randomBase32 } from "../../base/random.js";
import type {
  AttemptOutcome,
  AttemptRow,
  ClaimedCursor,
  CursorAdvance,
  DeliveryRow,
  LeasedDelivery,
  WebhookRow,
  WebhookStore,
} from "../webhooks.js";
import type { Database, Queryable } from "./database.js";
import type { EvidenceChain } from "./evidence-chain.js";

const WEBHOOK_COLUMNS = "webhook_id, organization_id, url, events, description, secret, state, created_at";
const DELIVERY_COLUMNS = `d.delivery_id, d.webhook_id, d.event_id, d.event, d.state, d.attempts, d.created_at,
  CASE WHEN d.state = 'pending' THEN d.next_attempt_at END AS next_attempt_at`;

/** Appends an attempt and ends the lease, if `lease_id` still holds the delivery. */
const RECORD = `UPDATE webhook_deliveries SET
    attempts = attempts || jsonb_build_array($3::jsonb),
    state = $4,
    scheduled_attempts = scheduled_attempts + CASE WHEN redelivery THEN 0 ELSE 1 END,
    redelivery = false,
    next_attempt_at = coalesce($5::timestamptz, next_attempt_at),
    lease_id = NULL, lease_until = NULL
  WHERE delivery_id = $1 AND lease_id = $2`;

/** A pending delivery that may be leased now: due and not held. */
const DUE = "d.state = 'pending' AND d.next_attempt_at <= now() AND (d.lease_until IS NULL OR d.lease_until <= now())";

const webhookSql = {
  async get(q: Queryable, organizationId: string, webhookId: string, lock = false): Promise<WebhookRow | null> {
    const { rows } = await q.query<WebhookRow>(
      `SELECT ${WEBHOOK_COLUMNS} FROM webhooks WHERE organization_id = $1 AND webhook_id = $2 AND deleted_at IS NULL${lock ? " FOR UPDATE" : ""}`,
      [organizationId, webhookId],
    );
    return rows[0] ?? null;
  },
};

/**
 * The WebhookStore on Postgres. Two locks, never held together in the other order:
 * - a webhook's cursor row (`webhook_cursors`), claimed FOR UPDATE SKIP LOCKED by the process
 *   that enqueues its deliveries, so two replicas woken by the same commit never both enqueue;
 * - the webhook row, claimed FOR UPDATE SKIP LOCKED while leasing its deliveries, so the count
 *   of its deliveries in flight is read and raised by one process at a time. Recording a last
 *   failed attempt takes the webhook row first too, then the delivery, then the chain head.
 */
export class PostgresWebhookStore implements WebhookStore {
  constructor(
    private readonly db: Database,
    private readonly chain: EvidenceChain,
  ) {}

  create(row: Omit<WebhookRow, "state" | "created_at">, maxPerOrganization: number): Promise<WebhookRow | null> {
    return this.db.transaction(async (tx) => {
      // Creations of one organization queue on its row, so the count below cannot be raced past
      // the limit. NO KEY UPDATE: inserts elsewhere that reference the organization are not blocked.
      await tx.query("SELECT 1 FROM organizations WHERE organization_id = $1 FOR NO KEY UPDATE", [row.organization_id]);
      const { rows: counted } = await tx.query<{ n: number }>("SELECT count(*)::int AS n FROM webhooks WHERE organization_id = $1 AND deleted_at IS NULL", [row.organization_id]);
      if (counted[0]!.n >= maxPerOrganization) return null;
      const { rows } = await tx.query<WebhookRow>(
        `INSERT INTO webhooks (webhook_id, organization_id, url, events, description, secret) VALUES ($1, $2, $3, $4, $5, $6) RETURNING ${WEBHOOK_COLUMNS}`,
        [row.webhook_id, row.organization_id, row.url, row.events, row.description, row.secret],
      );
      // From the head as committed now: every record committed later has a greater seq.
      await tx.query(
        `INSERT INTO webhook_cursors (webhook_id, organization_id, cursor_seq)
         VALUES ($1, $2, coalesce((SELECT seq FROM evidence_heads WHERE organization_id = $2), 0))`,
        [row.webhook_id, row.organization_id],
      );
      return rows[0]!;
    });
  }

  async list(organizationId: string): Promise<WebhookRow[]> {
    const { rows } = await this.db.pool.query<WebhookRow>(
      `SELECT ${WEBHOOK_COLUMNS} FROM webhooks WHERE organization_id = $1 AND deleted_at IS NULL ORDER BY created_at, webhook_id`,
      [organizationId],
    );
    return rows;
  }

  get(organizationId: string, webhookId: string): Promise<WebhookRow | null> {
    return webhookSql.get(this.db.pool, organizationId, webhookId);
  }

  async delete(organizationId: string, webhookId: string): Promise<boolean> {
    const { rowCount } = await this.db.pool.query(
      "UPDATE webhooks SET deleted_at = now() WHERE organization_id = $1 AND webhook_id = $2 AND deleted_at IS NULL",
      [organizationId, webhookId],
    );
    return rowCount === 1;
  }

  async rotateSecret(organizationId: string, webhookId: string, secret: string): Promise<WebhookRow | null> {
    const { rows } = await this.db.pool.query<WebhookRow>(
      `UPDATE webhooks SET secret = $3, state = 'active' WHERE organization_id = $1 AND webhook_id = $2 AND deleted_at IS NULL RETURNING ${WEBHOOK_COLUMNS}`,
      [organizationId, webhookId, secret],
    );
    return rows[0] ?? null;
  }

  async behind(): Promise<string[]> {
    const { rows } = await this.db.pool.query<{ organization_id: string }>(
      `SELECT DISTINCT c.organization_id FROM webhook_cursors c
         JOIN webhooks w USING (webhook_id)
         JOIN evidence_heads h ON h.organization_id = c.organization_id
        WHERE w.deleted_at IS NULL AND c.cursor_seq < h.seq`,
    );
    return rows.map((r) => r.organization_id);
  }

  async organizations(): Promise<string[]> {
    const { rows } = await this.db.pool.query<{ organization_id: string }>("SELECT DISTINCT organization_id FROM webhooks WHERE deleted_at IS NULL");
    return rows.map((r) => r.organization_id);
  }

  enqueue(organizationId: string, plan: (claimed: ClaimedCursor[], head: number) => Promise<CursorAdvance[]>): Promise<number> {
    return this.db.transaction(async (tx) => {
      // The head in the same statement, read once the locks are held: records up to it committed.
      const { rows } = await tx.query<ClaimedCursor & { head: number }>(
        `SELECT c.webhook_id, w.events, c.cursor_seq, coalesce((SELECT seq FROM evidence_heads WHERE organization_id = $1), 0) AS head
           FROM webhook_cursors c JOIN webhooks w USING (webhook_id)
          WHERE c.organization_id = $1 AND w.deleted_at IS NULL
          ORDER BY c.webhook_id FOR UPDATE OF c SKIP LOCKED`,
        [organizationId],
      );
      const head = rows[0]?.head ?? 0;
      if (!rows.some((r) => r.cursor_seq < head)) return 0;
      const claimed = rows.map(({ webhook_id, events, cursor_seq }) => ({ webhook_id, events, cursor_seq }));
      const advances = await plan(claimed, head);
      const deliveries = advances.flatMap((a) => a.deliveries.map((d) => ({ ...d, webhook_id: a.webhook_id })));
      const moved = advances.filter((a) => claimed.some((c) => c.webhook_id === a.webhook_id && a.cursor_seq > c.cursor_seq));
      if (deliveries.length === 0 && moved.length === 0) return 0;
      // One statement: the deliveries and the cursors they move.
      const { rows: inserted } = await tx.query<{ n: number }>(
        `WITH moved AS (
           UPDATE webhook_cursors c SET cursor_seq = m.seq FROM unnest($8::text[], $9::bigint[]) AS m(webhook_id, seq)
            WHERE c.webhook_id = m.webhook_id AND m.seq > c.cursor_seq
         ), inserted AS (
           INSERT INTO webhook_deliveries (delivery_id, webhook_id, organization_id, event_id, event, occurred_at, body, next_attempt_at)
           SELECT v.delivery_id, v.webhook_id, $1, v.event_id, v.event, v.occurred_at, v.body, now()
             FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::text[])
                  AS v(delivery_id, webhook_id, event_id, event, occurred_at, body)
           ON CONFLICT ON CONSTRAINT webhook_deliveries_event DO NOTHING
           RETURNING 1
         )
         SELECT count(*)::int AS n FROM inserted`,
        [
          organizationId,
          deliveries.map((d) => d.delivery_id),
          deliveries.map((d) => d.webhook_id),
          deliveries.map((d) => d.event_id),
          deliveries.map((d) => d.event),
          deliveries.map((d) => d.occurred_at),
          deliveries.map((d) => d.body),
          moved.map((a) => a.webhook_id),
          moved.map((a) => a.cursor_seq),
        ],
      );
      return inserted[0]!.n;
    });
  }

  lease(limit: number, leaseMs: number, maxInFlight: number, maxInFlightPerOrganization: number): Promise<LeasedDelivery[]> {
    return this.db.transaction(async (tx) => {
      // Webhooks with something due, each claimed by one process at a time (the others skip it),
      // of organizations not already at their bound of attempts in flight.
      const { rows: hooks } = await tx.query<{ webhook_id: string; organization_id: string; url: string; secret: string }>({
        // Named (prepared once per connection): leasing runs once per wake-up.
        name: "webhooks_lease_claim",
        text: `WITH busy AS (
           SELECT w2.organization_id FROM webhook_deliveries d2 JOIN webhooks w2 USING (webhook_id)
            WHERE d2.state = 'pending' AND d2.lease_id IS NOT NULL AND d2.lease_until > now()
            GROUP BY w2.organization_id HAVING count(*) >= $2
         )
         SELECT w.webhook_id, w.organization_id, w.url, w.secret FROM webhooks w
          WHERE w.deleted_at IS NULL
            AND w.organization_id NOT IN (SELECT organization_id FROM busy)
            AND w.webhook_id IN (SELECT d.webhook_id FROM webhook_deliveries d WHERE ${DUE})
          LIMIT $1 FOR UPDATE OF w SKIP LOCKED`,
        values: [limit, maxInFlightPerOrganization],
      });
      if (hooks.length === 0) return [];
      // A new statement, so a new snapshot: every lease committed before we got the webhook's
      // lock is counted as in flight.
      const leaseId = randomBase32(16);
      const { rows } = await tx.query<Omit<LeasedDelivery, "url" | "secret" | "organization_id" | "lease_id">>({
        name: "webhooks_lease_pick",
        text: `WITH inflight AS (
           SELECT webhook_id, count(*)::int AS n FROM webhook_deliveries
            WHERE webhook_id = ANY($1::text[]) AND state = 'pending' AND lease_id IS NOT NULL AND lease_until > now() GROUP BY webhook_id
         ), org_inflight AS (
           SELECT w.organization_id, count(*)::int AS n FROM webhook_deliveries d JOIN webhooks w USING (webhook_id)
            WHERE w.organization_id = ANY($6::text[]) AND d.state = 'pending' AND d.lease_id IS NOT NULL AND d.lease_until > now() GROUP BY w.organization_id
         ), candidates AS (
           SELECT x.delivery_id, x.event_id, c.organization_id FROM unnest($1::text[], $6::text[]) AS c(webhook_id, organization_id)
             LEFT JOIN inflight i USING (webhook_id)
             CROSS JOIN LATERAL (
               SELECT d.delivery_id, d.event_id FROM webhook_deliveries d
                WHERE d.webhook_id = c.webhook_id AND ${DUE}
                ORDER BY d.event_id LIMIT greatest(0, $2::int - coalesce(i.n, 0))
             ) x
         ), picked AS (
           -- Each organization's oldest first, up to what its bound leaves.
           SELECT r.delivery_id FROM (
             SELECT delivery_id, organization_id, row_number() OVER (PARTITION BY organization_id ORDER BY event_id) AS k FROM candidates
           ) r LEFT JOIN org_inflight o USING (organization_id)
            WHERE r.k <= greatest(0, $7::int - coalesce(o.n, 0))
           LIMIT $3
         )
         UPDATE webhook_deliveries d SET lease_id = $4, lease_until = now() + $5::int * interval '1 millisecond'
           FROM picked WHERE d.delivery_id = picked.delivery_id AND ${DUE}
         RETURNING d.delivery_id, d.webhook_id, d.event_id, d.body, d.scheduled_attempts, d.redelivery`,
        values: [hooks.map((h) => h.webhook_id), maxInFlight, limit, leaseId, leaseMs, hooks.map((h) => h.organization_id), maxInFlightPerOrganization],
      });
      const byId = new Map(hooks.map((h) => [h.webhook_id, h]));
      return rows
        .map((r) => {
          const h = byId.get(r.webhook_id)!;
          return { ...r, lease_id: leaseId, url: h.url, secret: h.secret, organization_id: h.organization_id };
        })
        .sort((a, b) => (a.event_id < b.event_id ? -1 : a.event_id > b.event_id ? 1 : 0));
    });
  }

  async record(deliveryId: string, leaseId: string, attempt: AttemptRow, outcome: AttemptOutcome): Promise<boolean> {
    const state = outcome.kind === "delivered" ? "delivered" : outcome.kind === "retry" ? "pending" : "failed";
    const values = [deliveryId, leaseId, JSON.stringify(attempt), state, outcome.kind === "retry" ? outcome.at : null];
    // A retry, or a redelivery (outside the schedule) that failed: one statement on the delivery alone.
    if (outcome.kind === "retry" || outcome.kind === "redelivery_failed") return (await this.db.pool.query(RECORD, values)).rowCount === 1;
    // A delivery that got through: its webhook, failing until now, is active again (one statement).
    if (outcome.kind === "delivered") {
      const { rows } = await this.db.pool.query<{ recorded: boolean }>(
        `WITH recorded AS (${RECORD} RETURNING webhook_id),
              revived AS (UPDATE webhooks SET state = 'active' WHERE webhook_id IN (SELECT webhook_id FROM recorded) AND state = 'failing')
         SELECT EXISTS (SELECT 1 FROM recorded) AS recorded`,
        values,
      );
      return rows[0]!.recorded;
    }
    return this.db.transaction(async (tx) => {
      // The webhook row before the delivery, as leasing locks them, then the chain head.
      const { rows } = await tx.query<{ webhook_id: string }>(
        "SELECT w.webhook_id FROM webhooks w JOIN webhook_deliveries d USING (webhook_id) WHERE d.delivery_id = $1 FOR UPDATE OF w",
        [deliveryId],
      );
      const { rowCount } = await tx.query(RECORD, values);
      if (rowCount !== 1) return false;
      const webhookId = rows[0]?.webhook_id;
      const { rowCount: marked } = await tx.query("UPDATE webhooks SET state = 'failing' WHERE webhook_id = $1 AND state = 'active'", [webhookId]);
      // Only the change from active tells the organization; a webhook already failing stays quiet.
      if (marked === 1) await this.chain.append(tx, [outcome.evidence]);
      return true;
    });
  }

  async deliveries(organizationId: string, webhookId: string, limit: number, afterEventId?: string): Promise<DeliveryRow[]> {
    const { rows } = await this.db.pool.query<DeliveryRow>(
      `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries d JOIN webhooks w USING (webhook_id)
        WHERE w.organization_id = $1 AND d.webhook_id = $2 AND w.deleted_at IS NULL AND ($3::text IS NULL OR d.event_id < $3)
        ORDER BY d.event_id DESC LIMIT $4`,
      [organizationId, webhookId, afterEventId ?? null, limit],
    );
    return rows;
  }

  async redeliver(organizationId: string, webhookId: string, deliveryId: string): Promise<DeliveryRow | null> {
    const { rows } = await this.db.pool.query<DeliveryRow>(
      `UPDATE webhook_deliveries d SET next_attempt_at = now(), redelivery = (d.state <> 'pending'), state = 'pending'
         FROM webhooks w
        WHERE w.webhook_id = d.webhook_id AND w.organization_id = $1 AND w.deleted_at IS NULL AND d.webhook_id = $2 AND d.delivery_id = $3
        RETURNING ${DELIVERY_COLUMNS}`,
      [organizationId, webhookId, deliveryId],
    );
    return rows[0] ?? null;
  }

  async trim(before: Date, limit: number): Promise<number> {
    const { rowCount } = await this.db.pool.query(
      // Only finished ones: a delivery still retrying (its schedule outlasts a short retention) is never dropped unseen.
      "DELETE FROM webhook_deliveries WHERE delivery_id IN (SELECT delivery_id FROM webhook_deliveries WHERE created_at < $1 AND state IN ('delivered', 'failed') LIMIT $2)",
      [before, limit],
    );
    return rowCount ?? 0;
  }
}
