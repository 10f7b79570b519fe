import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PolicyService } from "../../src/gen/mandate/v1/policies_pb.js";
import {
  call,
  decisionCount,
  evidenceCount,
  expectResult,
  intentDoc,
  newAgent,
  newApiKey,
  newOrgFixture,
  signBody,
  submitIntent,
  TRANSPORTS,
  type OrgFixture,
  type TestAgent,
} from "../support/agents.js";
import { startService, type TestService } from "../support/service.js";

/*
 * POST /v1/policies:replay (PolicyService.ReplayPolicies): a draft evaluated against the
 * organization's recorded Intents, each with the input recorded in its decision's evidence,
 * answering exactly the decisions it would change, recording nothing.
 */

type Outcome = "ALLOW" | "DENY" | "HUMAN_REVIEW";

// v1 (published): review above 500, else allow.
const V1 = {
  actions: ["pay"],
  rules: [
    { id: "large", when: { amount: { gt: 500 } }, outcome: "HUMAN_REVIEW", reason: "large_payment" },
    { id: "small", when: { amount: { lte: 500 } }, outcome: "ALLOW", reason: "small_payment" },
  ],
};
const v1 = (amount: number): [Outcome, string] => (amount > 500 ? ["HUMAN_REVIEW", "large_payment"] : ["ALLOW", "small_payment"]);

// v2 (draft): review above 300, deny above 900.
const V2 = {
  actions: ["pay"],
  rules: [
    { id: "huge", when: { amount: { gt: 900 } }, outcome: "DENY", reason: "huge_payment" },
    { id: "large", when: { amount: { gt: 300 } }, outcome: "HUMAN_REVIEW", reason: "large_payment" },
    { id: "small", when: { amount: { lte: 300 } }, outcome: "ALLOW", reason: "small_payment" },
  ],
};
const v2 = (amount: number): [Outcome, string] => (amount > 900 ? ["DENY", "huge_payment"] : amount > 300 ? ["HUMAN_REVIEW", "large_payment"] : ["ALLOW", "small_payment"]);

const RECORDED = 1000;

async function ok(res: { status: number; body: any }, what: string): Promise<any> {
  expect(res.status, `${what}: ${JSON.stringify(res.body)}`).toBe(200);
  return res.body;
}

