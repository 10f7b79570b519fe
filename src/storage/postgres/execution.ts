import type { Queryable } from "./database.js";

/** A stored execution receipt. */
export interface ReceiptRow {
  organization_id: string;
  receipt_id: string;
  capability_id: string;
  decision_id: string;
  reported_by: string;
  status: "executed" | "failed" | "partial";
  executed_fields: Record<string, string>;
  reported_at: Date;
  body_sha256: Buffer;
  evidence_id: string;
}

/** A stored adapter report. */
export interface AdapterReportRow {
  organization_id: string;
  report_id: string;
  decision_id: string;
  adapter_id: string;
  operation: Record<string, string>;
  comparison: "MATCHED" | "MISMATCHED";
  differing_fields: string[];
  body_sha256: Buffer;
  evidence_id: string;
}

/** A stored reconciliation. */
export interface ReconciliationRow {
  reconciliation_id: string;
  organization_id: string;
  decision_id: string;
  status: "MATCHED" | "MISMATCHED" | "EXECUTION_FAILED" | "PARTIAL" | "RECEIPT_MISSING" | "INDETERMINATE";
  receipt_id: string;
  reported_by: string;
  reconciled_at: Date;
  evidence_id: string;
}

/** SQL for receipts, adapter reports and reconciliations. */
export const executionStore = {
  /** Sets the evidence id of a receipt or report inserted earlier in the same transaction. */
  async setEvidence(q: Queryable, table: "execution_receipts" | "adapter_reports", organizationId: string, id: string, evidenceId: string): Promise<void> {
    const key = table === "execution_receipts" ? "receipt_id" : "report_id";
    await q.query(`UPDATE ${table} SET evidence_id = $3 WHERE organization_id = $1 AND ${key} = $2`, [organizationId, id, evidenceId]);
  },

  /**
   * Inserts a receipt unless its id exists (a concurrent twin waits on the
   * primary key, then finds it); returns the stored receipt either way.
   */
  async insertReceipt(q: Queryable, r: ReceiptRow): Promise<{ row: ReceiptRow; inserted: boolean }> {
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
  async insertReport(q: Queryable, r: AdapterReportRow): Promise<{ row: AdapterReportRow; inserted: boolean }> {
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
