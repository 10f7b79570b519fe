import type { EvidenceRecord } from "../../evidence/record.js";
import type { EventLogStore, EventSourceRecord, RecordPosition } from "../events.js";
import type { Database } from "./database.js";

/**
 * The EventLogStore on Postgres: reads of `evidence_records` by (organization_id, seq), the
 * table's unique index. Records of one organization commit in seq order (appends serialize on
 * the organization's row in `evidence_heads`, and a record and its head move commit together),
 * so reading `seq > n` in order never skips a record that commits later.
 */
export class PostgresEventLogStore implements EventLogStore {
  constructor(private readonly db: Database) {}

  async after(organizationId: string, afterSeq: number, since: Date, limit: number, kinds?: readonly string[]): Promise<EventSourceRecord[]> {
    const { rows } = await this.db.pool.query<{ document: string }>({
      name: "events_after",
      // A null kind list means every kind, so one prepared statement serves both.
      text: `SELECT document FROM evidence_records
              WHERE organization_id = $1 AND seq > $2 AND created_at >= $3
                AND ($5::text[] IS NULL OR kind = ANY($5::text[]))
              ORDER BY seq LIMIT $4`,
      values: [organizationId, afterSeq, since, limit, kinds ? [...kinds] : null],
    });
    return rows.map((r) => {
      const d = JSON.parse(r.document) as EvidenceRecord;
      return { evidence_id: d.evidence_id, seq: d.seq, kind: d.kind, created_at: d.created_at, digest: d.digest, payload: d.payload };
    });
  }

  async head(organizationId: string): Promise<number> {
    const { rows } = await this.db.pool.query<{ seq: number }>({
      name: "events_head",
      text: "SELECT seq FROM evidence_heads WHERE organization_id = $1",
      values: [organizationId],
    });
    return rows[0]?.seq ?? 0;
  }

  async position(organizationId: string, evidenceId: string): Promise<RecordPosition | null> {
    const { rows } = await this.db.pool.query<{ seq: number; created_at: Date }>({
      name: "events_position",
      text: "SELECT seq, created_at FROM evidence_records WHERE evidence_id = $1 AND organization_id = $2",
      values: [evidenceId, organizationId],
    });
    const row = rows[0];
    return row ? { seq: row.seq, createdAt: row.created_at } : null;
  }
}
