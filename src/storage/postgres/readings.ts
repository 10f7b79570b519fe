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
    // min() over webhook_deliveries_due (migration 015) reads one index entry.
    const { rows } = await this.db.pool.query<{ lag: number }>(
      "SELECT COALESCE(GREATEST(0, extract(epoch FROM now() - min(next_attempt_at))), 0)::float8 AS lag FROM webhook_deliveries WHERE state = 'pending'",
    );
    return rows[0]!.lag;
  }
}
