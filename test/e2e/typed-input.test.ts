import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  decisionCount,
  evidenceCursor,
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
  type Transport,
} from "../support/agents.js";
import { startService, type TestService } from "../support/service.js";

/*
 * Issue 20, typed input: an Intent whose field has another type than its integration contract
 * declares is refused before anything is recorded (no decision, no evidence, the nonce still
 * free), over /v1 and gRPC. The request/answer contract over /v1, gRPC and Connect is
 * test/cases/typed-input.yaml; the rules-document side is test/unit/policy/rules-typed.test.ts.
 */

let svc: TestService;
let org: OrgFixture;

beforeAll(async () => {
  svc = await startService();
  org = await newOrgFixture(svc);
  const approver = await newApiKey(svc, org.apiKey, ["POLICY_APPROVER"], "approver");
  const integration = await svc.v1("POST", "/v1/integrations", { bearer: org.apiKey, body: { name: "ERP", actions: ["purchase_order_submit"] } });
  expect(integration.status, JSON.stringify(integration.body)).toBe(200);
  const id = integration.body.integration_id;
  const contract = await svc.v1("POST", `/v1/integrations/${id}/contract-versions`, {
    bearer: org.apiKey,
    body: {
      resource_path: "resource",
      context_bindings: { po_number: "context.po_number", due: "context.due" },
      field_types: { "context.po_number": { type: "string", required: true }, "context.due": { type: "timestamp" } },
    },
  });
  expect(contract.status, JSON.stringify(contract.body)).toBe(200);
  const approved = await svc.v1("POST", `/v1/integrations/${id}/contract-versions/1/approve`, { bearer: approver.apiKey, body: {} });
  expect(approved.status, JSON.stringify(approved.body)).toBe(200);
});

afterAll(async () => {
  await svc?.close();
});

describe.each(TRANSPORTS)("an Intent against its contract's field types over %s", (transport: Transport) => {
  let agent: TestAgent;
  beforeAll(async () => {
    agent = await newAgent(svc, org);
  });

  const order = (context: Record<string, unknown>, nonce = randomUUID()) =>
    intentDoc(agent.agentId, { action: "purchase_order_submit", resource: "po:1", nonce, context });

  it("a mistyped or missing declared field → 422 invalid_policy_input naming it; nothing recorded and the nonce still usable", async () => {
    const chain = await evidenceCursor(svc, org.apiKey);
    const before = await decisionCount(svc, org.apiKey, agent.agentId);
    const nonce = randomUUID();
    const mistyped = await submitIntent(svc, transport, signBody(agent, order({ po_number: 4711, due: "tomorrow" }, nonce)));
    expectResult(mistyped, 422, "invalid_policy_input");
    expect(mistyped.body.errors).toEqual([
      expect.objectContaining({ field: "context.due", code: "invalid_type" }),
      expect.objectContaining({ field: "context.po_number", code: "invalid_type" }),
    ]);
    const missing = await submitIntent(svc, transport, signBody(agent, order({ due: "2026-12-01T00:00:00Z" })));
    expectResult(missing, 422, "invalid_policy_input");
    expect(missing.body.errors).toEqual([expect.objectContaining({ field: "context.po_number", code: "required" })]);
    expect(await decisionCount(svc, org.apiKey, agent.agentId)).toBe(before);
    expect(await chain.next()).toEqual([]);
    // The refused Intent's nonce was never taken: a well-typed Intent under it is decided.
    const decided = await submitIntent(svc, transport, signBody(agent, order({ po_number: "4711", due: "2026-12-01T00:00:00+01:00" }, nonce)));
    expect(decided.status, JSON.stringify(decided.body)).toBe(200);
    expect(decided.body).toMatchObject({ outcome: "HUMAN_REVIEW", reason: "unrecognized_action" });
    expect(await decisionCount(svc, org.apiKey, agent.agentId)).toBe(before + 1);
  });
});
