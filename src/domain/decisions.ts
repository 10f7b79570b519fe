import type { Caller, OrgCaller } from "../base/caller.js";
import { MandateError, notFound, validationFailed } from "../base/errors.js";
import { decodeCursor, encodeCursor, pageSize } from "../base/pagination.js";
import type { DecisionRow, DecisionStore, ReviewChange, ReviewEntry } from "../storage/decisions.js";
import { NotFoundError } from "../storage/errors.js";
import { AgentSignatures } from "./signatures.js";

/** The stored shapes this module hands to services. */
export type { DecisionRow, ReviewEntry } from "../storage/decisions.js";

/** Decisions: reads (by keys or by the deciding agent) and human review. */
export class Decisions {
  constructor(
    private readonly decisions: DecisionStore,
    private readonly signatures: AgentSignatures,
    private readonly skewSeconds: number,
  ) {}

  /**
   * Reads a decision. An organization caller needs DECISION_READ; an agent
   * signs `"GET /v1/decisions/<id>\n<X-Service-Timestamp>"` and may read only its own.
   */
  async get(caller: Caller, decisionId: string): Promise<DecisionRow> {
    if (caller.kind === "agent_signed") {
      if (!caller.timestamp) throw new MandateError("missing_credentials", "An agent-signed read needs X-Service-Timestamp.");
      const signed = Buffer.from(`GET /v1/decisions/${decisionId}\n${caller.timestamp}`, "utf8");
      // Only a signer that may still act reads: a suspended agent polls its reviews; a revoked or retired one reads nothing.
      const cert = await this.signatures.verifyLive(caller.keyId, caller.signature, signed, true);
      const at = Date.parse(caller.timestamp);
      if (Number.isNaN(at) || Math.abs(Date.now() - at) > this.skewSeconds * 1000) {
        throw new MandateError("request_expired", `X-Service-Timestamp must be within ${this.skewSeconds} s of server time.`);
      }
      const row = await this.decisions.get(cert.organization_id, decisionId);
      if (!row || row.agent_id !== cert.agent_id) throw notFound("Decision");
      return row;
    }
    if (caller.kind !== "key" && caller.kind !== "operator") throw new MandateError("missing_credentials", "Credentials are required.");
    if (!caller.permissions.has("DECISION_READ")) throw new MandateError("permission_denied", "This operation needs the DECISION_READ permission.");
    const row = await this.decisions.get(caller.organizationId, decisionId);
    if (!row) throw notFound("Decision");
    return row;
  }

  /** The review queue, newest first. */
  async list(
    caller: OrgCaller,
    filter: { status: string | null; outcome: string | null; agentId: string | null },
    size: number,
    token: string,
  ): Promise<{ rows: DecisionRow[]; next: string }> {
    const limit = pageSize(size);
    const cursor = decodeCursor(token);
    const before = cursor && { at: cursor.createdAt, id: cursor.id };
    const rows = await this.decisions.list(caller.organizationId, { ...filter, before, limit: limit + 1 });
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    const next = rows.length > limit && last ? encodeCursor({ createdAt: last.evaluated_at, id: last.decision_id }) : "";
    return { rows: page, next };
  }

  /**
   * Resolves a pending HUMAN_REVIEW. One rejection resolves it rejected; an
   * approval resolves it unless the review needs dual approval, which takes
   * two distinct identities. The outcome keeps reading HUMAN_REVIEW.
   */
  async review(caller: OrgCaller, decisionId: string, resolution: "approved" | "rejected", reason: string): Promise<DecisionRow> {
    const note = reason.trim();
    if (!note) throw validationFailed([{ field: "reason", code: "required", message: "a reviewer's note is required" }]);
    if (note.length > 2000) throw validationFailed([{ field: "reason", code: "too_long", message: "at most 2000 characters" }]);
    const step = (d: DecisionRow): ReviewChange => {
      if (d.outcome !== "HUMAN_REVIEW") throw new MandateError("invalid_transition", `A ${d.outcome} decision is final and has no review.`);
      if (d.status === "RESOLVED") throw new MandateError("review_already_resolved", "This review is already resolved.");
      const entry: ReviewEntry = { resolution, resolved_by: caller.identity, resolved_at: new Date().toISOString(), reason: note };
      const approvals = [...d.approvals];
      let final: ReviewEntry | null = null;
      if (resolution === "rejected") final = entry;
      else {
        if (approvals.some((a) => a.resolved_by === caller.identity)) {
          throw new MandateError("permission_denied", "This identity already approved; a second approval must come from another reviewer.");
        }
        approvals.push(entry);
        const needed = d.reason === "requires_dual_approval" ? 2 : 1;
        if (approvals.length >= needed) final = entry;
      }
      const status = final ? "RESOLVED" : "PENDING";
      return {
        status,
        resolution: final,
        approvals,
        evidence: {
          kind: final ? "decision.resolved" : "decision.approval_recorded",
          payload: { decision_id: decisionId, resolution, reason: note, by: caller.identity, status, approvals_so_far: approvals.length },
        },
      };
    };
    try {
      return await this.decisions.review(caller.organizationId, decisionId, step);
    } catch (err) {
      if (err instanceof NotFoundError) throw notFound("Decision");
      throw err;
    }
  }
}
