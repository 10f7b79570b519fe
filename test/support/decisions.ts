import { createHash, randomUUID } from "node:crypto";
import { newId } from "../../src/domain/ids.js";
import type { NewDecision } from "../../src/storage/decisions.js";
import type { PolicyStore } from "../../src/storage/policies.js";
import type { TestAgent } from "./agents.js";

/** A decision as the Ledger takes it (the ledger assigns its evidence record). */
export type DraftDecision = Omit<NewDecision, "evidence_id">;

/**
 * A decision of `agent` evaluated on its organization's current policy head, ALLOW
 * `reference_noop` on a fresh nonce unless `fields` say otherwise, for suites that record
 * decisions through the Ledger rather than through the Intent path.
 */
export async function draftDecision(policies: Pick<PolicyStore, "head">, agent: TestAgent, fields: Partial<DraftDecision> = {}): Promise<DraftDecision> {
  const head = await policies.head(agent.org.organizationId);
  if (!head) throw new Error("the organization has no policy head");
  const nonce = randomUUID();
  return {
    decision_id: newId("dec"),
    organization_id: agent.org.organizationId,
    agent_id: agent.agentId,
    nonce,
    body_sha256: createHash("sha256").update(nonce).digest(),
    intent: { agent_id: agent.agentId, action: "reference_noop", nonce },
    action: "reference_noop",
    outcome: "ALLOW",
    reason: "reference_noop_allowed",
    status: null,
    policy_versions: head.policy_versions,
    graph_version: head.graph_version,
    bundle_digest: head.bundle_digest,
    integration_id: null,
    contract_version: null,
    evaluated_at: new Date(),
    ...fields,
  };
}
