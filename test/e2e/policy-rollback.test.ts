import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { verifyEvidenceExport } from "../../src/evidence/verify.js";
import { DecisionService } from "../../src/gen/mandate/v1/decisions_pb.js";
import { PolicyService } from "../../src/gen/mandate/v1/policies_pb.js";
import {
  call,
  expectResult,
  exportEvidence,
  intentDoc,
  newAgent,
  newApiKey,
  newOrgFixture,
  signBody,
  submitIntent,
  TRANSPORTS,
  type OrgFixture,
  type Result,
  type TestAgent,
  type Transport,
} from "../support/agents.js";
import { sharedDatabaseUrl, startService, type TestService } from "../support/service.js";

/*
 * Rollback and disable of runtime policies (issue 20, "Blast radius and rollback";
 * docs/architecture.md, Policies: Rollback and disable): four eyes (one identity
 * requests, another holding POLICY_APPROVER applies), what the applied change does to
 * later decisions, staleness, one pending change per policy, and the evidence.
 * Short contract cases (permissions, the starter policy) are in test/cases/policies.yaml.
 */

const cap = (limit: number, reason: string) => ({
  rules: {
    actions: ["ship"],
    rules: [
      { id: "cap", when: { amount: { gt: limit } }, outcome: "DENY", reason },
      { id: "ok", outcome: "ALLOW", reason: "within_cap" },
    ],
  },
});
const SHIP_V1 = cap(10, "over_v1_cap");
const SHIP_V2 = cap(100, "over_v2_cap");
const SHIP_V3 = cap(1000, "over_v3_cap");

type Key = { keyId: string; apiKey: string };

interface Fixture {
  org: OrgFixture;
  agent: TestAgent;
  /** POLICY_AUTHOR only. */
  author: Key;
  /** POLICY_AUTHOR only, another identity. */
  author2: Key;
  /** POLICY_APPROVER (and DECISION_READ). */
  approver: Key;
  /** POLICY_APPROVER, another identity. */
  approver2: Key;
}

async function fixture(svc: TestService): Promise<Fixture> {
  const org = await newOrgFixture(svc);
  const [agent, author, author2, approver, approver2] = await Promise.all([
    newAgent(svc, org),
    newApiKey(svc, org.apiKey, ["POLICY_AUTHOR"]),
    newApiKey(svc, org.apiKey, ["POLICY_AUTHOR"]),
    newApiKey(svc, org.apiKey, ["POLICY_APPROVER", "DECISION_READ"]),
    newApiKey(svc, org.apiKey, ["POLICY_APPROVER"]),
  ]);
  return { org, agent, author, author2, approver, approver2 };
}

/** Authors, submits, approves and publishes a version (over /v1: set-up, not what is tested). */
async function publish(svc: TestService, f: Fixture, key: string, source: object): Promise<number> {
  const exists = (await svc.v1("GET", `/v1/policies/${key}`, { bearer: f.org.apiKey })).status === 200;
  const created = exists
    ? await svc.v1("POST", `/v1/policies/${key}/versions`, { bearer: f.author.apiKey, body: { source } })
    : await svc.v1("POST", "/v1/policies", { bearer: f.author.apiKey, body: { policy_key: key, description: key, source } });
  expect(created.status, JSON.stringify(created.body)).toBe(200);
  const v = created.body.version as number;
  for (const [step, bearer] of [["submit", f.author.apiKey], ["approve", f.approver.apiKey], ["publish", f.approver.apiKey]] as const) {
    const res = await svc.v1("POST", `/v1/policies/${key}/versions/${v}/${step}`, { bearer });
    expect(res.status, `${step}: ${JSON.stringify(res.body)}`).toBe(200);
  }
  return v;
}

const rollback = (svc: TestService, t: Transport, key: Key, policyKey: string, note = "") =>
  call(svc, t, PolicyService.method.rollbackPolicy, { policy_key: policyKey, note }, { bearer: key.apiKey });
const disable = (svc: TestService, t: Transport, key: Key, policyKey: string, note = "") =>
  call(svc, t, PolicyService.method.disablePolicy, { policy_key: policyKey, note }, { bearer: key.apiKey });
