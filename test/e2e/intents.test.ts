import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DecisionService } from "../../src/gen/mandate/v1/decisions_pb.js";
import { EvidenceService } from "../../src/gen/mandate/v1/evidence_pb.js";
import { IntentService } from "../../src/gen/mandate/v1/intents_pb.js";
import { WIRE_TIMESTAMP } from "../support/api.js";
import {
  agentGetDecision,
  call,
  decisionCount,
  evidenceCursor,
  expectResult,
  exportEvidence,
  heartbeat,
  independentRecordCheck,
  intentDoc,
  newAgent,
  newAgentKey,
  newApiKey,
  newOrgFixture,
  paymentDoc,
  publishPaymentsPolicy,
  signBody,
  submitIntent,
  TRANSPORTS,
  type OrgFixture,
  type SignedBody,
  type TestAgent,
  type Transport,
} from "../support/agents.js";
import { startService, type TestService } from "../support/service.js";

/*
 * Issue 5: the single endpoint, table-driven through /v1 and gRPC. Every row
 * of the spec's agent-state table, every error row (in the order and with the
 * codes of docs/architecture.md, The Intent path) with the proof that it
 * recorded nothing, the three outcome shapes with their exact members, nonce
 * replay, and the evidence each decision carries.
 * The same request/answer contract over /v1, gRPC and Connect, without the
 * side-effect checks, is test/cases/intents.yaml. Reviews and decision reads
 * are in reviews.test.ts; the crash test is in evidence.test.ts.
 */

let svc: TestService;
let org: OrgFixture;
let other: OrgFixture;

beforeAll(async () => {
  svc = await startService();
  [org, other] = await Promise.all([newOrgFixture(svc), newOrgFixture(svc)]);
  await publishPaymentsPolicy(svc, org);
  // An integration contract for purchase orders: it binds the resource and context.po_number only.
  const integration = await svc.v1("POST", "/v1/integrations", { bearer: org.apiKey, body: { name: "ERP", actions: ["purchase_order_submit"] } });
  expect(integration.status, JSON.stringify(integration.body)).toBe(200);
  const id = integration.body.integration_id;
  const contract = await svc.v1("POST", `/v1/integrations/${id}/contract-versions`, {
    bearer: org.apiKey,
    body: { resource_path: "resource", context_bindings: { po_number: "context.po_number" } },
  });
  expect(contract.status, JSON.stringify(contract.body)).toBe(200);
  const approver = await newApiKey(svc, org.apiKey, ["POLICY_APPROVER"], "contract-approver");
  const approved = await svc.v1("POST", `/v1/integrations/${id}/contract-versions/${contract.body.version}/approve`, { bearer: approver.apiKey, body: {} });
  expect(approved.status, JSON.stringify(approved.body)).toBe(200);
});
afterAll(() => svc?.close());

/** The spec's decision response shapes (endpoint 4), exactly. */
const SHAPE = {
  ALLOW: ["decision_id", "evaluated_at", "evidence_id", "outcome", "reason"],
  DENY: ["decision_id", "evaluated_at", "evidence_id", "outcome", "reason"],
  HUMAN_REVIEW: ["decision_id", "evaluated_at", "evidence_id", "outcome", "reason", "status"],
} as const;

function expectDecisionShape(res: { status: number; body: any; transport: string }, outcome: keyof typeof SHAPE, reason: string) {
  expect(res.status, `${res.transport}: ${JSON.stringify(res.body)}`).toBe(200);
  expect(Object.keys(res.body).sort()).toEqual([...SHAPE[outcome]]);
  expect(res.body.outcome).toBe(outcome);
  expect(res.body.reason).toBe(reason);
  if (outcome === "HUMAN_REVIEW") expect(res.body.status).toBe("PENDING");
  expect(res.body.evaluated_at).toMatch(WIRE_TIMESTAMP);
  expect(Math.abs(Date.parse(res.body.evaluated_at) - Date.now())).toBeLessThan(30_000);
  expect(res.body.decision_id).toMatch(/\S/);
  expect(res.body.evidence_id).toMatch(/\S/);
}

async function getDecision(decisionId: string, o = org) {
  const res = await svc.v1("GET", `/v1/decisions/${decisionId}`, { bearer: o.apiKey });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}

