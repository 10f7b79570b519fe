import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { MandateError } from "../base/errors.js";
import type { Intents } from "../domain/intents.js";
import { IntentService, type SubmitIntentRequest } from "../gen/mandate/v1/intents_pb.js";
import { anyCaller } from "./context.js";
import { ts } from "./convert.js";
import { outcomes, statuses } from "./decisions.js";

/** IntentService: the single endpoint. */
export class IntentServiceImpl implements ServiceImpl<typeof IntentService> {
  constructor(private readonly intents: Intents) {}

  async submitIntent(req: SubmitIntentRequest, ctx: HandlerContext) {
    const caller = anyCaller(ctx);
    if (caller.kind !== "agent_signed") throw new MandateError("missing_credentials", "Intents are signed by the agent.");
    const d = await this.intents.submit(caller.keyId, caller.signature, req.intent);
    // Exactly the spec's three shapes: status only on HUMAN_REVIEW (PENDING when decided; a
    // replayed nonce answers the decision as it stands now).
    return {
      decisionId: d.decision_id,
      outcome: outcomes.toProto(d.outcome),
      reason: d.reason,
      evidenceId: d.evidence_id,
      status: d.status ? statuses.toProto(d.status) : 0,
      evaluatedAt: ts(d.evaluated_at),
    };
  }
}