const getPolicy = (svc: TestService, t: Transport, f: Fixture, policyKey: string) =>
  call(svc, t, PolicyService.method.getPolicy, { policy_key: policyKey }, { bearer: f.org.apiKey });

/** Submits a `ship` Intent of `amount` and returns the decision as GET /v1/decisions/{id} shows it. */
async function ship(svc: TestService, t: Transport, f: Fixture, amount: number): Promise<Record<string, any>> {
  const res = await submitIntent(svc, t, signBody(f.agent, intentDoc(f.agent.agentId, { action: "ship", amount, currency: "USD" })));
  expectResult(res, 200);
  const decision = await call(svc, t, DecisionService.method.getDecision, { decision_id: res.body.decision_id }, { bearer: f.org.apiKey });
  expectResult(decision, 200);
  return decision.body;
}

/** The organization's evidence records of `kind`, after checking that its whole chain verifies. */
async function verifiedRecords(svc: TestService, f: Fixture, kind: string): Promise<any[]> {
  const exported = await exportEvidence(svc, f.org.apiKey);
  expect(verifyEvidenceExport(exported, { trustedJwks: exported.jwks, organizationId: f.org.organizationId })).toMatchObject({ ok: true, problems: [] });
  return exported.records.filter((r) => r.kind === kind);
}

const changeOf = (res: Result) => ({ ...res.body, approved_by: res.body.approved_by ?? "" });

let svc: TestService;
beforeAll(async () => {
  svc = await startService();
});
afterAll(async () => {
  await svc?.close();
});

