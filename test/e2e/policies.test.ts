import { generateKeyPairSync, randomUUID, sign, type KeyObject } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startService, type TestService } from "../support/service.js";

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

  it("starts every organization with the active starter policy", async () => {
    const a = await setup(svc);
    const policy = await svc.v1("GET", "/v1/policies/starter", { bearer: a.author });
    expect(policy.status).toBe(200);
    expect(policy.body.active_version).toBe(1);
    expect(policy.body.versions[0].state).toBe("active");
    expect(policy.body.versions[0].rego).toContain("package mandate.policies.starter");
    expect((await submit(svc, a, { action: "reference_noop" })).body).toMatchObject({ outcome: "ALLOW", reason: "starter_reference_action" });
    expect((await submit(svc, a, { action: "launch_rocket" })).body).toMatchObject({ outcome: "HUMAN_REVIEW", reason: "unrecognized_action", status: "PENDING" });
  });

  it("keeps four eyes: the author's key cannot approve its own version", async () => {
    const a = await setup(svc);
    await svc.v1("POST", "/v1/policies", { bearer: a.author, body: { policy_key: "p", description: "", source: PAYMENTS } });
    await svc.v1("POST", "/v1/policies/p/versions/1/submit", { bearer: a.author });
    const self = await svc.v1("POST", "/v1/policies/p/versions/1/approve", { bearer: a.author });
    expect(self.status).toBe(403);
    expect(self.body.detail).toBe("permission_denied");
    const publishDraft = await svc.v1("POST", "/v1/policies/p/versions/1/publish", { bearer: a.approver });
    expect(publishDraft.status).toBe(409);
    expect(publishDraft.body.detail).toBe("invalid_transition");
  });

  it("refuses an invalid rules document with field errors, and a bad Rego module at publish with line and column, keeping the last good version active", async () => {
    const a = await setup(svc);
    const bad = await svc.v1("POST", "/v1/policies", {
      bearer: a.author,
      body: { policy_key: "bad", description: "", source: { rules: { actions: ["x"], rules: [{ id: "r", when: { amount: { nope: 1 } }, outcome: "MAYBE", reason: "Not Snake" }] } } },
    });
    expect(bad.status).toBe(422);
    expect(bad.body.detail).toBe("validation_failed");
    expect(bad.body.errors.length).toBeGreaterThan(0);

    await publishPolicy(svc, a.author, a.approver, "limits", { rules: { actions: ["reference_noop"], rules: [{ id: "big", when: { amount: { gt: 10 } }, outcome: "DENY", reason: "too_big" }] } });
    expect((await svc.v1("POST", "/v1/policies/limits/versions/1/publish", { bearer: a.approver })).status).toBe(200);
    const broken = "package mandate.policies.limits\n\nactions := {\"reference_noop\"}\n\nresults contains r if {\n  r := {\"outcome\": \"DENY\", \"reason\": \"x\", \"rule\": \"y\"\n}\n";
    const v2 = await publishPolicy(svc, a.author, a.approver, "limits", { rego: broken }, false);
    const publish = await svc.v1("POST", `/v1/policies/limits/versions/${v2}/publish`, { bearer: a.approver });
    expect(publish.status).toBe(422);
    expect(publish.body.detail).toBe("policy_compile_failed");
    expect(publish.body.errors[0].line).toBeGreaterThan(0);
    const policy = await svc.v1("GET", "/v1/policies/limits", { bearer: a.author });
    expect(policy.body.active_version).toBe(1);
    expect((await submit(svc, a, { action: "reference_noop", amount: 50 })).body).toMatchObject({ outcome: "DENY", reason: "too_big" });
  });

  it("decides from the published authority graph, and a later publication changes later decisions but not earlier evidence", async () => {
    const a = await setup(svc);
    await publishPolicy(svc, a.author, a.approver, "payments", PAYMENTS);
    expect((await svc.v1("POST", "/v1/policies/payments/versions/1/publish", { bearer: a.approver })).status).toBe(200);
    // No graph yet: the principal holds no authority.
    expect((await submit(svc, a, { action: "vendor_payment", amount: 50, currency: "USD" })).body).toMatchObject({ outcome: "DENY", reason: "no_delegated_authority" });

    const g1 = await svc.v1("POST", "/v1/authority-graph/versions", { bearer: a.author, body: { graph: GRAPH } });
    expect(g1.status, JSON.stringify(g1.body)).toBe(200);
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
    await svc.v1("POST", `/v1/authority-graph/versions/${g2.body.version}/publish`, { bearer: a.approver });
    expect((await submit(svc, a, { action: "vendor_payment", amount: 50, currency: "USD" })).body).toMatchObject({ outcome: "DENY", reason: "exceeds_approval_limit" });

    const earlier = await svc.v1("GET", `/v1/decisions/${before[0]!.decision_id}`, { bearer: a.author });
    expect(earlier.body).toMatchObject({ outcome: "ALLOW", reason: "within_delegated_authority", graph_version: g1.body.version });
    expect((await svc.v1("GET", `/v1/evidence/${before[0]!.evidence_id}`, { bearer: a.author })).body).toEqual(evidenceBefore.body);
    const graph = await svc.v1("GET", "/v1/authority-graph", { bearer: a.author });
    expect(graph.body.version).toBe(g2.body.version);
  });

  it("generates a graph from governance documents and reports parse errors per document and row, creating nothing", async () => {
    const a = await setup(svc);
    const upload = (kind: string, content: string) => svc.v1("POST", "/v1/authority-graph/documents", { bearer: a.author, body: { kind, format: "csv", content } });
    const schedule = await upload("signing_schedule", "principal,role,reports_to\nann,clerk,controller\n,controller,\n");
    const doa = await upload("delegation_of_authority", "holder,delegate,action,currency,max_amount,valid_until\nrole:clerk,,vendor_payment,USD,1000,\n");
    const matrix = await upload("approval_matrix", "action,currency,up_to_amount,approvals_required\nvendor_payment,USD,100,0\nvendor_payment,USD,1000,2\n");
    const ok = await svc.v1("POST", "/v1/authority-graph/versions:generate", {
      bearer: a.author,
      body: { document_ids: [schedule.body.document_id, doa.body.document_id, matrix.body.document_id] },
    });
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expect(ok.body.state).toBe("draft");

    const broken = await upload("delegation_of_authority", "holder,delegate,action,currency,max_amount,valid_until\nrole:clerk,,vendor_payment,USD,lots,\nnobody,,vendor_payment,USD,5,\n");
    const bad = await svc.v1("POST", "/v1/authority-graph/versions:generate", {
      bearer: a.author,
      body: { document_ids: [schedule.body.document_id, broken.body.document_id, matrix.body.document_id] },
    });
    expect(bad.status).toBe(422);
    expect(bad.body.detail).toBe("validation_failed");
    const fields = (bad.body.errors as { field: string }[]).map((e) => e.field).join(" ");
    expect(fields).toContain(broken.body.document_id);
    expect(fields).toContain("row 1");
    expect((await svc.v1("GET", "/v1/authority-graph", { bearer: a.author })).body.version).toBe(0);
  });

  it("dry-runs an Intent against a draft version without recording anything", async () => {
    const a = await setup(svc);
    const draft = await svc.v1("POST", "/v1/policies", {
      bearer: a.author,
      body: { policy_key: "dry", description: "", source: { rules: { actions: ["ship"], rules: [{ id: "ok", when: { resource: { eq: "box:1" } }, outcome: "ALLOW", reason: "known_box" }] } } },
    });
    expect(draft.status).toBe(200);
    const intent = { agent_id: a.agentId, action: "ship", resource: "box:1", requested_at: new Date().toISOString(), nonce: randomUUID() };
    const dry = await svc.v1("POST", "/v1/policies:evaluate", { bearer: a.author, body: { intent, policy_versions: { dry: 1 } } });
    expect(dry.status, JSON.stringify(dry.body)).toBe(200);
    expect(dry.body).toMatchObject({ outcome: "ALLOW", reason: "known_box" });
    const active = await svc.v1("POST", "/v1/policies:evaluate", { bearer: a.author, body: { intent } });
    expect(active.body).toMatchObject({ outcome: "HUMAN_REVIEW", reason: "unrecognized_action" });
    const queue = await svc.v1("GET", `/v1/decisions?agent_id=${a.agentId}`, { bearer: a.author });
    expect(queue.body.decisions).toHaveLength(0);
  });
});
