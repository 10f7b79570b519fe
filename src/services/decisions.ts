import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { JsonObject } from "@bufbuild/protobuf";
import type { Decisions, DecisionRow, ReviewEntry } from "../domain/decisions.js";
import { DecisionService, type ListDecisionsRequest, type ReviewDecisionRequest } from "../gen/mandate/v1/decisions_pb.js";
import { anyCaller, orgCaller } from "./context.js";
import { enumCodec, ts } from "./convert.js";
import { reconciliationMessage } from "./reconciliation.js";

export const outcomes = enumCodec(["ALLOW", "DENY", "HUMAN_REVIEW"] as const, "outcome");

export const statuses = enumCodec(["PENDING", "RESOLVED"] as const, "status");

const resolutions = enumCodec(["approved", "rejected"] as const, "resolution");

const review = (e: ReviewEntry) => ({ resolvedBy: e.resolved_by, resolvedAt: ts(new Date(e.resolved_at)), reason: e.reason });

/** The Decision message of a row (GET and review answers). */
const decisionMessage = (d: DecisionRow) => ({
  decisionId: d.decision_id,
  outcome: outcomes.toProto(d.outcome),
  reason: d.reason,
  evidenceId: d.evidence_id,
  evaluatedAt: ts(d.evaluated_at),
  status: d.status ? statuses.toProto(d.status) : 0,
  resolution: d.resolution ? { resolution: resolutions.toProto(d.resolution.resolution), ...review(d.resolution) } : undefined,
  approvals: d.approvals.map(review),
  agentId: d.agent_id,
  action: d.action,
  intent: d.intent as JsonObject,
  policyVersions: d.policy_versions,
  graphVersion: d.graph_version,
  bundleDigest: d.bundle_digest,
  reconciliation: d.reconciliation ? reconciliationMessage(d.reconciliation) : undefined,
});

/** DecisionService: reads and human review. */
export class DecisionServiceImpl implements ServiceImpl<typeof DecisionService> {
  constructor(private readonly decisions: Decisions) {}

  async getDecision(req: { decisionId: string }, ctx: HandlerContext) {
    return decisionMessage(await this.decisions.get(anyCaller(ctx), req.decisionId));
  }

  async listDecisions(req: ListDecisionsRequest, ctx: HandlerContext) {
    const { rows, next } = await this.decisions.list(
      orgCaller(ctx),
      {
        status: req.status ? statuses.fromProto(req.status, "status") : null,
        outcome: req.outcome ? outcomes.fromProto(req.outcome, "outcome") : null,
        agentId: req.agentId || null,
      },
      req.pageSize,
      req.pageToken,
    );
    return { decisions: rows.map(decisionMessage), nextPageToken: next };
  }

  async reviewDecision(req: ReviewDecisionRequest, ctx: HandlerContext) {
    const resolution = resolutions.fromProto(req.resolution, "resolution");
    return decisionMessage(await this.decisions.review(orgCaller(ctx), req.decisionId, resolution, req.reason));
  }
}