describe.each(TRANSPORTS)("agent-state table over %s", (transport: Transport) => {
  const rejected: [string, "registered" | "revoked" | "retired", string][] = [
    ["registered: the agent cannot sign actions", "registered", "agent_not_active"],
    ["revoked: rejected before anything is recorded", "revoked", "agent_revoked"],
    ["retired: rejected before anything is recorded", "retired", "agent_retired"],
  ];
  for (const [name, state, detail] of rejected) {
    it(`${name} → 403 ${detail}`, async () => {
      const agent = await newAgent(svc, org, state);
      const chain = await evidenceCursor(svc, org.apiKey);
      // Even a perfectly valid Intent of an action that would be allowed.
      expectResult(await submitIntent(svc, transport, signBody(agent, paymentDoc(agent.agentId, 10))), 403, detail);
      expectResult(await submitIntent(svc, transport, signBody(agent, intentDoc(agent.agentId))), 403, detail);
      expect(await decisionCount(svc, org.apiKey, agent.agentId)).toBe(0);
      expect(await chain.next()).toEqual([]);
    });
  }

  it("active: evaluated normally", async () => {
    const agent = await newAgent(svc, org, "active");
    expectDecisionShape(await submitIntent(svc, transport, signBody(agent, intentDoc(agent.agentId))), "ALLOW", "starter_reference_action");
    expectDecisionShape(await submitIntent(svc, transport, signBody(agent, paymentDoc(agent.agentId, 10))), "ALLOW", "within_delegated_authority");
  });

  it("suspended: recorded and sent to review at once, no rule evaluated, the attempt preserved", async () => {
    const agent = await newAgent(svc, org, "suspended");
    const chain = await evidenceCursor(svc, org.apiKey);
    const docs = [
      paymentDoc(agent.agentId, 10),
      paymentDoc(agent.agentId, 5_000_000),
      intentDoc(agent.agentId, { action: "launch_rockets", context: { target: "moon", count: 3 } }),
      // Under a contract, only what it names (docs/architecture.md, The Intent path, step 7; the refusal is in intents.yaml).
      intentDoc(agent.agentId, { action: "purchase_order_submit", resource: "po:1", context: { po_number: "1" } }),
    ];
    for (const doc of docs) {
      const signed = signBody(agent, doc);
      const res = await submitIntent(svc, transport, signed);
      // What would be ALLOW, DENY or unrecognized alike: HUMAN_REVIEW agent_suspended.
      expectDecisionShape(res, "HUMAN_REVIEW", "agent_suspended");
      const got = await getDecision(res.body.decision_id);
      expect(got).toMatchObject({ decision_id: res.body.decision_id, outcome: "HUMAN_REVIEW", reason: "agent_suspended", status: "PENDING", agent_id: agent.agentId, action: doc.action });
      expect(got.intent).toEqual(doc);
      expect(got.policy_versions).toEqual({});
      const [record] = (await chain.next()).filter((r) => r.subject_id === res.body.decision_id);
      expect(record.evidence_id).toBe(res.body.evidence_id);
      expect(record.payload).toMatchObject({ outcome: "HUMAN_REVIEW", reason: "agent_suspended", intent: doc, intent_sha256: createHash("sha256").update(signed.bytes).digest("hex") });
      expect(record.payload.trace).toEqual([]);
    }
    const pending = await svc.v1("GET", `/v1/decisions?status=PENDING&agent_id=${agent.agentId}`, { bearer: org.apiKey });
    expect(pending.body.decisions).toHaveLength(docs.length);
  });
});

describe.each(TRANSPORTS)("outcome shapes over %s", (transport: Transport) => {
  let agent: TestAgent;
  beforeAll(async () => {
    agent = await newAgent(svc, org);
  });

  const rows: [string, (id: string) => Record<string, unknown>, keyof typeof SHAPE, string][] = [
    ["starter reference action", (id) => intentDoc(id), "ALLOW", "starter_reference_action"],
    ["payment within authority", (id) => paymentDoc(id, 999.5), "ALLOW", "within_delegated_authority"],
    ["payment needing one approval", (id) => paymentDoc(id, 2_500), "HUMAN_REVIEW", "requires_approval"],
    ["payment needing two approvals", (id) => paymentDoc(id, 12_000), "HUMAN_REVIEW", "requires_dual_approval"],
    ["payment above the limit", (id) => paymentDoc(id, 30_000), "DENY", "exceeds_approval_limit"],
    ["payment over the policy's hard cap", (id) => paymentDoc(id, 2_000_000), "DENY", "amount_over_hard_cap"],
    ["payment in a currency without authority", (id) => paymentDoc(id, 10, { currency: "EUR" }), "DENY", "no_delegated_authority"],
    ["unrecognized action (never silently allowed)", (id) => intentDoc(id, { action: "wire_everything_offshore", amount: 1 }), "HUMAN_REVIEW", "unrecognized_action"],
    ["order-style intent with a resource", (id) => intentDoc(id, { action: "purchase_order_submit", resource: "po:4711", context: { po_number: "4711" } }), "HUMAN_REVIEW", "unrecognized_action"],
  ];
  for (const [name, build, outcome, reason] of rows) {
    it(`${name} → ${outcome} ${reason}, exactly the spec's members`, async () => {
      const doc = build(agent.agentId);
      const signed = signBody(agent, doc);
      const res = await submitIntent(svc, transport, signed);
      expectDecisionShape(res, outcome, reason);
      const got = await getDecision(res.body.decision_id);
      expect(got).toMatchObject({ decision_id: res.body.decision_id, outcome, reason, evidence_id: res.body.evidence_id, evaluated_at: res.body.evaluated_at, intent: doc });
      if (outcome === "HUMAN_REVIEW") expect(got.status).toBe("PENDING");
      else expect(got.status).toBeUndefined();
    });
  }
});

