import type { AdapterReportRow, ExecutionStore, ReceiptRow, ReconciliationRow, Recorded } from "../execution.js";
import type { EvidenceEntry } from "../evidence.js";
import type { Database, Queryable } from "./database.js";
import type { EvidenceChain } from "./evidence-chain.js";

/** SQL for receipts, adapter reports and reconciliations. */
const executionSql = {
  /** Sets the evidence id of a row inserted earlier in the same transaction. */
  async setEvidence(q: Queryable, table: "execution_receipts" | "adapter_reports" | "reconciliations", organizationId: string, id: string, evidenceId: string): Promise<void> {
    const key = { execution_receipts: "receipt_id", adapter_reports: "report_id", reconciliations: "reconciliation_id" }[table];
    await q.query(`UPDATE ${table} SET evidence_id = $3 WHERE organization_id = $1 AND ${key} = $2`, [organizationId, id, evidenceId]);
  },

  /**
   * Inserts a receipt unless its id exists (a concurrent twin waits on the
   * primary key, then finds it); returns the stored receipt either way.
   */
  async insertReceipt(q: Queryable, r: ReceiptRow): Promise<Recorded<ReceiptRow>> {
    const ins = await q.query<ReceiptRow>(
      `INSERT INTO execution_receipts (organization_id, receipt_id, capability_id, decision_id, reported_by, status, executed_fields, reported_at, body_sha256, evidence_id)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT DO NOTHING RETURNING *`,
      [r.organization_id, r.receipt_id, r.capability_id, r.decision_id, r.reported_by, r.status, JSON.stringify(r.executed_fields), r.reported_at, r.body_sha256, r.evidence_id],
    );
    if (ins.rows[0]) return { row: ins.rows[0], inserted: true };
    const { rows } = await q.query<ReceiptRow>("SELECT * FROM execution_receipts WHERE organization_id = $1 AND receipt_id = $2", [r.organization_id, r.receipt_id]);
    return { row: rows[0]!, inserted: false };
  },

  /** Receipts for a decision, oldest first. */
  async receipts(q: Queryable, organizationId: string, decisionId: string): Promise<ReceiptRow[]> {
    const { rows } = await q.query<ReceiptRow>("SELECT * FROM execution_receipts WHERE organization_id = $1 AND decision_id = $2 ORDER BY received_at, receipt_id", [organizationId, decisionId]);
    return rows;
  },

  /** Inserts an adapter report unless its id exists; returns the stored one either way. */
  async insertReport(q: Queryable, r: AdapterReportRow): Promise<Recorded<AdapterReportRow>> {
    const ins = await q.query<AdapterReportRow>(
      `INSERT INTO adapter_reports (organization_id, report_id, decision_id, adapter_id, operation, comparison, differing_fields, body_sha256, evidence_id)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING RETURNING *`,
      [r.organization_id, r.report_id, r.decision_id, r.adapter_id, JSON.stringify(r.operation), r.comparison, r.differing_fields, r.body_sha256, r.evidence_id],
    );
    if (ins.rows[0]) return { row: ins.rows[0], inserted: true };
    const { rows } = await q.query<AdapterReportRow>("SELECT * FROM adapter_reports WHERE organization_id = $1 AND report_id = $2", [r.organization_id, r.report_id]);
    return { row: rows[0]!, inserted: false };
  },

  /** Records a reconciliation. */
  async insertReconciliation(q: Queryable, r: ReconciliationRow): Promise<void> {
    await q.query(
      `INSERT INTO reconciliations (reconciliation_id, organization_id, decision_id, status, receipt_id, reported_by, reconciled_at, evidence_id)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
      [r.reconciliation_id, r.organization_id, r.decision_id, r.status, r.receipt_id, r.reported_by, r.reconciled_at, r.evidence_id],
    );
  },
};

/**
 * The ExecutionStore on Postgres. Each row is inserted first (its foreign keys share-lock
 * what it refers to) and its evidence record appended after, under the chain lock, the lock
 * order every writer keeps; the record's id is then set on the row.
 */
export class PostgresExecutionStore implements ExecutionStore {
  constructor(
    private readonly db: Database,
    private readonly chain: EvidenceChain,
  ) {}

  recordReceipt(receipt: Omit<ReceiptRow, "evidence_id">, evidence: EvidenceEntry): Promise<Recorded<ReceiptRow>> {
    return this.recordOnce((tx) => executionSql.insertReceipt(tx, { ...receipt, evidence_id: "" }), "execution_receipts", receipt.organization_id, receipt.receipt_id, evidence);
  }

  recordAdapterReport(report: Omit<AdapterReportRow, "evidence_id">, evidence: EvidenceEntry): Promise<Recorded<AdapterReportRow>> {
    return this.recordOnce((tx) => executionSql.insertReport(tx, { ...report, evidence_id: "" }), "adapter_reports", report.organization_id, report.report_id, evidence);
  }

  /** Inserts a row once (idempotent by id); the first insert also appends its evidence and stores the record's id on the row. */
  private recordOnce<R extends { evidence_id: string }>(
    insert: (tx: Queryable) => Promise<Recorded<R>>,
    table: "execution_receipts" | "adapter_reports",
    organizationId: string,
    id: string,
    evidence: EvidenceEntry,
  ): Promise<Recorded<R>> {
    return this.db.transaction(async (tx) => {
      const stored = await insert(tx);
      if (!stored.inserted) return stored;
      const [record] = await this.chain.append(tx, [evidence]);
      await executionSql.setEvidence(tx, table, organizationId, id, record!.evidence_id);
      return { row: { ...stored.row, evidence_id: record!.evidence_id }, inserted: true };
    });
  }

  receipts(organizationId: string, decisionId: string): Promise<ReceiptRow[]> {
    return executionSql.receipts(this.db.pool, organizationId, decisionId);
  }

  recordReconciliation(reconciliation: Omit<ReconciliationRow, "evidence_id">, evidence: EvidenceEntry): Promise<ReconciliationRow> {
    return this.db.transaction(async (tx) => {
      await executionSql.insertReconciliation(tx, { ...reconciliation, evidence_id: "" });
      const [record] = await this.chain.append(tx, [evidence]);
      await executionSql.setEvidence(tx, "reconciliations", reconciliation.organization_id, reconciliation.reconciliation_id, record!.evidence_id);
      return { ...reconciliation, evidence_id: record!.evidence_id };
    });
  }
}
