import { randomUUID } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PolicyService } from "../../src/gen/mandate/v1/policies_pb.js";
import {
  call,
  decisionCount,
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
 * POST /v1/policies:evaluate (PolicyService.EvaluatePolicy), the dry run: a set `now`, the
 * Intent validated exactly as POST /v1/intents validates it, the versions, graph and bundle
 * evaluated, what each rule did, and a rule failing at run time answered 422
 * policy_runtime_error with its place. Nothing is recorded.
 */

const PAY_YAML = `actions: [pay]
rules:
  - id: large
    when:
      amount: { gt: 500 }
    outcome: HUMAN_REVIEW
    reason: large_payment
  - id: small
    when:
      amount: { lte: 500 }
    outcome: ALLOW
    reason: small_payment
`;

const CONFLICT = `package mandate.policies.conflict

actions := {"boom"}

x := 1 if input.intent.amount > 0
x := 2 if input.intent.amount > 1

results contains {"outcome": "ALLOW", "reason": "never", "rule": "c"} if x == 1
`;

const evaluate = (svc: TestService, transport: (typeof TRANSPORTS)[number], body: Record<string, unknown>, bearer: string) =>
  call(svc, transport, PolicyService.method.evaluatePolicy, body, { bearer });

async function ok(res: { status: number; body: any }, what: string): Promise<any> {
  expect(res.status, `${what}: ${JSON.stringify(res.body)}`).toBe(200);
  return res.body;
}

describe("dry run", () => {
  let svc: TestService;
  let org: OrgFixture;
  let agent: TestAgent;

  beforeAll(async () => {
    // Not a test of the time limit: room for a first evaluation in a worker on a loaded machine.
    svc = await startService({ MANDATE_EVALUATION_TIMEOUT_MS: "5000" } as never);
    org = await newOrgFixture(svc);
    agent = await newAgent(svc, org);
    await ok(await svc.v1("POST", "/v1/policies", { bearer: org.apiKey, body: { policy_key: "pay", description: "", source: { rules_yaml: PAY_YAML } } }), "pay v1");
  }, 60_000);

  afterAll(async () => {
    await svc?.close();
  });

  it("answers the versions, graph, bundle and now evaluated, and what each rule did: fired, or the first failed condition with the value seen", async () => {
    for (const transport of TRANSPORTS) {
      const now = "2027-03-04T05:06:07.890Z";
      const res = await evaluate(svc, transport, { intent: intentDoc(agent.agentId, { action: "pay", amount: 600, currency: "USD" }), policy_versions: { pay: 1 }, now }, org.apiKey);
      expectResult(res, 200);
      expect(res.body).toMatchObject({ outcome: "HUMAN_REVIEW", reason: "large_payment", policy_versions: { pay: 1, starter: 1 }, graph_version: 0, now });
      expect(res.body.bundle_digest).toMatch(/^[0-9a-f]{64}$/);
      expect(res.body.rules).toEqual([
        { policy_key: "pay", policy_version: 1, rule_id: "large", fired: true, outcome: "HUMAN_REVIEW", reason: "large_payment", line: 3 },
        {
          policy_key: "pay",
          policy_version: 1,
          rule_id: "small",
          fired: false,
          reason: "",
          failed_condition: { field: "amount", operator: "lte", expected: 500, actual: 600 },
          line: 8,
        },
      ].map((r) => expect.objectContaining(r)));
    }
    // The server's clock when `now` is not given.
    const before = Date.now();
    const res = await evaluate(svc, "v1", { intent: intentDoc(agent.agentId, { action: "pay", amount: 1 }), policy_versions: { pay: 1 } }, org.apiKey);
    expectResult(res, 200);
    expect(Date.parse(res.body.now)).toBeGreaterThanOrEqual(before);
    expect(Date.parse(res.body.now)).toBeLessThanOrEqual(Date.now());
    expect(await decisionCount(svc, org.apiKey, agent.agentId)).toBe(0);
  }, 60_000);

  it("refuses a now no Date can hold (possible in binary gRPC) with 422, not 500", async () => {
    const client = svc.grpc(PolicyService);
    const err = await client
      .evaluatePolicy(
        { intent: intentDoc(agent.agentId, { action: "pay", amount: 1 }) as never, policyVersions: { pay: 1 }, now: { seconds: 10n ** 15n, nanos: 0 } },
        { headers: { authorization: `Bearer ${org.apiKey}` } },
      )
      .then(() => null, (e: unknown) => ConnectError.from(e));
    expect(err?.code).toBe(Code.InvalidArgument);
  }, 60_000);

  it("evaluates at the now it is given", async () => {
    const rego = `package mandate.policies.clock

actions := {"tick"}

results contains {"outcome": "ALLOW", "reason": "before_2030", "rule": "t"} if input.now < "2030-01-01T00:00:00.000Z"
`;
    const v = await ok(await svc.v1("POST", "/v1/policies", { bearer: org.apiKey, body: { policy_key: "clock", description: "", source: { rego } } }), "clock");
    const intent = intentDoc(agent.agentId, { action: "tick" });
    const at = async (now: string) => (await ok(await svc.v1("POST", "/v1/policies:evaluate", { bearer: org.apiKey, body: { intent, policy_versions: { clock: v.version }, now } }), now));
    expect(await at("2029-12-31T23:59:59.999Z")).toMatchObject({ outcome: "ALLOW", reason: "before_2030" });
    expect(await at("2030-01-01T00:00:00.000Z")).toMatchObject({ outcome: "HUMAN_REVIEW", reason: "no_matching_rule" });
  }, 60_000);

  it("evaluates a graph version in any state in place of the active graph", async () => {
    const principal = await ok(await svc.v1("GET", `/v1/principals/${org.principalId}`, { bearer: org.apiKey }), "principal");
    await ok(
      await svc.v1("POST", "/v1/policies", { bearer: org.apiKey, body: { policy_key: "payments", description: "", source: { rules: { actions: ["vendor_payment"], rules: [{ id: "authority", authority: true }] } } } }),
      "payments",
    );
    const graph = {
      roles: [{ role: "clerk", reports_to: null }],
      memberships: [{ principal: principal.external_ref, role: "clerk" }],
      limits: [{ holder: "role:clerk", action: "vendor_payment", currency: "USD", max_amount: 100 }],
      delegations: [],
      approval_matrix: [{ action: "vendor_payment", currency: "USD", up_to_amount: 100, approvals_required: 0 }],
    };
    const draft = await ok(await svc.v1("POST", "/v1/authority-graph/versions", { bearer: org.apiKey, body: { graph } }), "draft graph");
    const intent = intentDoc(agent.agentId, { action: "vendor_payment", amount: 50, currency: "USD" });
    for (const transport of TRANSPORTS) {
      const without = await evaluate(svc, transport, { intent, policy_versions: { payments: 1 } }, org.apiKey);
      expect(without.body).toMatchObject({ outcome: "DENY", reason: "no_delegated_authority", graph_version: 0 });
      const withDraft = await evaluate(svc, transport, { intent, policy_versions: { payments: 1 }, graph_version: draft.version }, org.apiKey);
      expect(withDraft.body).toMatchObject({ outcome: "ALLOW", reason: "within_delegated_authority", graph_version: draft.version });
      const missing = await evaluate(svc, transport, { intent, graph_version: 999 }, org.apiKey);
      expectResult(missing, 422, "validation_failed");
      expect(missing.body.errors).toEqual([expect.objectContaining({ field: "graph_version", code: "not_found" })]);
    }
  }, 60_000);

  it("validates the Intent as POST /v1/intents does: the same codes, the same fields under intent.", async () => {
    const bad: Record<string, unknown>[] = [
      { extra: 1 },
      { amount: "3" },
      { currency: "usd" },
      { nonce: undefined },
      { requested_at: "yesterday" },
      { context: { nested: { no: 1 } } },
      { agent_id: undefined },
    ];
    for (const fields of bad) {
      const doc = intentDoc(agent.agentId, { action: "pay", ...fields });
      const signed = await submitIntent(svc, "v1", signBody(agent, doc));
      expect(signed.status, JSON.stringify(fields)).toBe(422);
      for (const transport of TRANSPORTS) {
        const dry = await evaluate(svc, transport, { intent: doc }, org.apiKey);
        expectResult(dry, 422, signed.detail);
        expect(dry.body.errors.map((e: any) => [e.field, e.code]), JSON.stringify(fields)).toEqual(signed.body.errors.map((e: any) => [`intent.${e.field}`, e.code]));
      }
    }
  }, 120_000);

  it("refuses duplicate member names and imprecise numbers in a /v1 body, as signed Intents are refused", async () => {
    const template = (amount: string, extra = "") =>
      `{"agent_id":"${agent.agentId}","action":"pay","amount":${amount},${extra}"requested_at":"${new Date().toISOString()}","nonce":"${randomUUID()}"}`;
    const cases: [string, string, string][] = [
      [template("5", '"currency":"USD","currency":"EUR",'), "duplicate_key", "currency"],
      [template("100000.0000000000001"), "imprecise_number", "amount"],
      [template("9007199254740993"), "imprecise_number", "amount"],
    ];
    for (const [text, detail, field] of cases) {
      const signed = await submitIntent(svc, "v1", signBody(agent, text));
      expectResult(signed, 422, detail);
      expect(signed.body.errors).toEqual([expect.objectContaining({ field, code: detail })]);
      const res = await fetch(`${svc.baseUrl}/v1/policies:evaluate`, {
        method: "POST",
        headers: { authorization: `Bearer ${org.apiKey}`, "content-type": "application/json" },
        body: `{"intent":${text}}`,
      });
      const body = (await res.json()) as any;
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect(body.detail).toBe(detail);
      expect(body.errors).toEqual([expect.objectContaining({ field: `intent.${field}`, code: detail })]);
    }
  }, 60_000);

  it("refuses fields an active integration contract does not name, and mistyped declared fields, as the Intent path does", async () => {
    const approver = await newApiKey(svc, org.apiKey, ["POLICY_APPROVER"]);
    const integration = await ok(await svc.v1("POST", "/v1/integrations", { bearer: org.apiKey, body: { name: "ERP", actions: ["po_submit"] } }), "integration");
    const id = integration.integration_id;
    await ok(
      await svc.v1("POST", `/v1/integrations/${id}/contract-versions`, {
        bearer: org.apiKey,
        body: { resource_path: "resource", context_bindings: { po_number: "context.po_number" }, field_types: { "context.po_number": { type: "string", required: true } } },
      }),
      "contract",
    );
    await ok(await svc.v1("POST", `/v1/integrations/${id}/contract-versions/1/approve`, { bearer: approver.apiKey }), "approve");
    const cases: Record<string, unknown>[] = [
      { resource: "po:1", context: { po_number: "1", discount: "99%" } },
      { resource: "po:1", amount: 5, context: { po_number: "1" } },
      { resource: "po:1", context: { po_number: 4711 } },
      { resource: "po:1", context: {} },
    ];
    for (const fields of cases) {
      const doc = intentDoc(agent.agentId, { action: "po_submit", ...fields });
      const signed = await submitIntent(svc, "v1", signBody(agent, doc));
      expect([422]).toContain(signed.status);
      for (const transport of TRANSPORTS) {
        const dry = await evaluate(svc, transport, { intent: doc }, org.apiKey);
        expectResult(dry, 422, signed.detail);
        expect(dry.body.errors.map((e: any) => [e.field, e.code])).toEqual(signed.body.errors.map((e: any) => [`intent.${e.field}`, e.code]));
      }
    }
    const fine = await evaluate(svc, "v1", { intent: intentDoc(agent.agentId, { action: "po_submit", resource: "po:1", context: { po_number: "1" } }) }, org.apiKey);
    expectResult(fine, 200);
  }, 60_000);

  it("answers a rule failing at run time with 422 policy_runtime_error naming file, line and column, never 500 or 503", async () => {
    const v = await ok(await svc.v1("POST", "/v1/policies", { bearer: org.apiKey, body: { policy_key: "conflict", description: "", source: { rego: CONFLICT } } }), "conflict");
    for (const transport of TRANSPORTS) {
      const res = await evaluate(svc, transport, { intent: intentDoc(agent.agentId, { action: "boom", amount: 5 }), policy_versions: { conflict: v.version } }, org.apiKey);
      expectResult(res, 422, "policy_runtime_error");
      expect(res.body.errors).toEqual([expect.objectContaining({ field: "policies/conflict.rego", code: "runtime_error", line: expect.any(Number), column: expect.any(Number) })]);
      expect(res.body.message).toMatch(/policies\/conflict\.rego:\d+:\d+/);
      // The same draft where the rule does not conflict still answers, and other drafts are unaffected.
      const calm = await evaluate(svc, transport, { intent: intentDoc(agent.agentId, { action: "boom", amount: 1 }), policy_versions: { conflict: v.version } }, org.apiKey);
      expect(calm.body).toMatchObject({ outcome: "ALLOW", reason: "never" });
    }
    // A hand-written policy whose result is not a decision's is the author's to fix too.
    const odd = `package mandate.policies.odd\n\nactions := {"odd"}\n\nresults contains {"outcome": "MAYBE", "reason": "unsure", "rule": "m"}\n`;
    const w = await ok(await svc.v1("POST", "/v1/policies", { bearer: org.apiKey, body: { policy_key: "odd", description: "", source: { rego: odd } } }), "odd");
    const res = await evaluate(svc, "v1", { intent: intentDoc(agent.agentId, { action: "odd" }), policy_versions: { odd: w.version } }, org.apiKey);
    expectResult(res, 422, "policy_runtime_error");
  }, 60_000);
});