describe.each(TRANSPORTS)("error rows over %s", (transport: Transport) => {
  let agent: TestAgent;
  let sibling: TestAgent;
  let foreign: TestAgent;
  beforeAll(async () => {
    [agent, sibling, foreign] = await Promise.all([newAgent(svc, org), newAgent(svc, org), newAgent(svc, other)]);
  });

  const flipByte = (s: SignedBody, at: number): SignedBody => {
    const bytes = new Uint8Array(s.bytes);
    bytes[at] = bytes[at]! ^ 0x01;
    return { ...s, bytes };
  };
  const ago = (seconds: number) => new Date(Date.now() - seconds * 1000).toISOString();
  const raw = (text: string) => signBody(agent, Buffer.from(text, "utf8"));
  /** A signed Intent padded (through a context value) to exactly `size` bytes. */
  const ofSize = (size: number) => {
    const doc = intentDoc(agent.agentId, { context: { pad: "" } });
    const base = Buffer.byteLength(JSON.stringify(doc));
    (doc.context as Record<string, string>).pad = "x".repeat(size - base);
    const signed = signBody(agent, doc);
    expect(signed.bytes.length).toBe(size);
    return signed;
  };

  const rows: { name: string; send: () => SignedBody; status: number; detail: string; field?: string }[] = [
    { name: "no key id and no signature", send: () => ({ ...signBody(agent, intentDoc(agent.agentId)), keyId: "", signature: "" }), status: 401, detail: "missing_credentials" },
    { name: "a key id without a signature", send: () => ({ ...signBody(agent, intentDoc(agent.agentId)), signature: "" }), status: 401, detail: "missing_credentials" },
    { name: "an unknown certificate", send: () => ({ ...signBody(agent, intentDoc(agent.agentId)), keyId: "crt_0000000000000000000000000" }), status: 401, detail: "unknown_key" },
    { name: "an absurdly long key id", send: () => ({ ...signBody(agent, intentDoc(agent.agentId)), keyId: "k".repeat(5000) }), status: 401, detail: "unknown_key" },
    { name: "a signature by another key", send: () => signBody({ ...agent, key: newAgentKey() }, intentDoc(agent.agentId)), status: 401, detail: "signature_invalid" },
    { name: "another agent's certificate on this agent's signature", send: () => ({ ...signBody(agent, intentDoc(agent.agentId)), keyId: sibling.certificateId }), status: 401, detail: "signature_invalid" },
    { name: "a signature that is not base64", send: () => ({ ...signBody(agent, intentDoc(agent.agentId)), signature: "not a signature!" }), status: 401, detail: "signature_invalid" },
    { name: "a 63-byte signature", send: () => { const s = signBody(agent, intentDoc(agent.agentId)); return { ...s, signature: Buffer.from(s.signature, "base64").subarray(0, 63).toString("base64") }; }, status: 401, detail: "signature_invalid" },
    { name: "one byte changed after signing (in a value)", send: () => flipByte(signBody(agent, intentDoc(agent.agentId)), 30), status: 401, detail: "signature_invalid" },
    { name: "one byte changed after signing (the last byte)", send: () => { const s = signBody(agent, intentDoc(agent.agentId)); return flipByte(s, s.bytes.length - 1); }, status: 401, detail: "signature_invalid" },
    { name: "a byte appended after signing", send: () => { const s = signBody(agent, intentDoc(agent.agentId)); return { ...s, bytes: new Uint8Array([...s.bytes, 0x20]) }; }, status: 401, detail: "signature_invalid" },
    { name: "a bad signature over invalid JSON (signature first)", send: () => ({ ...raw("{not json"), signature: signBody({ ...agent, key: newAgentKey() }, "x").signature }), status: 401, detail: "signature_invalid" },
    { name: "a body that is not JSON", send: () => raw("{not json"), status: 422, detail: "validation_failed" },
    { name: "an empty body", send: () => raw(""), status: 422, detail: "validation_failed" },
    { name: "a JSON array", send: () => raw("[1,2]"), status: 422, detail: "validation_failed" },
    { name: "no action", send: () => signBody(agent, { ...intentDoc(agent.agentId), action: undefined }), status: 422, detail: "validation_failed", field: "action" },
    { name: "a nonce that is not a UUID", send: () => signBody(agent, intentDoc(agent.agentId, { nonce: "1234" })), status: 422, detail: "validation_failed", field: "nonce" },
    { name: "no nonce", send: () => signBody(agent, { ...intentDoc(agent.agentId), nonce: undefined }), status: 422, detail: "validation_failed", field: "nonce" },
    { name: "no requested_at", send: () => signBody(agent, { ...intentDoc(agent.agentId), requested_at: undefined }), status: 422, detail: "validation_failed", field: "requested_at" },
    { name: "requested_at that is not a timestamp", send: () => signBody(agent, intentDoc(agent.agentId, { requested_at: "yesterday" })), status: 422, detail: "validation_failed", field: "requested_at" },
    { name: "an unknown field", send: () => signBody(agent, intentDoc(agent.agentId, { approve_me: true })), status: 422, detail: "validation_failed", field: "approve_me" },
    { name: "a negative amount", send: () => signBody(agent, paymentDoc(agent.agentId, -5)), status: 422, detail: "validation_failed", field: "amount" },
    { name: "an amount given as a string", send: () => signBody(agent, paymentDoc(agent.agentId, 0, { amount: "10" })), status: 422, detail: "validation_failed", field: "amount" },
    { name: "a context that is not an object", send: () => signBody(agent, intentDoc(agent.agentId, { context: ["a"] })), status: 422, detail: "validation_failed", field: "context" },
    { name: "another agent's id (same organization)", send: () => signBody(agent, intentDoc(sibling.agentId)), status: 422, detail: "validation_failed", field: "agent_id" },
    { name: "another organization's agent id", send: () => signBody(agent, intentDoc(foreign.agentId)), status: 422, detail: "validation_failed", field: "agent_id" },
    { name: "requested_at 400 s ago", send: () => signBody(agent, intentDoc(agent.agentId, { requested_at: ago(400) })), status: 422, detail: "request_expired" },
    { name: "requested_at 400 s ahead", send: () => signBody(agent, intentDoc(agent.agentId, { requested_at: ago(-400) })), status: 422, detail: "request_expired" },
    { name: "a body of 64 KiB + 1 byte (validly signed)", send: () => ofSize(64 * 1024 + 1), status: 413, detail: "payload_too_large" },
    { name: "a 200 KiB body with a bad signature (size first)", send: () => ({ ...ofSize(200 * 1024), signature: "AAAA" }), status: 413, detail: "payload_too_large" },
  ];

  for (const row of rows) {
    it(`${row.name} → ${row.status} ${row.detail}; no decision, no evidence`, async () => {
      const chain = await evidenceCursor(svc, org.apiKey);
      const before = await decisionCount(svc, org.apiKey, agent.agentId);
      const res = await submitIntent(svc, transport, row.send());
      expectResult(res, row.status, row.detail);
      if (row.field) expect(res.body.errors).toEqual(expect.arrayContaining([expect.objectContaining({ field: row.field })]));
      if (row.status === 422 && row.detail === "validation_failed") expect(res.body.errors.length).toBeGreaterThan(0);
      expect(await decisionCount(svc, org.apiKey, agent.agentId)).toBe(before);
      expect(await chain.next()).toEqual([]);
    });
  }

  it("an admin bearer key cannot submit an Intent for the agent (401 missing_credentials)", async () => {
    const before = await decisionCount(svc, org.apiKey, agent.agentId);
    const s = signBody(agent, intentDoc(agent.agentId));
    const res = await call(svc, transport, IntentService.method.submitIntent, { intent: s.bytes }, { bearer: org.apiKey });
    expectResult(res, 401, "missing_credentials");
    expect(await decisionCount(svc, org.apiKey, agent.agentId)).toBe(before);
  });

  it("a field the active integration contract does not name → 422 undeclared_field; no decision, no evidence", async () => {
    const order = (context: Record<string, unknown>, fields: Record<string, unknown> = {}) =>
      intentDoc(agent.agentId, { action: "purchase_order_submit", resource: "po:4711", context, ...fields });
    const chain = await evidenceCursor(svc, org.apiKey);
    const before = await decisionCount(svc, org.apiKey, agent.agentId);
    const res = await submitIntent(svc, transport, signBody(agent, order({ po_number: "4711", discount: "99%" })));
    expectResult(res, 422, "undeclared_field");
    expect(res.body.errors).toEqual(expect.arrayContaining([expect.objectContaining({ field: "context.discount" })]));
    // A top-level field counts as much as a context key (the contract binds neither), and so does an inherited name.
    const topLevel = await submitIntent(svc, transport, signBody(agent, order({ po_number: "4711" }, { amount: 5_000_000, counterparty: "Mallory" })));
    expectResult(topLevel, 422, "undeclared_field");
    expect(topLevel.body.errors.map((e: { field: string }) => e.field)).toEqual(["amount", "counterparty"]);
    expectResult(await submitIntent(svc, transport, signBody(agent, order({ po_number: "4711", constructor: "smuggled" }))), 422, "undeclared_field");
    expect(await decisionCount(svc, org.apiKey, agent.agentId)).toBe(before);
    expect(await chain.next()).toEqual([]);
    // Declared keys only: evaluated (no runtime policy covers the action, so it goes to review).
    expectDecisionShape(await submitIntent(svc, transport, signBody(agent, order({ po_number: "4711" }))), "HUMAN_REVIEW", "unrecognized_action");
    // An action outside the contract keeps free-form context.
    expectDecisionShape(await submitIntent(svc, transport, signBody(agent, intentDoc(agent.agentId, { context: { anything: 1 } }))), "ALLOW", "starter_reference_action");
  });
});

