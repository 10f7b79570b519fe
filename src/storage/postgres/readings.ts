import type { OperationalReadings } from "../readings.js";
import type { Database } from "./database.js";

/** OperationalReadings on Postgres (see storage/readings.ts). */
export class PostgresOperationalReadings implements OperationalReadings {
  constructor(private readonly db: Database) {}

  async pendingReviews(): Promise<number> {
    // decisions_pending (migration 005) holds exactly these rows: an index-only count.
    const { rows } = await this.db.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM decisions WHERE status = 'PENDING'");
    return rows[0]!.n;
  }

  async webhookDeliveryLagSeconds(): Promise<number> {
    // webhook_deliveries_due (migration 015) in order, up to the first delivery whose webhook still
    // exists: a deleted webhook's pending deliveries are never attempted again (they wait for
    // trimming), so they are no lag.
    const { rows } = await this.db.pool.query<{ lag: number }>(
      `SELECT GREATEST(0, extract(epoch FROM now() - d.next_attempt_at))::float8 AS lag
         FROM webhook_deliveries d
        WHERE d.state = 'pending' AND EXISTS (SELECT 1 FROM webhooks w WHERE w.webhook_id = d.webhook_id AND w.deleted_at IS NULL)
        ORDER BY d.next_attempt_at LIMIT 1`,
    );
    return rows[0]?.lag ?? 0;
  }
}
