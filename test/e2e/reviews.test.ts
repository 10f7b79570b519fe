import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DecisionService } from "../../src/gen/mandate/v1/decisions_pb.js";
import { WIRE_TIMESTAMP } from "../support/api.js";
import {
  agentGetDecision,
  call,
  evidenceCursor,
  expectResult,
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
  type Auth,
  type OrgFixture,
  type TestAgent,
  type Transport,
} from "../support/agents.js";
import { startService, type TestService } from "../support/service.js";

/*
 * Issue 5: reading decisions (DECISION_READ keys and the agent itself) and
 * resolving human reviews, through /v1 and gRPC: single approval, dual
 * approval by two distinct identities, rejection, resolving twice, the
 * REVIEWER permission, and isolation between organizations.
 */

const D = DecisionService.method;

let svc: TestService;
let org: OrgFixture;
let other: OrgFixture;
let agent: TestAgent;
let sibling: TestAgent;
let foreign: TestAgent;
/** Two reviewers (REVIEWER + DECISION_READ), a reader without REVIEWER, a key without DECISION_READ. */
let r1: { keyId: string; apiKey: string };
let r2: { keyId: string; apiKey: string };
let reader: { keyId: string; apiKey: string };
let blind: { keyId: string; apiKey: string };

beforeAll(async () => {
  svc = await startService();
  [org, other] = await Promise.all([newOrgFixture(svc), newOrgFixture(svc)]);
  await publishPaymentsPolicy(svc, org);
  [agent, sibling, foreign, r1, r2, reader, blind] = await Promise.all([
    newAgent(svc, org),
    newAgent(svc, org),
    newAgent(svc, other),
    newApiKey(svc, org.apiKey, ["REVIEWER", "DECISION_READ"], "reviewer-1"),
    newApiKey(svc, org.apiKey, ["REVIEWER", "DECISION_READ"], "reviewer-2"),
    newApiKey(svc, org.apiKey, ["DECISION_READ"], "reader"),
    newApiKey(svc, org.apiKey, ["AGENT_ADMIN"], "blind"),
  ]);
});
afterAll(() => svc?.close());

const key = (k: { apiKey: string }): Auth => ({ bearer: k.apiKey });

/** Submits a vendor payment of `amount` over /v1 and returns its decision id. */
async function decide(amount: number, who = agent): Promise<string> {
  const res = await submitIntent(svc, "v1", signBody(who, paymentDoc(who.agentId, amount)));
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.decision_id;
}