describe.each(TRANSPORTS)("nonce idempotency over %s", (transport: Transport) => {
  it("the same nonce and bytes return the original decision; different bytes → 409 nonce_reused", async () => {
    const agent = await newAgent(svc, org);
    for (const doc of [intentDoc(agent.agentId), paymentDoc(agent.agentId, 12_000), paymentDoc(agent.agentId, 30_000)]) {
      const signed = signBody(agent, doc);
      const first = await submitIntent(svc, transport, signed);
      expect(first.status).toBe(200);
      const chain = await evidenceCursor(svc, org.apiKey);
      const count = await decisionCount(svc, org.apiKey, agent.agentId);
      const again = await submitIntent(svc, transport, signed);
      expect(again.status).toBe(200);
      expect(again.body).toEqual(first.body);
      // Different bytes under the same nonce, signed properly: a changed amount, or only whitespace.
      expectResult(await submitIntent(svc, transport, signBody(agent, { ...doc, amount: 1 })), 409, "nonce_reused");
      expectResult(await submitIntent(svc, transport, signBody(agent, `${JSON.stringify(doc)} `)), 409, "nonce_reused");
      expect(await decisionCount(svc, org.apiKey, agent.agentId)).toBe(count);
      expect(await chain.next()).toEqual([]);
    }
  });

  it("concurrent submissions of the same signed bytes yield one decision", async () => {
    const agent = await newAgent(svc, org);
    const signed = signBody(agent, paymentDoc(agent.agentId, 2_500));
    const results = await Promise.all(Array.from({ length: 10 }, () => submitIntent(svc, transport, signed)));
    for (const r of results) expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(new Set(results.map((r) => r.body.decision_id)).size).toBe(1);
    expect(await decisionCount(svc, org.apiKey, agent.agentId)).toBe(1);
  });
});

