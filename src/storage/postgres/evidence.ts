import type { EvidenceKeyRow } from "../../evidence/keys.js";
import type { EvidenceRecord } from "../../evidence/record.js";
import type { EvidencePage, EvidenceStore } from "../evidence.js";
import type { Database, Queryable } from "./database.js";

/** Where an organization's chain ends: the last record's seq and digest (0 and null when empty). */
export interface ChainHead {
  seq: number;
  digest: string | null;
}

/** How one organization's chain moves in a statement that writes several: from `expected` to `next`. */
export interface HeadMove {
  organizationId: string;
  expected: ChainHead;
  next: ChainHead;
}

/**
 * The INSERT of sealed records, taking them as parameters $1..$7 (one per column; see
 * {@link evidenceInsertValues}); `where` conditions it and may name the records' columns as
 * `r.organization_id` and so on. Shared by every statement that appends.
 */
export function evidenceInsert(where = ""): string {
  return `INSERT INTO evidence_records (evidence_id, organization_id, seq, kind, subject_id, document, created_at)
          SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], ${jsonLines(6)}, $7::timestamptz[])
                     AS r(evidence_id, organization_id, seq, kind, subject_id, document, created_at) ${where}`;
}

/** Parameters $1..$7 of {@link evidenceInsert}. */
export function evidenceInsertValues(records: readonly EvidenceRecord[]): unknown[] {
  return [
    records.map((r) => r.evidence_id),
    records.map((r) => r.organization_id),
    records.map((r) => r.seq),
    records.map((r) => r.kind),
    records.map((r) => r.subject_id),
    toJsonLines(records),
    records.map((r) => r.created_at),
  ];
}

/**
 * The CTEs of a statement that appends for several organizations without a prior lock:
 * `moves` (parameters $n..$n+4, see {@link headMoveValues}); `ready`, the organizations whose
 * head is still where its move expects it and that meet `condition` (which may name the move as
 * `m`), their heads locked in organization order; and `head`, those heads moved on, returning
 * their organization_id. The statement writes its rows only for the organizations in `head`.
 */
export function headMoveCtes(n: number, condition = "TRUE"): string {
  return `moves AS (
               SELECT * FROM unnest($${n}::text[], $${n + 1}::bigint[], $${n + 2}::text[], $${n + 3}::bigint[], $${n + 4}::text[])
                        AS m(organization_id, expected_seq, expected_digest, seq, digest)
             ),
             ready AS (
               SELECT h.organization_id FROM evidence_heads h JOIN moves m USING (organization_id)
                WHERE h.seq = m.expected_seq AND h.digest = m.expected_digest AND ${condition}
                ORDER BY h.organization_id
                  FOR UPDATE OF h
             ),
             head AS (
               UPDATE evidence_heads h SET seq = m.seq, digest = m.digest FROM moves m
                WHERE h.organization_id = m.organization_id AND h.organization_id IN (SELECT organization_id FROM ready)
                RETURNING h.organization_id
             )`;
}

/** The five parameters of {@link headMoveCtes}. */
export function headMoveValues(moves: readonly HeadMove[]): unknown[] {
  return [
    moves.map((m) => m.organizationId),
    moves.map((m) => m.expected.seq),
    moves.map((m) => m.expected.digest ?? ""),
    moves.map((m) => m.next.seq),
    moves.map((m) => m.next.digest),
  ];
}

/**
 * JSON documents as ONE text parameter, a line each, read back as a text[]: JSON text
 * never holds a raw line break (JSON.stringify escapes control characters and adds no
 * whitespace), so splitting on them is exact. As a Postgres array parameter, every document
 * would be escaped quote by quote on the way out and unescaped on the way in, which costs both
 * the service and Postgres CPU per record (docs/performance.md, Postgres).
 */
export const jsonLines = (n: number) => `string_to_array($${n}::text, E'\\n')`;

export function toJsonLines(values: readonly unknown[]): string {
  return values.map((v) => JSON.stringify(v)).join("\n");
}

