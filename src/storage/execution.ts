import type { EvidenceEntry } from "./evidence.js";

/** A stored execution receipt (early access). */
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

/** A stored adapter report (early access). */
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

/** A stored reconciliation (early access). */
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

/** What a report's recording returns: the stored row, and whether this call stored it. */
export interface Recorded<R> {
  /** The row as stored: the one just written, or the one already stored under the same id. */
  row: R;
  /** True when this call wrote it (with its evidence record); false when the id was already taken. */
  inserted: boolean;
}

/**
 * Execution receipts, adapter reports and reconciliations (early access). Each is written with
 * its evidence record in one transaction (both or neither), and the record's `evidence_id` is
 * stored on the row. Receipts and reports are idempotent per id within the organization.
 */
export interface ExecutionStore {
  /**
   * Stores a receipt and `evidence` unless the organization already has a receipt with its
   * `receipt_id`; then nothing is written and the stored receipt is returned with
   * `inserted: false` (a concurrent twin waits for the first to commit, then finds it).
   */
  recordReceipt(receipt: Omit<ReceiptRow, "evidence_id">, evidence: EvidenceEntry): Promise<Recorded<ReceiptRow>>;

  /**
   * Stores an adapter report and `evidence` unless the organization already has a report with
   * its `report_id`; then nothing is written and the stored report is returned with
   * `inserted: false`.
   */
  recordAdapterReport(report: Omit<AdapterReportRow, "evidence_id">, evidence: EvidenceEntry): Promise<Recorded<AdapterReportRow>>;

  /** The organization's receipts for a decision, in the order they were received (empty when there are none). */
  receipts(organizationId: string, decisionId: string): Promise<ReceiptRow[]>;

  /** Stores a reconciliation and `evidence` together; returns the reconciliation as stored. */
  recordReconciliation(reconciliation: Omit<ReconciliationRow, "evidence_id">, evidence: EvidenceEntry): Promise<ReconciliationRow>;
}