describe("one signature, both transports", () => {
  it.each([["v1", "grpc"], ["grpc", "v1"]] as [Transport, Transport][])("signed once, sent over %s then %s: the second is a replay of the first", async (firstT, secondT) => {
    const agent = await newAgent(svc, org);
    const signed = signBody(agent, paymentDoc(agent.agentId, 12_000));
    const first = await submitIntent(svc, firstT, signed);
    expectDecisionShape(first, "HUMAN_REVIEW", "requires_dual_approval");
    const second = await submitIntent(svc, secondT, signed);
    expect(second.status).toBe(200);
    expect(second.body).toEqual(first.body);
    expect(await decisionCount(svc, org.apiKey, agent.agentId)).toBe(1);
  });
});

describe.each(TRANSPORTS)("evidence per decision over %s", (transport: Transport) => {
  it("names the Intent digest, agent, certificate, principal's policy versions, graph version, bundle, outcome and reason; verifies with the JWKS", async () => {
    const agent = await newAgent(svc, org);
    const doc = paymentDoc(agent.agentId, 2_500, { context: { invoice: "INV-1" } });
    const signed = signBody(agent, doc);
    const res = await submitIntent(svc, transport, signed);
    expectDecisionShape(res, "HUMAN_REVIEW", "requires_approval");

    const ev = await call(svc, transport, EvidenceService.method.getEvidence, { evidence_id: res.body.evidence_id }, { bearer: org.apiKey });
    expectResult(ev, 200);
    const record = ev.body;
    expect(record).toMatchObject({ evidence_id: res.body.evidence_id, organization_id: org.organizationId, kind: "decision", subject_id: res.body.decision_id });
    expect(record.payload).toMatchObject({
      decision_id: res.body.decision_id,
      agent_id: agent.agentId,
      certificate_id: agent.certificateId,
      intent: doc,
      intent_sha256: createHash("sha256").update(signed.bytes).digest("hex"),
      outcome: "HUMAN_REVIEW",
      reason: "requires_approval",
      policy_versions: { starter: 1, payments: 1 },
      graph_version: 1,
    });
    expect(record.payload.bundle_digest).toMatch(/^[0-9a-f]{64}$/);
    const jwks = (await svc.v1("GET", "/.well-known/jwks.json")).body;
    expect(independentRecordCheck(record, jwks)).toEqual([]);
    // Another organization cannot read it.
    expectResult(await call(svc, transport, EvidenceService.method.getEvidence, { evidence_id: res.body.evidence_id }, { bearer: other.apiKey }), 404, "not_found");
  });
});

describe("evidence names the acting principal", () => {
  // Issue 5 "Evidence per decision": the record names the Intent digest, the agent, certificate,
  // principal, policy versions, graph version, bundle digest, outcome and reason. The member's
  // name is not fixed anywhere, so any member outside the Intent copy holding the id counts.
  it("the decision record carries the principal under which the agent acted", async () => {
    const agent = await newAgent(svc, org);
    const res = await submitIntent(svc, "v1", signBody(agent, paymentDoc(agent.agentId, 10)));
    expect(res.status).toBe(200);
    const record = (await svc.v1("GET", `/v1/evidence/${res.body.evidence_id}`, { bearer: org.apiKey })).body;
    const { intent: _intent, ...rest } = record.payload;
    expect(JSON.stringify(rest), "no member of the decision record names the acting principal").toContain(org.principalId);
  });
});

/**
 * Explicit ordering instead of staggered timers: the first `before` sends go out
 * at once; as soon as one of them is answered (the service is busy with the
 * rest) `act` runs while the next `during` go out; the remaining sends go out
 * only once `act` has been answered. Which of the first two groups `act`
 * overtakes is up to the service; the last group strictly follows it.
 */
async function aroundAct<T>(sends: (() => Promise<T>)[], act: () => Promise<void>, { before, during }: { before: number; during: number }): Promise<{ results: T[]; firstAfter: number }> {
  const early = sends.slice(0, before).map((send) => send());
  await Promise.race(early);
  const racing = sends.slice(before, before + during).map((send) => send());
  await act();
  const late = sends.slice(before + during).map((send) => send());
  return { results: await Promise.all([...early, ...racing, ...late]), firstAfter: before + during };
}