describe("replay of recorded Intents (shadow diff)", () => {
  let svc: TestService;
  let org: OrgFixture;
  let agent: TestAgent;
  let approver: string;
  /** decision_id → amount of every recorded Intent. */
  const amounts = new Map<string, number>();

  beforeAll(async () => {
    // Not a test of the time limit: room for a first evaluation in a worker on a loaded machine.
    svc = await startService({ MANDATE_EVALUATION_TIMEOUT_MS: "5000" } as never);
    org = await newOrgFixture(svc);
    approver = (await newApiKey(svc, org.apiKey, ["POLICY_APPROVER"])).apiKey;
    agent = await newAgent(svc, org);
    await ok(await svc.v1("POST", "/v1/policies", { bearer: org.apiKey, body: { policy_key: "pay", description: "payments", source: { rules: V1 } } }), "create v1");
    await ok(await svc.v1("POST", "/v1/policies/pay/versions/1/submit", { bearer: org.apiKey }), "submit v1");
    await ok(await svc.v1("POST", "/v1/policies/pay/versions/1/approve", { bearer: approver }), "approve v1");
    await ok(await svc.v1("POST", "/v1/policies/pay/versions/1/publish", { bearer: approver }), "publish v1");
    await ok(await svc.v1("POST", "/v1/policies/pay/versions", { bearer: org.apiKey, body: { source: { rules: V2 } } }), "draft v2");

    // 1,000 signed Intents through the real API, 25 at a time, amounts 0..999.
    const all = Array.from({ length: RECORDED }, (_, i) => i);
    for (let at = 0; at < all.length; at += 25) {
      await Promise.all(
        all.slice(at, at + 25).map(async (amount) => {
          const res = await submitIntent(svc, "v1", signBody(agent, intentDoc(agent.agentId, { action: "pay", amount, currency: "USD" })));
          expectResult(res, 200);
          expect([res.body.outcome, res.body.reason]).toEqual(v1(amount));
          amounts.set(res.body.decision_id, amount);
        }),
      );
    }
  }, 120_000);

  afterAll(async () => {
    await svc?.close();
  });

  it("records the evaluation's now, agent and principal in each decision's evidence", async () => {
    const before = Date.now();
    const res = await submitIntent(svc, "v1", signBody(agent, intentDoc(agent.agentId, { action: "pay", amount: 1, currency: "USD" })));
    const after = Date.now();
    expectResult(res, 200);
    const record = await ok(await svc.v1("GET", `/v1/evidence/${res.body.evidence_id}`, { bearer: org.apiKey }), "evidence");
    const principal = await ok(await svc.v1("GET", `/v1/principals/${org.principalId}`, { bearer: org.apiKey }), "principal");
    const payload = record.payload;
    expect(payload.agent).toEqual({ agent_id: agent.agentId, state: "active" });
    expect(payload.principal).toEqual({ principal_id: org.principalId, external_ref: principal.external_ref, kind: "person" });
    expect(Date.parse(payload.now)).toBeGreaterThanOrEqual(before);
    expect(Date.parse(payload.now)).toBeLessThanOrEqual(after);
    expect(payload.now).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
  });

  it("answers exactly the flips a draft predicts over the last 1,000 Intents, and records nothing", async () => {
    // The test above recorded one more Intent (amount 1, unchanged by v2): the last 1,000 are it and the newest 999 of ours.
    const decisions = await decisionCount(svc, org.apiKey, agent.agentId);
    const evidence = await evidenceCount(svc, org.apiKey);
    for (const transport of TRANSPORTS) {
      const res = await call(svc, transport, PolicyService.method.replayPolicies, { policy_versions: { pay: 2 } }, { bearer: org.apiKey });
      expectResult(res, 200);
      const body = res.body;
      expect(body.evaluated).toBe(RECORDED);
      expect(body.policy_versions).toEqual({ pay: 2, starter: 1 });
      expect(body.bundle_digest).toMatch(/^[0-9a-f]{64}$/);
      const flippedIds = new Set<string>(body.flipped.map((f: any) => f.decision_id));
      const predicted = new Map<string, { old: [Outcome, string]; new: [Outcome, string] }>();
      for (const [id, amount] of amounts) {
        const [o, n] = [v1(amount), v2(amount)];
        if (o[0] !== n[0] || o[1] !== n[1]) predicted.set(id, { old: o, new: n });
      }
      // Every flip is predicted, with its old and new outcome and reason.
      for (const f of body.flipped) {
        const p = predicted.get(f.decision_id);
        expect(p, `unexpected flip ${JSON.stringify(f)}`).toBeDefined();
        expect([f.old.outcome, f.old.reason]).toEqual(p!.old);
        expect([f.new.outcome, f.new.reason]).toEqual(p!.new);
      }
      // Predicted flips: amounts 301..500 (ALLOW → HUMAN_REVIEW) and 901..999 (HUMAN_REVIEW → DENY), 299 in all;
      // the one of ours outside the window (recorded in the first batch, amount under 25) flips in neither.
      expect(predicted.size).toBe(200 + 99);
      expect(flippedIds).toEqual(new Set(predicted.keys()));
      expect(body.unchanged).toBe(RECORDED - predicted.size);
      expect(body.flips_by_outcome).toEqual([
        { old_outcome: "ALLOW", new_outcome: "HUMAN_REVIEW", count: 200 },
        { old_outcome: "HUMAN_REVIEW", new_outcome: "DENY", count: 99 },
      ]);
    }
    expect(await decisionCount(svc, org.apiKey, agent.agentId)).toBe(decisions);
    expect(await evidenceCount(svc, org.apiKey)).toBe(evidence);
  }, 60_000);

  it("replays each Intent with its recorded now, agent and principal, not the clock's", async () => {
    const principal = await ok(await svc.v1("GET", `/v1/principals/${org.principalId}`, { bearer: org.apiKey }), "principal");
    // Every recorded Intent was evaluated before this instant, and the replay runs after it.
    const cutoff = new Date().toISOString();
    const rego = [
      'package mandate.policies.pay',
      "",
      'actions := {"pay"}',
      "",
      `results contains {"outcome": "ALLOW", "reason": "recorded_input", "rule": "t"} if {`,
      `  input.now < "${cutoff}"`,
      '  input.agent.state == "active"',
      `  input.agent.agent_id == "${agent.agentId}"`,
      `  input.principal.external_ref == "${principal.external_ref}"`,
      '  input.principal.kind == "person"',
      "}",
      "",
    ].join("\n");
    const v3 = await ok(await svc.v1("POST", "/v1/policies/pay/versions", { bearer: org.apiKey, body: { source: { rego } } }), "draft v3");
    const res = await call(svc, "v1", PolicyService.method.replayPolicies, { policy_versions: { pay: v3.version }, limit: 50 }, { bearer: org.apiKey });
    expectResult(res, 200);
    expect(res.body.evaluated).toBe(50);
    // Only an input of the recorded instant, agent and principal allows; the clock's `now` would leave every one HUMAN_REVIEW no_matching_rule.
    expect(res.body.flipped).toHaveLength(50);
    expect(res.body.flipped.every((f: any) => f.new.outcome === "ALLOW" && f.new.reason === "recorded_input")).toBe(true);
  }, 60_000);

  it("takes a limit of 1..10,000 (422 outside), and needs POLICY_AUTHOR or POLICY_APPROVER", async () => {
    const small = await call(svc, "v1", PolicyService.method.replayPolicies, { policy_versions: { pay: 2 }, limit: 10 }, { bearer: org.apiKey });
    expectResult(small, 200);
    expect(small.body.evaluated).toBe(10);
    for (const limit of [10_001, -1]) {
      for (const transport of TRANSPORTS) {
        const res = await call(svc, transport, PolicyService.method.replayPolicies, { policy_versions: { pay: 2 }, limit }, { bearer: org.apiKey });
        expectResult(res, 422, "validation_failed");
        expect(res.body.errors).toEqual([expect.objectContaining({ field: "limit", code: "out_of_range" })]);
      }
    }
    const unknown = await call(svc, "v1", PolicyService.method.replayPolicies, { policy_versions: { pay: 99 } }, { bearer: org.apiKey });
    expectResult(unknown, 422, "validation_failed");
    expect(unknown.body.errors).toEqual([expect.objectContaining({ field: "policy_versions.pay", code: "not_found" })]);

    const reader = await newApiKey(svc, org.apiKey, ["DECISION_READ"]);
    expectResult(await call(svc, "v1", PolicyService.method.replayPolicies, { policy_versions: { pay: 2 }, limit: 1 }, { bearer: reader.apiKey }), 403, "permission_denied");
    const author = await newApiKey(svc, org.apiKey, ["POLICY_AUTHOR"]);
    expectResult(await call(svc, "v1", PolicyService.method.replayPolicies, { policy_versions: { pay: 2 }, limit: 1 }, { bearer: author.apiKey }), 200);
    expectResult(await call(svc, "v1", PolicyService.method.replayPolicies, { policy_versions: { pay: 2 }, limit: 1 }, { bearer: approver }), 200);
  }, 60_000);

  it("answers a draft failing at run time on a recorded Intent with 422 policy_runtime_error naming the decision and the place", async () => {
    const rego = [
      "package mandate.policies.pay",
      "",
      'actions := {"pay"}',
      "",
      "x := 1 if input.intent.amount > 0",
      "x := 2 if input.intent.amount > 1",
      "",
      'results contains {"outcome": "ALLOW", "reason": "never", "rule": "c"} if x == 1',
      "",
    ].join("\n");
    const bad = await ok(await svc.v1("POST", "/v1/policies/pay/versions", { bearer: org.apiKey, body: { source: { rego } } }), "conflicting draft");
    const decisions = await decisionCount(svc, org.apiKey, agent.agentId);
    for (const transport of TRANSPORTS) {
      const res = await call(svc, transport, PolicyService.method.replayPolicies, { policy_versions: { pay: bad.version }, limit: 20 }, { bearer: org.apiKey });
      expectResult(res, 422, "policy_runtime_error");
      expect(res.body.message).toMatch(/^Replaying decision dec_\S+: .*policies\/pay\.rego:\d+:\d+/);
      expect(res.body.errors).toEqual([expect.objectContaining({ field: "policies/pay.rego", code: "runtime_error", line: expect.any(Number), column: expect.any(Number) })]);
    }
    expect(await decisionCount(svc, org.apiKey, agent.agentId)).toBe(decisions);
  }, 60_000);

  it("evaluates a draft graph version in place of the active graph", async () => {
    const other = await newOrgFixture(svc);
    const a = await newAgent(svc, other);
    const principal = await ok(await svc.v1("GET", `/v1/principals/${other.principalId}`, { bearer: other.apiKey }), "principal");
    const approverKey = (await newApiKey(svc, other.apiKey, ["POLICY_APPROVER"])).apiKey;
    const authority = { actions: ["vendor_payment"], rules: [{ id: "authority", authority: true }] };
    await ok(await svc.v1("POST", "/v1/policies", { bearer: other.apiKey, body: { policy_key: "payments", description: "", source: { rules: authority } } }), "create");
    await ok(await svc.v1("POST", "/v1/policies/payments/versions/1/submit", { bearer: other.apiKey }), "submit");
    await ok(await svc.v1("POST", "/v1/policies/payments/versions/1/approve", { bearer: approverKey }), "approve");
    await ok(await svc.v1("POST", "/v1/policies/payments/versions/1/publish", { bearer: approverKey }), "publish");
    // No graph is active: every payment is DENY no_delegated_authority.
    for (const [amount, currency] of [[10, "USD"], [200, "USD"], [10, "EUR"]] as const) {
      const res = await submitIntent(svc, "v1", signBody(a, intentDoc(a.agentId, { action: "vendor_payment", amount, currency })));
      expect(res.body).toMatchObject({ outcome: "DENY", reason: "no_delegated_authority" });
    }
    const graph = {
      roles: [{ role: "clerk", reports_to: null }],
      memberships: [{ principal: principal.external_ref, role: "clerk" }],
      limits: [{ holder: "role:clerk", action: "vendor_payment", currency: "USD", max_amount: 100 }],
      delegations: [],
      approval_matrix: [{ action: "vendor_payment", currency: "USD", up_to_amount: 100, approvals_required: 0 }],
    };
    const draft = await ok(await svc.v1("POST", "/v1/authority-graph/versions", { bearer: other.apiKey, body: { graph } }), "draft graph");
    const res = await call(svc, "v1", PolicyService.method.replayPolicies, { graph_version: draft.version }, { bearer: other.apiKey });
    expectResult(res, 200);
    // Newest first: the EUR payment stays without authority, 200 USD is over the draft's limit, 10 USD within it.
    expect(res.body).toMatchObject({ evaluated: 3, unchanged: 1, graph_version: draft.version, policy_versions: { payments: 1, starter: 1 } });
    expect(res.body.flipped.map((f: any) => [f.old.reason, f.new.outcome, f.new.reason])).toEqual([
      ["no_delegated_authority", "DENY", "exceeds_approval_limit"],
      ["no_delegated_authority", "ALLOW", "within_delegated_authority"],
    ]);
    const missing = await call(svc, "v1", PolicyService.method.replayPolicies, { graph_version: 999 }, { bearer: other.apiKey });
    expectResult(missing, 422, "validation_failed");
  }, 60_000);
});
