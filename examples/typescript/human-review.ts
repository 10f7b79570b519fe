/**
 * Human review with the TypeScript client: a HUMAN_REVIEW resolved by two reviewers (dual
 * approval), the single-use Capability issued from the approved review, and a rejection.
 *
 *     MANDATE_BASE_URL=http://127.0.0.1:8080 npx tsx examples/typescript/human-review.ts
 *
 * The last line printed is a JSON summary (test/e2e/human-review-examples.test.ts reads it).
 */
import { randomUUID } from "node:crypto";
import { AgentKey, agentIdentity, boundConstraints, MandateClient, PermissionDeniedError, ConflictError } from "@mandate/client";

const BASE_URL = process.env.MANDATE_BASE_URL ?? "http://127.0.0.1:8080";

// Payments up to 1,000 pass; up to 10,000 need one reviewer; above, two (requires_dual_approval).
const PAYMENTS_POLICY = {
  actions: ["vendor_payment"],
  rules: [
    { id: "small", when: { amount: { lt: 1000 } }, outcome: "ALLOW", reason: "small_payment" },
    { id: "review", when: { amount: { gte: 1000, lt: 10000 } }, outcome: "HUMAN_REVIEW", reason: "requires_approval" },
    { id: "dual", when: { amount: { gte: 10000 } }, outcome: "HUMAN_REVIEW", reason: "requires_dual_approval" },
  ],
};

async function main(): Promise<void> {
  // A sandbox organization: its key holds every permission, REVIEWER included. A second key is
  // the second reviewer (and the policy's approver: four eyes).
  const sandbox = await new MandateClient({ base_url: BASE_URL }).createSandbox(`review-${randomUUID().slice(0, 10)}@example.com`);
  const alice = new MandateClient({ base_url: BASE_URL, api_key: sandbox.api_key });
  const bob = alice.withApiKey((await alice.createApiKey("bob", ["REVIEWER", "POLICY_APPROVER", "DECISION_READ"])).api_key);

  const created = await alice.createPolicy("payments", PAYMENTS_POLICY);
  await alice.submitPolicyVersion("payments", created.version);
  await bob.approvePolicyVersion("payments", created.version);
  await bob.publishPolicyVersion("payments", created.version);

  const principal = await alice.createPrincipal({ display_name: "Pat Payables", kind: "person" });
  const key = await AgentKey.generate();
  const agent = await alice.registerAgent({ name: "payables-bot", principal_id: principal.principal_id, key });
  await alice.activate(agent);
  const me = agentIdentity(agent, key);

  // 1. An Intent above 10,000 waits for two reviewers.
  const intent = { action: "vendor_payment", amount: 25000, currency: "USD", counterparty: "ACME Corp" };
  const pending = await alice.submitIntent(me, intent);
  console.log(`${pending.outcome} (${pending.reason}) ${pending.status}: ${pending.decision_id}`);

  // 2. The first approval is recorded; the review stays PENDING.
  const first = await alice.reviewDecision(pending.decision_id, "approved", "Invoice INV-1042 matches the PO");
  console.log(`after alice: ${first.status}, approvals by ${first.approvals?.map((a) => a.resolved_by).join(", ")}`);

  // The same identity cannot approve twice.
  let sameKeyRefused = "";
  try {
    await alice.reviewDecision(pending.decision_id, "approved", "approving again");
  } catch (err) {
    if (!(err instanceof PermissionDeniedError)) throw err;
    sameKeyRefused = err.detail;
    console.log(`alice again: ${err.status} ${err.detail}`);
  }

  // 3. A second reviewer resolves it. The outcome keeps reading HUMAN_REVIEW.
  const resolved = await bob.reviewDecision(pending.decision_id, "approved", "Second approval: vendor verified");
  console.log(`after bob: ${resolved.outcome} ${resolved.status}, resolution ${resolved.resolution?.resolution} by ${resolved.resolution?.resolved_by}`);

  // 4. The approved review gets its one Capability (from-review), verified and consumed as any other.
  const cap = await alice.issueCapabilityFromReview(pending.decision_id, { audience: "erp-gateway", issued_by: "payables-bot", ttl_seconds: 120 });
  const verified = await alice.verifyCapability({ token: cap.token, audience: "erp-gateway", action: "vendor_payment", resource: "", constraints: boundConstraints(intent) });
  console.log(`capability ${verified.capability_id} consumed for ${verified.decision_id}`);

  // 5. A single-approval review rejected: no Capability can be issued from it.
  const small = await alice.submitIntent(me, { ...intent, amount: 2500 });
  const rejected = await bob.reviewDecision(small.decision_id, "rejected", "Duplicate of INV-1042");
  let fromRejected = "";
  try {
    await alice.issueCapabilityFromReview(small.decision_id, { audience: "erp-gateway", issued_by: "payables-bot" });
  } catch (err) {
    if (!(err instanceof ConflictError)) throw err;
    fromRejected = err.detail;
  }
  console.log(`rejected: ${rejected.status} ${rejected.resolution?.resolution}; from-review refused: ${fromRejected}`);

  console.log(
    JSON.stringify({
      pending: { outcome: pending.outcome, reason: pending.reason, status: pending.status },
      after_first: { status: first.status, approvals: first.approvals?.length ?? 0 },
      same_key_refused: sameKeyRefused,
      resolved: { outcome: resolved.outcome, status: resolved.status, resolution: resolved.resolution?.resolution, approvals: resolved.approvals?.length ?? 0 },
      capability_consumed: verified.decision_id === pending.decision_id,
      rejected: { status: rejected.status, resolution: rejected.resolution?.resolution },
      from_rejected: fromRejected,
    }),
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