describe("a revocation racing Intents", () => {
  // docs/architecture.md, The Intent path (step 4) and The ledger (preconditions are checked
  // where it commits): once the revocation is committed nothing more may be recorded for the
  // agent. In the org's chain no decision of the agent may follow its agent.revoked record, and
  // every Intent is either decided before it or refused.
  it("records no decision after the revocation (5 rounds of 30 Intents around one revoke)", async () => {
    const late: string[] = [];
    for (let round = 0; round < 5; round++) {
      const agent = await newAgent(svc, org);
      const signed = Array.from({ length: 30 }, () => signBody(agent, intentDoc(agent.agentId)));
      const revoke = async () => {
        const revoked = await svc.v1("POST", `/v1/agents/${agent.agentId}/revoke`, { bearer: org.apiKey, body: {} });
        expect(revoked.status).toBe(200);
      };
      const { results, firstAfter } = await aroundAct(signed.map((s, i) => () => submitIntent(svc, TRANSPORTS[i % 2]!, s)), revoke, { before: 12, during: 12 });
      // Sent before or with the revocation: decided before it, or refused. Sent after it was answered: refused.
      results.forEach((r, i) => {
        if (i >= firstAfter || r.status !== 200) expectResult(r, 403, "agent_revoked");
      });
      const chain = (await exportEvidence(svc, org.apiKey)).records;
      const revokeSeq = chain.find((r) => r.kind === "agent.revoked" && r.subject_id === agent.agentId).seq;
      for (const r of chain) {
        if (r.kind === "decision" && r.payload.agent_id === agent.agentId && r.seq > revokeSeq) {
          late.push(`round ${round}: ${r.payload.outcome} ${r.subject_id} at seq ${r.seq} after agent.revoked at seq ${revokeSeq}`);
        }
      }
    }
    expect(late, "decisions recorded (and answered 200) after the agent's revocation").toEqual([]);
  });
});

/** The platform operator suspends or reactivates an organization. */
async function setOrganizationState(o: OrgFixture, op: "suspend" | "reactivate"): Promise<void> {
  const res = await svc.v1("POST", `/v1/organizations/${o.organizationId}/${op}`, { headers: { "x-service-operator-key": svc.operatorKey! }, body: {} });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
}

describe.each(TRANSPORTS)("a suspended organization over %s", (transport: Transport) => {
  // docs/architecture.md, The Intent path (step 5) and Authentication: while the operator has an
  // organization suspended, its agents' certificates and its bearer keys are refused (403
  // organization_suspended) and nothing is recorded; the operator key still reads it.
  it("refuses its agents' Intents, signed reads and heartbeats and its keys, recording nothing; reactivated, they work again", async () => {
    const o = await newOrgFixture(svc);
    const [agent, suspended, revoked] = await Promise.all([newAgent(svc, o), newAgent(svc, o, "suspended"), newAgent(svc, o, "revoked")]);
    const first = signBody(agent, intentDoc(agent.agentId));
    const decided = await submitIntent(svc, transport, first);
    expectDecisionShape(decided, "ALLOW", "starter_reference_action");
    const decisionId = decided.body.decision_id;
    await setOrganizationState(o, "suspend");

    // The same action at once (a context read under 1 s ago may be reused), another action, the
    // first Intent's bytes again, and a suspended agent's Intent, which would be recorded for review.
    for (const signed of [
      signBody(agent, intentDoc(agent.agentId)),
      signBody(agent, intentDoc(agent.agentId, { action: "launch_rockets" })),
      first,
      signBody(suspended, intentDoc(suspended.agentId)),
    ]) {
      expectResult(await submitIntent(svc, transport, signed), 403, "organization_suspended");
    }
    // Steps 3 and 4 come first: a bad signature is 401, a revoked agent 403 agent_revoked.
    expectResult(await submitIntent(svc, transport, { ...signBody(agent, intentDoc(agent.agentId)), signature: revoked.key.sign("other bytes") }), 401, "signature_invalid");
    expectResult(await submitIntent(svc, transport, signBody(revoked, intentDoc(revoked.agentId))), 403, "agent_revoked");
    expectResult(await agentGetDecision(svc, transport, agent, decisionId), 403, "organization_suspended");
    expectResult(await heartbeat(svc, transport, agent), 403, "organization_suspended");
    expectResult(await call(svc, transport, DecisionService.method.getDecision, { decision_id: decisionId }, { bearer: o.apiKey }), 403, "organization_suspended");
    const byOperator = await call(svc, transport, DecisionService.method.getDecision, { decision_id: decisionId }, { operator: svc.operatorKey!, organizationId: o.organizationId });
    expectResult(byOperator, 200);
    expect(byOperator.body).toMatchObject({ decision_id: decisionId, outcome: "ALLOW" });

    await setOrganizationState(o, "reactivate");
    const chain = (await exportEvidence(svc, o.apiKey)).records;
    const from = chain.findIndex((r) => r.kind === "organization.suspended");
    expect(chain.slice(from).map((r) => r.kind), "records while suspended").toEqual(["organization.suspended", "organization.reactivated"]);
    expect(await decisionCount(svc, o.apiKey, agent.agentId)).toBe(1);
    expect(await decisionCount(svc, o.apiKey, suspended.agentId)).toBe(0);

    expectDecisionShape(await submitIntent(svc, transport, signBody(agent, intentDoc(agent.agentId))), "ALLOW", "starter_reference_action");
    expectDecisionShape(await submitIntent(svc, transport, signBody(suspended, intentDoc(suspended.agentId))), "HUMAN_REVIEW", "agent_suspended");
    expectResult(await agentGetDecision(svc, transport, agent, decisionId), 200);
    expectResult(await heartbeat(svc, transport, agent), 200);
  });
});