describe.each(TRANSPORTS)("reading decisions over %s", (transport: Transport) => {
  it("a DECISION_READ key reads the decision with status; without DECISION_READ → 403; another org → 404; unknown → 404", async () => {
    const id = await decide(2_500);
    const res = await call(svc, transport, D.getDecision, { decision_id: id }, key(reader));
    expectResult(res, 200);
    expect(res.body).toMatchObject({ decision_id: id, outcome: "HUMAN_REVIEW", reason: "requires_approval", status: "PENDING", agent_id: agent.agentId, action: "vendor_payment" });
    expect(res.body.evaluated_at).toMatch(WIRE_TIMESTAMP);
    expect(res.body.resolution).toBeUndefined();
    expectResult(await call(svc, transport, D.getDecision, { decision_id: id }, key(blind)), 403, "permission_denied");
    expectResult(await call(svc, transport, D.getDecision, { decision_id: id }, { bearer: other.apiKey }), 404, "not_found");
    expectResult(await call(svc, transport, D.getDecision, { decision_id: "dec_nope" }, key(reader)), 404, "not_found");
    expectResult(await call(svc, transport, D.getDecision, { decision_id: id }), 401, "missing_credentials");
  });

  it("an ALLOW decision has no status and no resolution", async () => {
    const id = await decide(10);
    const res = await call(svc, transport, D.getDecision, { decision_id: id }, key(reader));
    expectResult(res, 200);
    expect(res.body).toMatchObject({ outcome: "ALLOW", reason: "within_delegated_authority" });
    expect(res.body.status).toBeUndefined();
    expect(res.body.resolution).toBeUndefined();
  });

  it("the agent reads its own decision with an agent-signed GET; another agent's (same org or not) → 404", async () => {
    const id = await decide(2_500);
    const own = await agentGetDecision(svc, transport, agent, id);
    expectResult(own, 200);
    expect(own.body).toMatchObject({ decision_id: id, outcome: "HUMAN_REVIEW", status: "PENDING" });
    expectResult(await agentGetDecision(svc, transport, sibling, id), 404, "not_found");
    expectResult(await agentGetDecision(svc, transport, foreign, id), 404, "not_found");
  });

  it("a revoked, retired or rotated-out certificate reads nothing, not even its own decisions; a suspended agent still reads its own", async () => {
    // docs/architecture.md, Authentication: what an agent's state still allows is decided per operation;
    // a revoked, retired or rotated-out certificate authenticates nothing, reads included.
    const [revoked, retired, rotated, suspended] = await Promise.all([newAgent(svc, org), newAgent(svc, org), newAgent(svc, org), newAgent(svc, org)]);
    const [ofRevoked, ofRetired, ofRotated, ofSuspended] = await Promise.all([decide(10, revoked), decide(10, retired), decide(2_500, rotated), decide(2_500, suspended)]);
    for (const [a, id] of [[revoked, ofRevoked], [retired, ofRetired], [rotated, ofRotated], [suspended, ofSuspended]] as const) expectResult(await agentGetDecision(svc, transport, a, id), 200);
    const newKey = newAgentKey();
    const lifecycle = async (path: string, body: unknown = {}) => {
      const res = await svc.v1("POST", path, { bearer: org.apiKey, body });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return res.body;
    };
    await lifecycle(`/v1/agents/${revoked.agentId}/revoke`);
    await lifecycle(`/v1/agents/${retired.agentId}/retire`);
    await lifecycle(`/v1/agents/${suspended.agentId}/suspend`);
    const { certificate_id: newCertificate } = await lifecycle(`/v1/agents/${rotated.agentId}/rotate-key`, { public_key: newKey.publicKey });

    expectResult(await agentGetDecision(svc, transport, revoked, ofRevoked), 403, "agent_revoked");
    expectResult(await agentGetDecision(svc, transport, retired, ofRetired), 403, "agent_retired");
    expectResult(await agentGetDecision(svc, transport, rotated, ofRotated), 401, "unknown_key");
    expectResult(await agentGetDecision(svc, transport, { certificateId: rotated.certificateId, key: newKey }, ofRotated), 401, "unknown_key");
    const renewed = await agentGetDecision(svc, transport, { certificateId: newCertificate, key: newKey }, ofRotated);
    expectResult(renewed, 200);
    expect(renewed.body).toMatchObject({ decision_id: ofRotated, agent_id: rotated.agentId });
    const own = await agentGetDecision(svc, transport, suspended, ofSuspended);
    expectResult(own, 200);
    expect(own.body).toMatchObject({ decision_id: ofSuspended, status: "PENDING" });
  });

  it("agent-signed reads refuse a stale timestamp (422), a forged or misdirected signature (401) and a missing timestamp (401)", async () => {
    const id = await decide(10);
    const other = await decide(10);
    expectResult(await agentGetDecision(svc, transport, agent, id, new Date(Date.now() - 400_000).toISOString()), 422, "request_expired");
    expectResult(await agentGetDecision(svc, transport, { ...agent, key: sibling.key }, id), 401, "signature_invalid");
    // A signature for one decision does not open another.
    const ts = new Date().toISOString();
    const signature = agent.key.sign(`GET /v1/decisions/${other}\n${ts}`);
    expectResult(await call(svc, transport, D.getDecision, { decision_id: id }, { keyId: agent.certificateId, signature, timestamp: ts }), 401, "signature_invalid");
    expectResult(await call(svc, transport, D.getDecision, { decision_id: id }, { keyId: agent.certificateId, signature }), 401, "missing_credentials");
    expectResult(await agentGetDecision(svc, transport, { ...agent, certificateId: "crt_nope" }, id), 401, "unknown_key");
  });

  it("lists the review queue with filters and pages, newest first, org-scoped", async () => {
    const a = await newAgent(svc, org);
    const ids = [];
    for (const amount of [2_500, 10, 12_000, 30_000, 3_000]) ids.push(await decide(amount, a));
    const list = (q: Record<string, unknown>, k = reader) => call(svc, transport, D.listDecisions, { agent_id: a.agentId, ...q }, key(k));
    const pending = await list({ status: "PENDING" });
    expectResult(pending, 200);
    expect(pending.body.decisions.map((d: any) => d.decision_id)).toEqual([ids[4], ids[2], ids[0]]);
    const denied = await list({ outcome: "DENY" });
    expect(denied.body.decisions.map((d: any) => d.decision_id)).toEqual([ids[3]]);
    // Pages of two, following next_page_token, cover everything once.
    const seen: string[] = [];
    let token = "";
    for (let i = 0; i < 5; i++) {
      const page = await list({ page_size: 2, ...(token && { page_token: token }) });
      expectResult(page, 200);
      expect(page.body.decisions.length).toBeLessThanOrEqual(2);
      seen.push(...page.body.decisions.map((d: any) => d.decision_id));
      token = page.body.next_page_token;
      if (!token) break;
    }
    expect(seen).toEqual([...ids].reverse());
    expectResult(await list({ page_token: "garbage!" }), 422, "validation_failed");
    expectResult(await list({}, blind), 403, "permission_denied");
    const foreignView = await call(svc, transport, D.listDecisions, { agent_id: a.agentId }, { bearer: other.apiKey });
    expectResult(foreignView, 200);
    expect(foreignView.body.decisions).toEqual([]);
  });
});

