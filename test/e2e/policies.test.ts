import { generateKeyPairSync, randomUUID, sign, type KeyObject } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startService, type TestService } from "../support/service.js";

/*
 * What a policy publication does to decisions over time, and to the evidence of
 * earlier ones. The request/answer contract of PolicyService and
 * AuthorityGraphService (the starter policy, four eyes, lifecycle, compile
 * errors, dry runs, governance documents) is test/cases/policies.yaml.
 */

/** An org with an author key and a separate approver key (four eyes), a principal and an active agent. */
async function setup(svc: TestService) {
  const org = await svc.newOrg();
  const approver = await svc.v1("POST", "/v1/organization/api-keys", {
    bearer: org.apiKey,
    body: { name: "approver", permissions: ["POLICY_APPROVER", "DECISION_READ"] },
  });
  const principal = await svc.v1("POST", "/v1/principals", { bearer: org.apiKey, body: { display_name: "Ann", kind: "person", external_ref: "ann" } });
  const { publicKey, privateKey } = generateKeyPairSync("ed25519");
  const raw = Buffer.from(publicKey.export({ format: "jwk" }).x!, "base64url");
  const agent = await svc.v1("POST", "/v1/agents", {
    bearer: org.apiKey,
    body: { name: "payer", acting_for_principal_id: principal.body.principal_id, public_key: `ed25519:base64:${raw.toString("base64")}` },
  });
  await svc.v1("POST", `/v1/agents/${agent.body.agent_id}/activate`, { bearer: org.apiKey });
  return { author: org.apiKey, approver: approver.body.api_key as string, agentId: agent.body.agent_id as string, certificateId: agent.body.certificate_id as string, privateKey };
}

async function submit(svc: TestService, a: { agentId: string; certificateId: string; privateKey: KeyObject }, fields: Record<string, unknown>) {
  const body = Buffer.from(JSON.stringify({ agent_id: a.agentId, requested_at: new Date().toISOString(), nonce: randomUUID(), ...fields }));
  const res = await fetch(`${svc.baseUrl}/v1/intents`, {
    method: "POST",
    body,
    headers: { "content-type": "application/json", "x-service-key-id": a.certificateId, "x-service-signature": sign(null, body, a.privateKey).toString("base64") },
  });
  return { status: res.status, body: (await res.json()) as Record<string, string> };
}

async function publishPolicy(svc: TestService, author: string, approver: string, key: string, source: object, create = true): Promise<number> {
  const created = create
    ? await svc.v1("POST", "/v1/policies", { bearer: author, body: { policy_key: key, description: key, source } })
    : await svc.v1("POST", `/v1/policies/${key}/versions`, { bearer: author, body: { source } });
  expect(created.status, JSON.stringify(created.body)).toBe(200);
  const v = created.body.version as number;
  expect((await svc.v1("POST", `/v1/policies/${key}/versions/${v}/submit`, { bearer: author })).status).toBe(200);
  expect((await svc.v1("POST", `/v1/policies/${key}/versions/${v}/approve`, { bearer: approver })).status).toBe(200);
  return v;
}

const GRAPH = {
  roles: [{ role: "clerk", reports_to: "controller" }, { role: "controller", reports_to: "" }],
  memberships: [{ principal: "ann", role: "clerk" }],
  limits: [{ holder: "role:clerk", action: "vendor_payment", currency: "USD", max_amount: 1000 }],
  delegations: [],
  approval_matrix: [
    { action: "vendor_payment", currency: "USD", up_to_amount: 100, approvals_required: 0 },
    { action: "vendor_payment", currency: "USD", up_to_amount: 500, approvals_required: 1 },
    { action: "vendor_payment", currency: "USD", up_to_amount: 1000, approvals_required: 2 },
  ],
};
const PAYMENTS = { rules: { actions: ["vendor_payment"], rules: [{ id: "authority", authority: true }] } };

describe("runtime policies and the authority graph through the service", () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startService();
  });
  afterAll(async () => {
    await svc?.close();
  });

  it("decides from the published authority graph, and a later publication changes later decisions but not earlier evidence", async () => {
    const a = await setup(svc);
    await publishPolicy(svc, a.author, a.approver, "payments", PAYMENTS);
    expect((await svc.v1("POST", "/v1/policies/payments/versions/1/publish", { bearer: a.approver })).status).toBe(200);
    // No graph yet: the principal holds no authority.
    expect((await submit(svc, a, { action: "vendor_payment", amount: 50, currency: "USD" })).body).toMatchObject({ outcome: "DENY", reason: "no_delegated_authority" });

    const g1 = await svc.v1("POST", "/v1/authority-graph/versions", { bearer: a.author, body: { graph: GRAPH } });
    expect(g1.status, JSON.stringify(g1.body)).toBe(200);
    expect((await svc.v1("POST", `/v1/authority-graph/versions/${g1.body.version}/approve`, { bearer: a.approver })).body.state).toBe("approved");
    expect((await svc.v1("POST", `/v1/authority-graph/versions/${g1.body.version}/publish`, { bearer: a.approver })).body.state).toBe("active");

    const cases: [number, string, string][] = [
      [50, "ALLOW", "within_delegated_authority"],
      [100, "ALLOW", "within_delegated_authority"],
      [300, "HUMAN_REVIEW", "requires_approval"],
      [900, "HUMAN_REVIEW", "requires_dual_approval"],
      [1000.01, "DENY", "exceeds_approval_limit"],
    ];
    const before: Record<string, string>[] = [];
    for (const [amount, outcome, reason] of cases) {
      const d = await submit(svc, a, { action: "vendor_payment", amount, currency: "USD" });
      expect(d.body, `amount ${amount}`).toMatchObject({ outcome, reason });
      before.push(d.body);
    }
    const evidenceBefore = await svc.v1("GET", `/v1/evidence/${before[0]!.evidence_id}`, { bearer: a.author });

    const g2 = await svc.v1("POST", "/v1/authority-graph/versions", {
      bearer: a.author,
      body: { graph: { ...GRAPH, limits: [{ holder: "role:clerk", action: "vendor_payment", currency: "USD", max_amount: 40 }] } },
    });
    await svc.v1("POST", `/v1/authority-graph/versions/${g2.body.version}/approve`, { bearer: a.approver });
    await svc.v1("POST", `/v1/authority-graph/versions/${g2.body.version}/publish`, { bearer: a.approver });
    expect((await submit(svc, a, { action: "vendor_payment", amount: 50, currency: "USD" })).body).toMatchObject({ outcome: "DENY", reason: "exceeds_approval_limit" });

    const earlier = await svc.v1("GET", `/v1/decisions/${before[0]!.decision_id}`, { bearer: a.author });
    expect(earlier.body).toMatchObject({ outcome: "ALLOW", reason: "within_delegated_authority", graph_version: g1.body.version });
    expect((await svc.v1("GET", `/v1/evidence/${before[0]!.evidence_id}`, { bearer: a.author })).body).toEqual(evidenceBefore.body);
    const graph = await svc.v1("GET", "/v1/authority-graph", { bearer: a.author });
    expect(graph.body.version).toBe(g2.body.version);
  });
});