describe("a suspension racing Intents", () => {
  // docs/architecture.md, The ledger: the organization being active is checked where the decision
  // commits, so a suspension committed first lets no decision through, whatever the context read.
  it("records no decision after the organization.suspended record (5 rounds of 30 Intents around one suspension)", async () => {
    const late: string[] = [];
    for (let round = 0; round < 5; round++) {
      const o = await newOrgFixture(svc);
      const agent = await newAgent(svc, o);
      const signed = Array.from({ length: 30 }, () => signBody(agent, intentDoc(agent.agentId)));
      const { results, firstAfter } = await aroundAct(signed.map((s, i) => () => submitIntent(svc, TRANSPORTS[i % 2]!, s)), () => setOrganizationState(o, "suspend"), {
        before: 12,
        during: 12,
      });
      // Sent before or with the suspension: decided before it, or refused. Sent after it was answered: refused.
      results.forEach((r, i) => {
        if (i >= firstAfter || r.status !== 200) expectResult(r, 403, "organization_suspended");
      });
      await setOrganizationState(o, "reactivate");
      const chain = (await exportEvidence(svc, o.apiKey)).records;
      const suspendedSeq = chain.find((r) => r.kind === "organization.suspended").seq;
      for (const r of chain) {
        if (r.kind === "decision" && r.seq > suspendedSeq) late.push(`round ${round}: ${r.payload.outcome} ${r.subject_id} at seq ${r.seq} after organization.suspended at seq ${suspendedSeq}`);
      }
      const decided = new Set(chain.filter((r) => r.kind === "decision").map((r) => r.subject_id));
      for (const r of results) if (r.status === 200) expect(decided.has(r.body.decision_id), `decision ${r.body.decision_id} has evidence`).toBe(true);
    }
    expect(late, "decisions recorded (and answered 200) after the organization's suspension").toEqual([]);
  });
});

describe("two replicas writing one organization's chain", () => {
  // Each replica commits a group without locking the chain, checking that the head it last
  // saw is still the head; the other replica's groups and lifecycle changes move it under it.
  it("records every Intent answered 200, and a revocation on the other replica still stops the agent", async () => {
    const other = await startService();
    try {
      const replicas = [svc, other];
      const agent = await newAgent(svc, org);
      const doomed = await newAgent(svc, org);
      const signed = Array.from({ length: 120 }, (_, i) => signBody(i % 3 === 0 ? doomed : agent, intentDoc(i % 3 === 0 ? doomed.agentId : agent.agentId)));
      const revoke = async () => {
        expect((await other.v1("POST", `/v1/agents/${doomed.agentId}/revoke`, { bearer: org.apiKey, body: {} })).status).toBe(200);
      };
      const sends = signed.map((s, i) => () => submitIntent(replicas[i % 2]!, TRANSPORTS[(i >> 1) % 2]!, s));
      const { results, firstAfter } = await aroundAct(sends, revoke, { before: 48, during: 48 });
      results.forEach((r, i) => {
        if (i % 3 === 0 && (i >= firstAfter || r.status !== 200)) expectResult(r, 403, "agent_revoked");
        else expectResult(r, 200);
      });
      const chain = (await exportEvidence(svc, org.apiKey)).records;
      const decided = new Set(chain.filter((r) => r.kind === "decision").map((r) => r.subject_id));
      for (const r of results) if (r.status === 200) expect(decided.has(r.body.decision_id), `decision ${r.body.decision_id} has evidence`).toBe(true);
      const revokeSeq = chain.find((r) => r.kind === "agent.revoked" && r.subject_id === doomed.agentId).seq;
      expect(chain.filter((r) => r.kind === "decision" && r.payload.agent_id === doomed.agentId && r.seq > revokeSeq)).toEqual([]);
    } finally {
      await other.close();
    }
  });
});

describe("decisions of several organizations committed together", () => {
  // One group commit takes concurrent decisions of every organization in one statement; an
  // organization whose check fails there (here: a revoked agent) must hold up no other.
  it("a revocation in one organization refuses only its own agent's Intents; every chain stays whole", async () => {
    const orgs = [org, other, await newOrgFixture(svc)];
    const agents = await Promise.all(orgs.map((o) => newAgent(svc, o)));
    const doomed = await newAgent(svc, orgs[2]!);
    const signed = Array.from({ length: 150 }, (_, i) => (i % 4 === 3 ? doomed : agents[i % 3]!)).map((a) => ({ a, s: signBody(a, intentDoc(a.agentId)) }));
    const revoke = async () => {
      expect((await svc.v1("POST", `/v1/agents/${doomed.agentId}/revoke`, { bearer: orgs[2]!.apiKey, body: {} })).status).toBe(200);
    };
    const { results, firstAfter } = await aroundAct(signed.map(({ s }, i) => () => submitIntent(svc, TRANSPORTS[i % 2]!, s)), revoke, { before: 60, during: 60 });
    results.forEach((r, i) => {
      if (signed[i]!.a === doomed && (i >= firstAfter || r.status !== 200)) expectResult(r, 403, "agent_revoked");
      else expectResult(r, 200);
    });
    for (const o of orgs) {
      const { records, jwks } = await exportEvidence(svc, o.apiKey);
      expect(records.filter((r) => independentRecordCheck(r, jwks).length)).toEqual([]);
      records.forEach((r, k) => expect(r.seq).toBe(k + 1));
      const decided = new Set(records.filter((r) => r.kind === "decision").map((r) => r.subject_id));
      results.forEach((r, i) => {
        if (r.status === 200 && signed[i]!.a.org.organizationId === o.organizationId) expect(decided.has(r.body.decision_id), `decision ${r.body.decision_id} in its chain`).toBe(true);
      });
      const revoked = records.find((r) => r.kind === "agent.revoked" && r.subject_id === doomed.agentId);
      if (revoked) expect(records.filter((r) => r.kind === "decision" && r.payload.agent_id === doomed.agentId && r.seq > revoked.seq)).toEqual([]);
    }
  });
});

