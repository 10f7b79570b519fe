import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { MandateError } from "../base/errors.js";
import type { Execution, ReconciliationRow } from "../domain/execution.js";
import { ExecutionReportService, ReconciliationService } from "../gen/mandate/v1alpha/execution_pb.js";
import { anyCaller, orgCaller } from "./context.js";
import { enumCodec, ts } from "./convert.js";

const executionStatus = enumCodec(["executed", "failed", "partial"] as const, "status");
const comparison = enumCodec(["MATCHED", "MISMATCHED"] as const, "comparison");
/** ReconciliationStatus enum order (mandate.v1). */
export const reconciliationStatus = enumCodec(["MATCHED", "MISMATCHED", "EXECUTION_FAILED", "PARTIAL", "RECEIPT_MISSING", "INDETERMINATE"] as const, "status");

/** The (early access) Reconciliation message of a row. */
export const reconciliationMessage = (r: Pick<ReconciliationRow, "status" | "receipt_id" | "reported_by"> & { reconciled_at: Date | string }) => ({
  status: reconciliationStatus.toProto(r.status),
  receiptId: r.receipt_id,
  reportedBy: r.reported_by,
  reconciledAt: ts(new Date(r.reconciled_at)),
});

function signed(ctx: HandlerContext) {
  const caller = anyCaller(ctx);
  if (caller.kind !== "agent_signed") throw new MandateError("missing_credentials", "Reports are signed by the adapter or destination identity.");
  return caller;
}

/** ExecutionReportService (early access). */
export class ExecutionReportServiceImpl implements ServiceImpl<typeof ExecutionReportService> {
  constructor(private readonly execution: Execution) {}

  async submitExecutionReceipt(req: { signedReceipt: Uint8Array }, ctx: HandlerContext) {
    const c = signed(ctx);
    const r = await this.execution.submitReceipt(c.keyId, c.signature, req.signedReceipt);
    return {
      receiptId: r.receipt_id,
      capabilityId: r.capability_id,
      decisionId: r.decision_id,
      status: executionStatus.toProto(r.status),
      executedFields: r.executed_fields,
      reportedBy: r.reported_by,
      reportedAt: ts(r.reported_at),
      evidenceId: r.evidence_id,
    };
  }

  async submitAdapterReport(req: { signedReport: Uint8Array }, ctx: HandlerContext) {
    const c = signed(ctx);
    const r = await this.execution.submitAdapterReport(c.keyId, c.signature, req.signedReport);
    return { reportId: r.report_id, decisionId: r.decision_id, adapterId: r.adapter_id, comparison: comparison.toProto(r.comparison), differingFields: r.differing_fields, evidenceId: r.evidence_id };
  }
}

/** ReconciliationService (platform-internal, operator key). */
export class ReconciliationServiceImpl implements ServiceImpl<typeof ReconciliationService> {
  constructor(private readonly execution: Execution) {}

  async reconcile(req: { decisionId: string }, ctx: HandlerContext) {
    return reconciliationMessage(await this.execution.reconcile(orgCaller(ctx), req.decisionId));
  }
}