/** SQL for the evidence keys and the append-only, per-organization chain. */
export const evidenceSql = {
  /** Every evidence key, oldest first. */
  async keys(q: Queryable): Promise<EvidenceKeyRow[]> {
    const { rows } = await q.query<EvidenceKeyRow>("SELECT kid, private_key_pem, public_jwk, active FROM evidence_keys ORDER BY created_at, kid");
    return rows;
  },

  /** Makes `key` the only active key; earlier keys stay (public half) so old records keep verifying. */
  async activateKey(q: Queryable, key: { kid: string; private_key_pem: string; public_jwk: object }): Promise<void> {
    await q.query("UPDATE evidence_keys SET active = false, private_key_pem = NULL WHERE active");
    await q.query("INSERT INTO evidence_keys (kid, private_key_pem, public_jwk, active) VALUES ($1, $2, $3, true)", [
      key.kid,
      key.private_key_pem,
      JSON.stringify(key.public_jwk),
    ]);
  },

  /**
   * Locks the organization's chain head for the rest of the transaction and
   * returns it (seq 0 and a null digest for an empty chain). Appends of one
   * organization serialize here; other organizations are unaffected.
   */
  async lockHead(q: Queryable, organizationId: string): Promise<{ seq: number; digest: string | null }> {
    // One statement: creates the head on first use, and the no-op update row-locks an existing one.
    const { rows } = await q.query<{ seq: number; digest: string }>({
      name: "evidence_lock_head",
      text: `INSERT INTO evidence_heads (organization_id, seq, digest) VALUES ($1, 0, '')
             ON CONFLICT (organization_id) DO UPDATE SET seq = evidence_heads.seq
             RETURNING seq, digest`,
      values: [organizationId],
    });
    const head = rows[0]!;
    return { seq: head.seq, digest: head.seq === 0 ? null : head.digest };
  },

  /** The chain heads of several organizations as committed now, without locking them; absent ones are seq 0. */
  async heads(q: Queryable, organizationIds: readonly string[]): Promise<Map<string, { seq: number; digest: string | null }>> {
    const { rows } = await q.query<{ organization_id: string; seq: number; digest: string }>({
      name: "evidence_heads",
      text: "SELECT organization_id, seq, digest FROM evidence_heads WHERE organization_id = ANY($1::text[])",
      values: [organizationIds],
    });
    const found = new Map(rows.map((h) => [h.organization_id, h.seq > 0 ? { seq: h.seq, digest: h.digest } : { seq: 0, digest: null }]));
    return new Map(organizationIds.map((id) => [id, found.get(id) ?? { seq: 0, digest: null }]));
  },

  /** Stores sealed records (consecutive, of one organization) and moves the head past the last. */
  async append(q: Queryable, records: readonly EvidenceRecord[]): Promise<void> {
    if (records.length === 0) return;
    const last = records[records.length - 1]!;
    // One statement: the records and the head move together.
    await q.query({
      name: "evidence_append",
      text: `WITH appended AS (${evidenceInsert()})
             UPDATE evidence_heads SET seq = $8, digest = $9 WHERE organization_id = $10`,
      values: [...evidenceInsertValues(records), last.seq, last.digest, last.organization_id],
    });
  },

  /** One record of the organization, or null. */
  async get(q: Queryable, organizationId: string, evidenceId: string): Promise<EvidenceRecord | null> {
    const { rows } = await q.query<{ document: string }>(
      "SELECT document FROM evidence_records WHERE organization_id = $1 AND evidence_id = $2",
      [organizationId, evidenceId],
    );
    return rows[0] ? (JSON.parse(rows[0].document) as EvidenceRecord) : null;
  },

  /** Records about one subject, oldest first. */
  async bySubject(q: Queryable, organizationId: string, subjectId: string): Promise<EvidenceRecord[]> {
    const { rows } = await q.query<{ document: string }>(
      "SELECT document FROM evidence_records WHERE organization_id = $1 AND subject_id = $2 ORDER BY seq",
      [organizationId, subjectId],
    );
    return rows.map((r) => JSON.parse(r.document) as EvidenceRecord);
  },

  /**
   * A page of the organization's chain after `afterSeq`, in order (one extra row is fetched to
   * tell whether more exist), and its head. One statement, so one snapshot: records and head
   * move in one transaction, so the head read is exactly where the records read end.
   */
  async page(q: Queryable, organizationId: string, afterSeq: number, limit: number): Promise<EvidencePage> {
    const { rows } = await q.query<{ head_seq: number | null; head_digest: string | null; document: string | null }>({
      name: "evidence_page",
      text: `SELECT h.seq AS head_seq, h.digest AS head_digest, r.document
               FROM (SELECT 1) one
               LEFT JOIN evidence_heads h ON h.organization_id = $1
               LEFT JOIN LATERAL (SELECT seq, document FROM evidence_records
                                   WHERE organization_id = $1 AND seq > $2 ORDER BY seq LIMIT $3) r ON true
              ORDER BY r.seq`,
      values: [organizationId, afterSeq, limit + 1],
    });
    const seq = rows[0]?.head_seq ?? 0;
    const documents = rows.flatMap((r) => (r.document === null ? [] : [r.document]));
    return {
      records: documents.slice(0, limit).map((d) => JSON.parse(d) as EvidenceRecord),
      hasMore: documents.length > limit,
      head: { seq, digest: seq > 0 ? rows[0]!.head_digest : null },
    };
  },
};


/** The EvidenceStore on Postgres. */
export class PostgresEvidenceStore implements EvidenceStore {
  constructor(private readonly db: Database) {}

  keys(): Promise<EvidenceKeyRow[]> {
    return evidenceSql.keys(this.db.pool);
  }

  activateKey(key: { kid: string; private_key_pem: string; public_jwk: object }): Promise<void> {
    return this.db.transaction((tx) => evidenceSql.activateKey(tx, key));
  }

  get(organizationId: string, evidenceId: string): Promise<EvidenceRecord | null> {
    return evidenceSql.get(this.db.pool, organizationId, evidenceId);
  }

  bySubject(organizationId: string, subjectId: string): Promise<EvidenceRecord[]> {
    return evidenceSql.bySubject(this.db.pool, organizationId, subjectId);
  }

  page(organizationId: string, afterSeq: number, limit: number): Promise<EvidencePage> {
    return evidenceSql.page(this.db.pool, organizationId, afterSeq, limit);
  }
}