describe("a decision commits only on the policy, graph and contract still current", () => {
  // A replica reuses the context it read for an agent's last Intent (policy head, contract) for
  // the next ones; the commit checks it is still current. Changes made on another replica, which
  // this one hears nothing about, must take effect on the very next Intent.
  it("a graph published and a contract approved on another replica apply to the next Intent here", async () => {
    const fixture = await newOrgFixture(svc);
    await publishPaymentsPolicy(svc, fixture);
    const replica = await startService();
    try {
      const agent = await newAgent(svc, fixture);
      const approver = await newApiKey(svc, fixture.apiKey, ["POLICY_APPROVER"], "late approver");
      for (const transport of TRANSPORTS) expectDecisionShape(await submitIntent(svc, transport, signBody(agent, paymentDoc(agent.agentId, 500))), "ALLOW", "within_delegated_authority");

      // The clerk's limit drops from 50,000 to 100 USD, published through the other replica.
      const principal = await replica.v1("GET", `/v1/principals/${fixture.principalId}`, { bearer: fixture.apiKey });
      const graph = {
        roles: [{ role: "clerk", reports_to: null }],
        memberships: [{ principal: principal.body.external_ref, role: "clerk" }],
        limits: [{ holder: "role:clerk", action: "vendor_payment", currency: "USD", max_amount: 100 }],
        delegations: [],
        approval_matrix: [{ action: "vendor_payment", currency: "USD", up_to_amount: 1_000, approvals_required: 0 }],
      };
      expect((await replica.v1("POST", "/v1/authority-graph/versions", { bearer: fixture.apiKey, body: { graph } })).status).toBe(200);
      expect((await replica.v1("POST", "/v1/authority-graph/versions/2/approve", { bearer: approver.apiKey, body: {} })).status).toBe(200);
      expect((await replica.v1("POST", "/v1/authority-graph/versions/2/publish", { bearer: approver.apiKey, body: {} })).status).toBe(200);
      // What a replica with nothing to reuse decides now; this one must decide the same.
      const fresh = await submitIntent(replica, "v1", signBody(agent, paymentDoc(agent.agentId, 500)));
      expect(fresh.status, JSON.stringify(fresh.body)).toBe(200);
      expect(fresh.body.outcome).not.toBe("ALLOW");
      for (const transport of TRANSPORTS) {
        const res = await submitIntent(svc, transport, signBody(agent, paymentDoc(agent.agentId, 500)));
        expectDecisionShape(res, fresh.body.outcome, fresh.body.reason);
        expect((await getDecision(res.body.decision_id, fixture)).graph_version).toBe(2);
      }

      // A contract for the action names amount, currency and counterparty but no context key, approved through the other replica: context is now refused here.
      const withContext = () => signBody(agent, paymentDoc(agent.agentId, 50, { context: { invoice: "INV-1" } }));
      expectDecisionShape(await submitIntent(svc, "v1", withContext()), "ALLOW", "within_delegated_authority");
      const integration = await replica.v1("POST", "/v1/integrations", { bearer: fixture.apiKey, body: { name: "Payments", actions: ["vendor_payment"] } });
      expect(integration.status, JSON.stringify(integration.body)).toBe(200);
      const id = integration.body.integration_id;
      const contract = await replica.v1("POST", `/v1/integrations/${id}/contract-versions`, {
        bearer: fixture.apiKey,
        body: { resource_path: "counterparty", context_bindings: { amount: "amount", currency: "currency" } },
      });
      expect(contract.status, JSON.stringify(contract.body)).toBe(200);
      expect((await replica.v1("POST", `/v1/integrations/${id}/contract-versions/${contract.body.version}/approve`, { bearer: approver.apiKey, body: {} })).status).toBe(200);
      for (const transport of TRANSPORTS) expectResult(await submitIntent(svc, transport, withContext()), 422, "undeclared_field");
      expectDecisionShape(await submitIntent(svc, "grpc", signBody(agent, paymentDoc(agent.agentId, 50))), "ALLOW", "within_delegated_authority");
    } finally {
      await replica.close();
    }
  });
});

describe("the whole run leaves a valid chain", () => {
  it("every record of the organization verifies independently against the JWKS", async () => {
    const { records, jwks } = await exportEvidence(svc, org.apiKey);
    expect(records.length).toBeGreaterThan(50);
    const bad = records.map((r) => [r.seq, independentRecordCheck(r, jwks)] as const).filter(([, p]) => p.length);
    expect(bad).toEqual([]);
    records.forEach((r, i) => {
      expect(r.seq).toBe(i + 1);
      expect(r.prev_digest).toBe(i === 0 ? null : records[i - 1].digest);
    });
  });
});
