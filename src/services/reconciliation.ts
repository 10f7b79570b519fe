import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { Execution, ReconciliationRow } from "../domain/execution.js";
import { ReconciliationService } from "../gen/mandate/v1alpha/execution_pb.js";
import { orgCaller } from "./context.js";
import { enumCodec, ts } from "./convert.js";

/** ReconciliationStatus enum order (mandate.v1). */
export const reconciliationStatus = enumCodec(["MATCHED", "MISMATCHED", "EXECUTION_FAILED", "PARTIAL", "RECEIPT_MISSING", "INDETERMINATE"] as const, "status");

/** The (early access) Reconciliation message of a row. */
export const reconciliationMessage = (r: Pick<ReconciliationRow, "status" | "receipt_id" | "reported_by"> & { reconciled_at: Date | string }) => ({
  status: reconciliationStatus.toProto(r.status),
  receiptId: r.receipt_id,
  reportedBy: r.reported_by,
  reconciledAt: ts(new Date(r.reconciled_at)),
});

/** ReconciliationService (platform-internal, operator key). */
export class ReconciliationServiceImpl implements ServiceImpl<typeof ReconciliationService> {
  constructor(private readonly execution: Execution) {}

  async reconcile(req: { decisionId: string }, ctx: HandlerContext) {
    return reconciliationMessage(await this.execution.reconcile(orgCaller(ctx), req.decisionId));
  }
}