describe.each(TRANSPORTS)("over %s", (t) => {
  it("a rollback requested by one identity and applied by another restores the previous version's decisions, with evidence", async () => {
    const f = await fixture(svc);
    await publish(svc, f, "ship", SHIP_V1);
    await publish(svc, f, "ship", SHIP_V2);
    expect(await ship(svc, t, f, 50)).toMatchObject({ outcome: "ALLOW", reason: "within_cap", policy_versions: { ship: 2, starter: 1 } });

    const requested = await rollback(svc, t, f.author, "ship", "v2 lets 50 through");
    expectResult(requested, 200);
    expect(changeOf(requested)).toMatchObject({
      policy_key: "ship",
      kind: "rollback",
      state: "pending_approval",
      from_version: 2,
      to_version: 1,
      requested_by: f.author.keyId,
      approved_by: "",
      requested_at: expect.stringMatching(/Z$/),
    });
    expect(requested.body.applied_at).toBeUndefined();
    // Requested is not applied: v2 still decides.
    expect(await ship(svc, t, f, 50)).toMatchObject({ outcome: "ALLOW", policy_versions: { ship: 2 } });

    // Four eyes: the requester cannot apply it, nor can another identity without POLICY_APPROVER.
    const again = await rollback(svc, t, f.author, "ship");
    expectResult(again, 403, "permission_denied");
    expect(again.body.message).toMatch(/cannot be approved by the identity that requested it/);
    const byAuthor = await rollback(svc, t, f.author2, "ship");
    expectResult(byAuthor, 403, "permission_denied");
    expect(byAuthor.body.message).toMatch(/POLICY_APPROVER/);
    // One pending change per policy: a disable cannot be requested meanwhile.
    expectResult(await disable(svc, t, f.approver, "ship"), 409, "invalid_transition");

    const applied = await rollback(svc, t, f.approver, "ship", "agreed");
    expectResult(applied, 200);
    expect(changeOf(applied)).toMatchObject({
      policy_key: "ship",
      kind: "rollback",
      state: "applied",
      from_version: 2,
      to_version: 1,
      requested_by: f.author.keyId,
      approved_by: f.approver.keyId,
      applied_at: expect.stringMatching(/Z$/),
    });

    const policy = await getPolicy(svc, t, f, "ship");
    expectResult(policy, 200);
    expect(policy.body.active_version).toBe(1);
    expect(policy.body.versions.map((v: any) => [v.version, v.state])).toEqual([
      [1, "active"],
      [2, "superseded"],
    ]);
    const after = await ship(svc, t, f, 50);
    expect(after).toMatchObject({ outcome: "DENY", reason: "over_v1_cap", policy_versions: { ship: 1, starter: 1 } });

    // Version 1 replaced nothing: nothing further to roll back to. Republishing v2 is no way back either.
    const further = await rollback(svc, t, f.author, "ship");
    expectResult(further, 409, "invalid_transition");
    expect(further.body.message).toMatch(/nothing to roll back to/);
    expectResult(await call(svc, t, PolicyService.method.publishPolicyVersion, { policy_key: "ship", version: 2 }, { bearer: f.approver.apiKey }), 409, "invalid_transition");

    const records = await verifiedRecords(svc, f, "policy.rolled_back");
    expect(records).toHaveLength(1);
    expect(records[0].subject_id).toBe("ship@1");
    expect(records[0].payload).toMatchObject({
      policy_key: "ship",
      from_version: 2,
      to_version: 1,
      requested_by: f.author.keyId,
      approved_by: f.approver.keyId,
      note: "v2 lets 50 through",
      bundle_digest: after.bundle_digest,
    });
  });

  it("successive rollbacks walk back through the publications in order", async () => {
    const f = await fixture(svc);
    for (const source of [SHIP_V1, SHIP_V2, SHIP_V3]) await publish(svc, f, "ship", source);
    expect(await ship(svc, t, f, 500)).toMatchObject({ outcome: "ALLOW", policy_versions: { ship: 3 } });
    for (const [from, to, reason] of [[3, 2, "over_v2_cap"], [2, 1, "over_v1_cap"]] as const) {
      expectResult(await rollback(svc, t, f.author, "ship"), 200);
      const applied = await rollback(svc, t, f.approver, "ship");
      expect(changeOf(applied)).toMatchObject({ state: "applied", from_version: from, to_version: to });
      expect(await ship(svc, t, f, 500)).toMatchObject({ outcome: "DENY", reason, policy_versions: { ship: to } });
    }
    expectResult(await rollback(svc, t, f.author, "ship"), 409, "invalid_transition");
  });

  it("a disabled policy decides nothing: its action falls to another policy covering it, then to unrecognized_action", async () => {
    const f = await fixture(svc);
    await publish(svc, f, "ship", SHIP_V1);
    await publish(svc, f, "fallback", { rules: { actions: ["ship"], rules: [{ id: "any", outcome: "ALLOW", reason: "fallback_allows" }] } });
    expect(await ship(svc, t, f, 50)).toMatchObject({ outcome: "DENY", reason: "over_v1_cap" });

    const requested = await disable(svc, t, f.author, "ship", "misfiring");
    expect(changeOf(requested)).toMatchObject({ kind: "disable", state: "pending_approval", from_version: 1, to_version: 0, requested_by: f.author.keyId });
    expectResult(await disable(svc, t, f.author, "ship"), 403, "permission_denied");
    const applied = await disable(svc, t, f.approver, "ship");
    expect(changeOf(applied)).toMatchObject({ kind: "disable", state: "applied", from_version: 1, to_version: 0, approved_by: f.approver.keyId });

    const decided = await ship(svc, t, f, 50);
    expect(decided).toMatchObject({ outcome: "ALLOW", reason: "fallback_allows", policy_versions: { fallback: 1, starter: 1 } });
    expect(decided.policy_versions.ship).toBeUndefined();
    const policy = await getPolicy(svc, t, f, "ship");
    expect(policy.body).toMatchObject({ active_version: 0, versions: [{ version: 1, state: "disabled" }] });
    const list = await call(svc, t, PolicyService.method.listPolicies, {}, { bearer: f.org.apiKey });
    expect(list.body.policies.find((p: any) => p.policy_key === "ship")).toMatchObject({ active_version: 0, versions: [{ state: "disabled" }] });

    // Nothing is active: neither a second disable nor a rollback has anything to act on.
    expectResult(await disable(svc, t, f.author, "ship"), 409, "invalid_transition");
    expectResult(await rollback(svc, t, f.author, "ship"), 409, "invalid_transition");

    expectResult(await disable(svc, t, f.author, "fallback"), 200);
    expectResult(await disable(svc, t, f.approver2, "fallback"), 200);
    expect(await ship(svc, t, f, 50)).toMatchObject({ outcome: "HUMAN_REVIEW", reason: "unrecognized_action" });

    // Publishing a new version enables the policy again; it replaced no active version, so it has nothing to roll back to.
    await publish(svc, f, "ship", SHIP_V2);
    expect(await ship(svc, t, f, 50)).toMatchObject({ outcome: "ALLOW", reason: "within_cap", policy_versions: { ship: 2 } });
    expectResult(await rollback(svc, t, f.author, "ship"), 409, "invalid_transition");

    const records = await verifiedRecords(svc, f, "policy.disabled");
    expect(records.map((r) => r.subject_id)).toEqual(["ship@1", "fallback@1"]);
    expect(records[0].payload).toMatchObject({ policy_key: "ship", from_version: 1, to_version: 0, requested_by: f.author.keyId, approved_by: f.approver.keyId, note: "misfiring", bundle_digest: expect.stringMatching(/^[0-9a-f]{64}$/) });
  });

  it("a pending change goes stale when the active version moves before it is applied", async () => {
    const f = await fixture(svc);
    await publish(svc, f, "ship", SHIP_V1);
    await publish(svc, f, "ship", SHIP_V2);
    expectResult(await rollback(svc, t, f.author, "ship"), 200);
    await publish(svc, f, "ship", SHIP_V3);

    const stale = await rollback(svc, t, f.approver, "ship");
    expectResult(stale, 409, "invalid_transition");
    expect(stale.body.message).toMatch(/stale: version 2 was active then/);
    expect((await getPolicy(svc, t, f, "ship")).body.active_version).toBe(3);

    // The stale change no longer blocks: the next call requests anew, against version 3.
    const fresh = await rollback(svc, t, f.approver, "ship");
    expect(changeOf(fresh)).toMatchObject({ state: "pending_approval", from_version: 3, to_version: 2, requested_by: f.approver.keyId });
    expect(changeOf(await rollback(svc, t, f.approver2, "ship"))).toMatchObject({ state: "applied", from_version: 3, to_version: 2 });
    expect(await ship(svc, t, f, 500)).toMatchObject({ outcome: "DENY", reason: "over_v2_cap", policy_versions: { ship: 2 } });
  });
});

