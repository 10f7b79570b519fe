import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { MandateError } from "../base/errors.js";
import type { Execution } from "../domain/execution.js";
import { ExecutionReportService } from "../gen/mandate/v1alpha/execution_pb.js";
import { anyCaller } from "./context.js";
import { enumCodec, ts } from "./convert.js";

const executionStatus = enumCodec(["executed", "failed", "partial"] as const, "status");

const comparison = enumCodec(["MATCHED", "MISMATCHED"] as const, "comparison");

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