describe.each(TRANSPORTS)("resolving reviews over %s", (transport: Transport) => {
  const review = (id: string, resolution: string, k: { apiKey: string } | OrgFixture, reason = `looked at it (${resolution})`) =>
    call(svc, transport, D.reviewDecision, { decision_id: id, resolution, reason }, { bearer: k.apiKey });

  it("one approval resolves a single-approval review; the outcome stays HUMAN_REVIEW; resolving again → 409", async () => {
    const id = await decide(2_500);
    const chain = await evidenceCursor(svc, org.apiKey);
    const res = await review(id, "approved", r1, "invoice matches PO");
    expectResult(res, 200);
    expect(res.body).toMatchObject({
      decision_id: id,
      outcome: "HUMAN_REVIEW",
      reason: "requires_approval",
      status: "RESOLVED",
      resolution: { resolution: "approved", resolved_by: r1.keyId, reason: "invoice matches PO" },
    });
    expect(res.body.resolution.resolved_at).toMatch(WIRE_TIMESTAMP);
    // Polling shows the same, for keys and for the agent.
    const polled = await call(svc, transport, D.getDecision, { decision_id: id }, key(reader));
    expect(polled.body).toMatchObject({ outcome: "HUMAN_REVIEW", status: "RESOLVED", resolution: res.body.resolution });
    const byAgent = await agentGetDecision(svc, transport, agent, id);
    expect(byAgent.body).toMatchObject({ outcome: "HUMAN_REVIEW", status: "RESOLVED", resolution: res.body.resolution });
    // The resolution is evidence, signed and chained.
    const records = await chain.next();
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({ subject_id: id, payload: { decision_id: id, resolution: "approved", by: r1.keyId, status: "RESOLVED" } });
    const jwks = (await svc.v1("GET", "/.well-known/jwks.json")).body;
    expect(independentRecordCheck(records[0], jwks)).toEqual([]);

    for (const [resolution, k] of [["approved", r2], ["rejected", r1], ["rejected", r2]] as const) {
      expectResult(await review(id, resolution, k), 409, "review_already_resolved");
    }
    expect((await call(svc, transport, D.getDecision, { decision_id: id }, key(reader))).body.resolution).toEqual(res.body.resolution);
    expect(await chain.next()).toEqual([]);
  });

  it("dual approval needs two distinct identities; the first leaves it PENDING with its approval visible", async () => {
    const id = await decide(12_000);
    const chain = await evidenceCursor(svc, org.apiKey);
    const first = await review(id, "approved", r1, "first look");
    expectResult(first, 200);
    expect(first.body).toMatchObject({ outcome: "HUMAN_REVIEW", reason: "requires_dual_approval", status: "PENDING" });
    expect(first.body.resolution).toBeUndefined();
    expect(first.body.approvals).toEqual([{ resolved_by: r1.keyId, resolved_at: expect.stringMatching(WIRE_TIMESTAMP), reason: "first look" }]);
    const queue = await call(svc, transport, D.listDecisions, { status: "PENDING", agent_id: agent.agentId, page_size: 500 }, key(reader));
    expect(queue.body.decisions.find((d: any) => d.decision_id === id)?.approvals).toHaveLength(1);

    // The same identity cannot supply the second approval.
    const twice = await review(id, "approved", r1, "me again");
    expect(twice.status).toBeGreaterThanOrEqual(400);
    expect(twice.status).toBeLessThan(500);
    const still = await call(svc, transport, D.getDecision, { decision_id: id }, key(reader));
    expect(still.body).toMatchObject({ status: "PENDING" });
    expect(still.body.approvals).toHaveLength(1);

    const second = await review(id, "approved", r2, "second look");
    expectResult(second, 200);
    expect(second.body).toMatchObject({
      outcome: "HUMAN_REVIEW",
      reason: "requires_dual_approval",
      status: "RESOLVED",
      resolution: { resolution: "approved", resolved_by: r2.keyId, reason: "second look" },
    });
    expect(second.body.approvals.map((a: any) => a.resolved_by)).toEqual([r1.keyId, r2.keyId]);
    // One record per applied review action.
    const records = await chain.next();
    expect(records.map((r) => [r.subject_id, r.payload.by, r.payload.status])).toEqual([
      [id, r1.keyId, "PENDING"],
      [id, r2.keyId, "RESOLVED"],
    ]);
    expectResult(await review(id, "rejected", org), 409, "review_already_resolved");
  });

  it("one rejection resolves it rejected, also halfway through a dual approval", async () => {
    const single = await decide(2_500);
    const rejected = await review(single, "rejected", r2, "unknown vendor");
    expectResult(rejected, 200);
    expect(rejected.body).toMatchObject({ outcome: "HUMAN_REVIEW", status: "RESOLVED", resolution: { resolution: "rejected", resolved_by: r2.keyId, reason: "unknown vendor" } });

    const dual = await decide(12_000);
    expectResult(await review(dual, "approved", r1), 200);
    const res = await review(dual, "rejected", r2, "no");
    expectResult(res, 200);
    expect(res.body).toMatchObject({ outcome: "HUMAN_REVIEW", status: "RESOLVED", resolution: { resolution: "rejected", resolved_by: r2.keyId } });
    expectResult(await review(dual, "approved", org), 409, "review_already_resolved");
  });

  it("concurrent reviews serialize: two approvers complete a dual approval once; approve vs reject on a single review, one wins", async () => {
    const dual = await decide(12_000);
    const both = await Promise.all([review(dual, "approved", r1), review(dual, "approved", r2)]);
    for (const r of both) expectResult(r, 200);
    const final = await call(svc, transport, D.getDecision, { decision_id: dual }, key(reader));
    expect(final.body.status).toBe("RESOLVED");
    expect(final.body.approvals.map((a: any) => a.resolved_by).sort()).toEqual([r1.keyId, r2.keyId].sort());
    expect(both.filter((r) => r.body.status === "RESOLVED")).toHaveLength(1);

    const single = await decide(2_500);
    const chain = await evidenceCursor(svc, org.apiKey);
    const race = await Promise.all([review(single, "approved", r1), review(single, "rejected", r2), review(single, "approved", r2)]);
    const winners = race.filter((r) => r.status === 200);
    expect(winners).toHaveLength(1);
    for (const r of race.filter((r) => r.status !== 200)) expectResult(r, 409, "review_already_resolved");
    const after = await call(svc, transport, D.getDecision, { decision_id: single }, key(reader));
    expect(after.body.resolution).toEqual(winners[0]!.body.resolution);
    expect(await chain.next()).toHaveLength(1);
  });

  it("a suspended agent's preserved attempt is reviewable", async () => {
    const suspended = await newAgent(svc, org, "suspended");
    const res = await submitIntent(svc, "v1", signBody(suspended, intentDoc(suspended.agentId)));
    expect(res.body).toMatchObject({ outcome: "HUMAN_REVIEW", reason: "agent_suspended", status: "PENDING" });
    const done = await review(res.body.decision_id, "approved", r1);
    expectResult(done, 200);
    expect(done.body).toMatchObject({ outcome: "HUMAN_REVIEW", reason: "agent_suspended", status: "RESOLVED" });
  });

  it("refuses a key without REVIEWER (403), another org (404), a final ALLOW/DENY (409), an empty note or no resolution (422); nothing changes", async () => {
    const id = await decide(2_500);
    const chain = await evidenceCursor(svc, org.apiKey);
    expectResult(await review(id, "approved", reader), 403, "permission_denied");
    expectResult(await review(id, "approved", other), 404, "not_found");
    expectResult(await review("dec_nope", "approved", r1), 404, "not_found");
    expectResult(await call(svc, transport, D.reviewDecision, { decision_id: id, resolution: "approved", reason: "ok" }), 401, "missing_credentials");
    expectResult(await review(id, "approved", r1, "   "), 422, "validation_failed");
    expectResult(await call(svc, transport, D.reviewDecision, { decision_id: id, reason: "no resolution" }, key(r1)), 422, "validation_failed");
    for (const amount of [10, 30_000]) {
      const final = await decide(amount);
      const res = await review(final, "approved", r1);
      expect(res.status, JSON.stringify(res.body)).toBe(409);
      const after = await call(svc, transport, D.getDecision, { decision_id: final }, key(reader));
      expect(after.body.status).toBeUndefined();
      expect(after.body.resolution).toBeUndefined();
    }
    const untouched = await call(svc, transport, D.getDecision, { decision_id: id }, key(reader));
    expect(untouched.body).toMatchObject({ status: "PENDING", approvals: [] });
    // Only the two decisions made above were recorded; no refused review left a trace.
    expect((await chain.next()).map((r) => r.kind)).toEqual(["decision", "decision"]);
  });
});