describe("concurrency", () => {
  it("of many approvers applying one pending rollback at once, exactly one applies it", async () => {
    const f = await fixture(svc);
    await publish(svc, f, "ship", SHIP_V1);
    await publish(svc, f, "ship", SHIP_V2);
    expectResult(await rollback(svc, "v1", f.author, "ship"), 200);
    const approvers = await Promise.all(Array.from({ length: 6 }, () => newApiKey(svc, f.org.apiKey, ["POLICY_APPROVER"])));
    const answers = await Promise.all(approvers.map((a, i) => rollback(svc, i % 2 ? "grpc" : "v1", a, "ship")));
    const applied = answers.filter((a) => a.status === 200);
    expect(applied, JSON.stringify(answers.map((a) => [a.status, a.body]))).toHaveLength(1);
    expect(applied[0]!.body).toMatchObject({ state: "applied", from_version: 2, to_version: 1 });
    // The others found it applied: version 1 replaced nothing, so nothing is left to roll back to.
    for (const a of answers.filter((x) => x.status !== 200)) expectResult(a, 409, "invalid_transition");
    expect(await verifiedRecords(svc, f, "policy.rolled_back")).toHaveLength(1);
    expect((await svc.v1("GET", "/v1/policies/ship", { bearer: f.org.apiKey })).body.active_version).toBe(1);
  });

  it("the database holds at most one pending change per policy", async () => {
    const f = await fixture(svc);
    await publish(svc, f, "ship", SHIP_V1);
    expectResult(await disable(svc, "v1", f.author, "ship"), 200);
    const client = new pg.Client({ connectionString: sharedDatabaseUrl() });
    await client.connect();
    try {
      const second = client.query(
        `INSERT INTO policy_changes (change_id, organization_id, policy_key, kind, state, from_version, to_version, requested_by)
         VALUES ('pch_test_second', $1, 'ship', 'rollback', 'pending_approval', 1, 0, 'someone')`,
        [f.org.organizationId],
      );
      await expect(second).rejects.toMatchObject({ code: "23505", constraint: "policy_changes_one_pending" });
    } finally {
      await client.end();
    }
  });
});
