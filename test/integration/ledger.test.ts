import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EvidenceLog } from "../../src/domain/evidence-log.js";
import { newId } from "../../src/domain/ids.js";
import { verifyEvidenceExport } from "../../src/evidence/verify.js";
import type { CapabilityRow, NewCapability } from "../../src/storage/capabilities.js";
import type { NewDecision } from "../../src/storage/decisions.js";
import type { EvidenceRecord } from "../../src/evidence/record.js";
import type { DecisionToRecord, Ledger } from "../../src/storage/ledger.js";
import { PostgresCapabilityStore } from "../../src/storage/postgres/capabilities.js";
import { createDatabase, type Database } from "../../src/storage/postgres/database.js";
import { PostgresDecisionStore } from "../../src/storage/postgres/decisions.js";
import { EvidenceChain } from "../../src/storage/postgres/evidence-chain.js";
import { PostgresEvidenceStore } from "../../src/storage/postgres/evidence.js";
import { PostgresLedger } from "../../src/storage/postgres/ledger.js";
import { PostgresPolicyStore } from "../../src/storage/postgres/policies.js";
import { newAgent, newOrgFixture, type OrgFixture, type TestAgent } from "../support/agents.js";
import { draftDecision } from "../support/decisions.js";
import { sharedDatabaseUrl, startService, type TestService } from "../support/service.js";

/*
 * The Ledger contract (src/storage/ledger.ts) against real Postgres, through the interface
 * alone: all or nothing per item, preconditions checked at commit, refusals as results that
 * write nothing, one item never failing another, and every organization's chain gapless and
 * linked however replicas interleave. Organizations and agents come from a running service;
 * the ledgers under test are two more "replicas" on the same database, each with its own
 * memory of the chain heads, so they keep contradicting each other's guesses.
 */

let svc: TestService;
let db: Database;
let log: EvidenceLog;
let replicas: [Ledger, Ledger];
let decisions: PostgresDecisionStore;
let capabilities: PostgresCapabilityStore;
let evidence: PostgresEvidenceStore;
let policies: PostgresPolicyStore;

beforeAll(async () => {
  svc = await startService();
  db = createDatabase(sharedDatabaseUrl(), 8);
  evidence = new PostgresEvidenceStore(db);
  log = await EvidenceLog.open(evidence);
  const replica = () => new PostgresLedger(db, new EvidenceChain(db, () => log.keys));
  replicas = [replica(), replica()];
  const chain = new EvidenceChain(db, () => log.keys);
  decisions = new PostgresDecisionStore(db, chain);
  capabilities = new PostgresCapabilityStore(db);
  policies = new PostgresPolicyStore(db, chain);
});

afterAll(async () => {
  await db?.close();
  await svc?.close();
});

/** A decision of `agent` evaluated on its organization's current policy head (ALLOW `reference_noop`). */
async function draft(agent: TestAgent, fields: Partial<NewDecision> = {}): Promise<DecisionToRecord> {
  const decision = await draftDecision(policies, agent, fields);
  const suspended = { ...decision, outcome: "HUMAN_REVIEW" as const, reason: "agent_suspended", status: "PENDING" as const, policy_versions: {}, graph_version: 0, bundle_digest: "" };
  return {
    decision,
    payload: { decision_id: decision.decision_id, outcome: decision.outcome, reason: decision.reason },
    certificateId: agent.certificateId,
    ifSuspended: () => ({ decision: suspended, payload: { decision_id: decision.decision_id, outcome: "HUMAN_REVIEW", reason: "agent_suspended" } }),
  };
}

/** Every evidence record of the organization, in chain order. */
async function chainOf(organizationId: string): Promise<EvidenceRecord[]> {
  const records: EvidenceRecord[] = [];
  for (let after = 0; ; ) {
    const page = await evidence.page(organizationId, after, 500);
    records.push(...page.records);
    if (!page.hasMore) return records;
    after = page.records[page.records.length - 1]!.seq;
  }
}

/** The chain verifies offline with the published keys: well formed, signed, gapless and linked from seq 1. */
async function expectIntactChain(organizationId: string): Promise<EvidenceRecord[]> {
  const records = await chainOf(organizationId);
  const verification = verifyEvidenceExport({ records, jwks: (await log.jwks()) as never }, { organizationId });
  // The chain itself: an export's signed head (absent here) is the export's business, not the ledger's.
  expect(verification.problems.filter((p) => p.problem !== ("head_missing" as string))).toEqual([]);
  expect(records.map((r) => r.seq)).toEqual(records.map((_, i) => i + 1));
  return records;
}

describe("Ledger (Postgres): decisions", () => {
  let orgs: OrgFixture[];
  let agents: TestAgent[];

  beforeAll(async () => {
    orgs = await Promise.all([1, 2, 3].map(() => newOrgFixture(svc)));
    agents = await Promise.all(orgs.map((org) => newAgent(svc, org)));
  });

  it("records concurrent decisions of several organizations from two replicas, each with its evidence, every chain gapless and linked", async () => {
    const before = await Promise.all(orgs.map((o) => chainOf(o.organizationId).then((c) => c.length)));
    const items = await Promise.all(Array.from({ length: 120 }, (_, i) => draft(agents[i % 3]!)));
    // Interleaved across the two replicas: each one's remembered heads are wrong half the time.
    const results = await Promise.all(items.map((item, i) => replicas[Math.floor(i / 3) % 2]!.recordDecision(item)));
    expect(results.every((r) => "recorded" in r && r.recorded === "decision")).toBe(true);
    for (const [i, item] of items.entries()) {
      const stored = await decisions.get(item.decision.organization_id, item.decision.decision_id);
      const evidenceId = (results[i] as { evidenceId: string }).evidenceId;
      expect(stored).toMatchObject({ decision_id: item.decision.decision_id, outcome: "ALLOW", evidence_id: evidenceId });
      const record = await evidence.get(item.decision.organization_id, evidenceId);
      expect(record).toMatchObject({ kind: "decision", subject_id: item.decision.decision_id, payload: item.payload });
    }
    for (const [k, org] of orgs.entries()) {
      const chain = await expectIntactChain(org.organizationId);
      expect(chain.length - before[k]!).toBe(40);
    }
  });

  it("never changes what the caller handed it", async () => {
    const item = await draft(agents[0]!);
    const snapshot = () => JSON.stringify({ decision: item.decision, payload: item.payload });
    const before = snapshot();
    const result = await replicas[0].recordDecision(item);
    expect(result).toMatchObject({ recorded: "decision" });
    expect(snapshot()).toBe(before);
    expect(item.decision).not.toHaveProperty("evidence_id");
  });

  it("refuses a nonce already taken as nonce_taken, writes nothing for it, and fails no neighbour", async () => {
    const first = await draft(agents[1]!);
    const twin = await draft(agents[1]!, { nonce: first.decision.nonce });
    const neighbours = await Promise.all([draft(agents[1]!), draft(agents[2]!)]);
    const before = (await chainOf(orgs[1]!.organizationId)).length;
    const results = await Promise.all([first, twin, ...neighbours].map((item, i) => replicas[i % 2]!.recordDecision(item)));
    const taken = results.filter((r) => "refused" in r);
    expect(taken).toEqual([{ refused: "nonce_taken" }]);
    expect(results.filter((r) => "recorded" in r)).toHaveLength(3);
    const loser = "refused" in results[0]! ? first : twin;
    expect(await decisions.get(orgs[1]!.organizationId, loser.decision.decision_id)).toBeNull();
    // The winner and one neighbour: two records, not three.
    expect((await expectIntactChain(orgs[1]!.organizationId)).length - before).toBe(2);
  });

  it("refuses a decision evaluated on a policy head that is not current (stale_context) and writes nothing", async () => {
    const before = (await chainOf(orgs[2]!.organizationId)).length;
    const stale = await draft(agents[2]!, { bundle_digest: "sha256:not-the-current-bundle" });
    const fresh = await draft(agents[2]!);
    const [a, b] = await Promise.all([replicas[0].recordDecision(stale), replicas[0].recordDecision(fresh)]);
    expect(a).toEqual({ refused: "stale_context" });
    expect(b).toMatchObject({ recorded: "decision" });
    expect(await decisions.get(orgs[2]!.organizationId, stale.decision.decision_id)).toBeNull();
    expect((await expectIntactChain(orgs[2]!.organizationId)).length - before).toBe(1);
  });

  it("refuses a signer no longer allowed to sign with its states now", async () => {
    const org = await newOrgFixture(svc);
    const revoked = await newAgent(svc, org, "active");
    const item = await draft(revoked);
    const r = await svc.v1("POST", `/v1/agents/${revoked.agentId}/revoke`, { bearer: org.apiKey, body: {} });
    expect(r.status).toBe(200);
    expect(await replicas[1].recordDecision(item)).toEqual({ refused: "signer_inactive", certState: "revoked", agentState: "revoked" });
    expect(await decisions.get(org.organizationId, item.decision.decision_id)).toBeNull();
  });

  it("never records a decision whose agent or organization is not its certificate's (unknown or another), and fails no neighbour", async () => {
    // The decision rows have no foreign keys (migration 016): the statements check what they checked, and more.
    const before = await Promise.all(orgs.map((o) => chainOf(o.organizationId).then((c) => c.length)));
    const wrong = await Promise.all([
      draft(agents[0]!, { agent_id: newId("agt") }),
      draft(agents[0]!, { agent_id: agents[1]!.agentId }),
      draft(agents[0]!, { organization_id: newId("org") }),
      draft(agents[0]!, { organization_id: orgs[1]!.organizationId }),
    ]);
    const neighbour = await draft(agents[0]!);
    const results = await Promise.allSettled([...wrong, neighbour].map((item, i) => replicas[i % 2]!.recordDecision(item)));
    for (const r of results.slice(0, 4)) expect(r).toMatchObject({ status: "rejected", reason: { message: expect.stringMatching(/names agent .* but its certificate is/) } });
    expect(results[4]).toMatchObject({ status: "fulfilled", value: { recorded: "decision" } });
    for (const item of wrong) expect(await decisions.get(item.decision.organization_id, item.decision.decision_id)).toBeNull();
    const after = await Promise.all(orgs.map((o) => expectIntactChain(o.organizationId).then((c) => c.length)));
    expect(after.map((n, k) => n - before[k]!)).toEqual([1, 0, 0]);
  });

  it("refuses a decision of an organization suspended before it commits (organization_suspended), on the checked and the locking path, writing nothing and failing no neighbour", async () => {
    const org = await newOrgFixture(svc);
    const [agent, held] = await Promise.all([newAgent(svc, org, "active"), newAgent(svc, org, "suspended")]);
    // An evaluated decision (the checked path), and one already made for a suspended agent (the locking path from the start).
    const evaluated = await draft(agent);
    const forHeld = await draft(held);
    const review: DecisionToRecord = { ...forHeld, ...forHeld.ifSuspended!(), ifSuspended: null };
    const neighbour = await draft(agents[0]!);
    const operator = { "x-service-operator-key": svc.operatorKey! };
    expect((await svc.v1("POST", `/v1/organizations/${org.organizationId}/suspend`, { headers: operator, body: {} })).status).toBe(200);
    const before = await chainOf(org.organizationId);
    const results = await Promise.all([replicas[0].recordDecision(evaluated), replicas[1].recordDecision(review), replicas[0].recordDecision(neighbour)]);
    expect(results.slice(0, 2)).toEqual([{ refused: "organization_suspended" }, { refused: "organization_suspended" }]);
    expect(results[2]).toMatchObject({ recorded: "decision" });
    for (const item of [evaluated, review]) expect(await decisions.get(org.organizationId, item.decision.decision_id)).toBeNull();
    expect(await expectIntactChain(org.organizationId)).toEqual(before);
    expect(before[before.length - 1]).toMatchObject({ kind: "organization.suspended" });

    expect((await svc.v1("POST", `/v1/organizations/${org.organizationId}/reactivate`, { headers: operator, body: {} })).status).toBe(200);
    expect(await replicas[1].recordDecision(await draft(agent))).toMatchObject({ recorded: "decision" });
  });

  it("records what the caller gives for a signer found suspended at commit, asking for it only then", async () => {
    const org = await newOrgFixture(svc);
    const agent = await newAgent(svc, org, "active");
    const item = await draft(agent);
    let asked = 0;
    const ifSuspended = item.ifSuspended!;
    const r = await svc.v1("POST", `/v1/agents/${agent.agentId}/suspend`, { bearer: org.apiKey, body: {} });
    expect(r.status).toBe(200);
    const result = await replicas[0].recordDecision({ ...item, ifSuspended: () => (asked++, ifSuspended()) });
    expect(result).toMatchObject({ recorded: "ifSuspended" });
    expect(asked).toBe(1);
    const stored = await decisions.get(org.organizationId, item.decision.decision_id);
    expect(stored).toMatchObject({ outcome: "HUMAN_REVIEW", reason: "agent_suspended", status: "PENDING", bundle_digest: "" });
    const record = await evidence.get(org.organizationId, (result as { evidenceId: string }).evidenceId);
    expect(record?.payload).toMatchObject({ outcome: "HUMAN_REVIEW", reason: "agent_suspended" });

    // An active agent's decision never asks for its alternative.
    const active = await newAgent(svc, org, "active");
    const other = await draft(active);
    let otherAsked = 0;
    const otherIf = other.ifSuspended!;
    expect(await replicas[1].recordDecision({ ...other, ifSuspended: () => (otherAsked++, otherIf()) })).toMatchObject({ recorded: "decision" });
    expect(otherAsked).toBe(0);
  });
});

describe("Ledger (Postgres): capabilities", () => {
  let org: OrgFixture;
  let agent: TestAgent;

  beforeAll(async () => {
    org = await newOrgFixture(svc);
    agent = await newAgent(svc, org);
  });

  /** A recorded ALLOW decision and a capability for it (not yet issued). */
  async function capabilityFor(expiresInMs = 600_000): Promise<NewCapability> {
    const item = await draft(agent);
    expect(await replicas[0].recordDecision(item)).toMatchObject({ recorded: "decision" });
    const issuedAt = new Date(Math.floor(Date.now() / 1000) * 1000);
    return {
      capability_id: newId("cap"),
      organization_id: org.organizationId,
      decision_id: item.decision.decision_id,
      agent_id: agent.agentId,
      integration_id: null,
      audience: "erp-gateway",
      issued_by: "ledger-test",
      action: "reference_noop",
      resource: "",
      constraints: {},
      issued_at: issuedAt,
      expires_at: new Date(Date.now() + expiresInMs),
      token_digest: null,
    };
  }

  it("issues a decision's capability once: a second one for the same decision, even concurrent, is already_issued and writes nothing", async () => {
    const cap = await capabilityFor();
    const again = { ...cap, capability_id: newId("cap") };
    const handed = structuredClone([cap, again]);
    const before = (await chainOf(org.organizationId)).length;
    const results = await Promise.all([replicas[0].issueCapability(cap, { capability_id: cap.capability_id }), replicas[1].issueCapability(again, { capability_id: again.capability_id })]);
    // Results come back as values: neither capability handed over was changed, issued or refused.
    expect([cap, again]).toEqual(handed);
    expect(results.filter((r) => "issued" in r)).toHaveLength(1);
    expect(results.filter((r) => "refused" in r)).toEqual([{ refused: "already_issued" }]);
    const stored = await capabilities.byDecision(org.organizationId, cap.decision_id);
    expect([cap.capability_id, again.capability_id]).toContain(stored?.capability_id);
    const chain = await expectIntactChain(org.organizationId);
    expect(chain.length - before).toBe(1);
    expect(chain[chain.length - 1]).toMatchObject({ kind: "capability.issued", subject_id: stored!.capability_id });
  });

  it("consumes a capability exactly once among concurrent consumes on both replicas, with one consumed record", async () => {
    const cap = await capabilityFor();
    expect(await replicas[0].issueCapability(cap, {})).toMatchObject({ issued: true });
    const row: CapabilityRow = { ...cap, consumed_at: null, consumed_by: null };
    const handed = structuredClone(row);
    const before = (await chainOf(org.organizationId)).length;
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => replicas[i % 2]!.consumeCapability(row, `gateway-${i}`)));
    // The consumed row is a new value; the one every caller handed over still reads unconsumed.
    expect(row).toEqual(handed);
    const consumed = results.filter((r) => "consumed" in r);
    expect(consumed).toHaveLength(1);
    expect(results.filter((r) => "refused" in r).every((r) => (r as { refused: string }).refused === "consumed")).toBe(true);
    const winner = (consumed[0] as { consumed: CapabilityRow }).consumed;
    expect(await capabilities.get(org.organizationId, cap.capability_id)).toMatchObject({ consumed_by: winner.consumed_by });
    const chain = await expectIntactChain(org.organizationId);
    expect(chain.length - before).toBe(1);
    expect(chain[chain.length - 1]).toMatchObject({ kind: "capability.consumed", subject_id: cap.capability_id, payload: { by: winner.consumed_by } });
  });

  it("refuses an expired capability (expired) and one whose agent is no longer active (dependency_inactive), writing nothing", async () => {
    const expired = await capabilityFor(-1_000);
    expect(await replicas[1].issueCapability(expired, {})).toMatchObject({ issued: true });
    const other = await newAgent(svc, org);
    const item = await draft(other);
    expect(await replicas[0].recordDecision(item)).toMatchObject({ recorded: "decision" });
    const dependent: NewCapability = { ...(await capabilityFor()), decision_id: item.decision.decision_id, agent_id: other.agentId, capability_id: newId("cap") };
    expect(await replicas[0].issueCapability(dependent, {})).toMatchObject({ issued: true });
    expect((await svc.v1("POST", `/v1/agents/${other.agentId}/suspend`, { bearer: org.apiKey, body: {} })).status).toBe(200);
    const before = (await chainOf(org.organizationId)).length;
    const [a, b] = await Promise.all([
      replicas[0].consumeCapability({ ...expired, consumed_at: null, consumed_by: null }, "gateway"),
      replicas[1].consumeCapability({ ...dependent, consumed_at: null, consumed_by: null }, "gateway"),
    ]);
    expect(a).toEqual({ refused: "expired" });
    expect(b).toEqual({ refused: "dependency_inactive" });
    expect((await chainOf(org.organizationId)).length).toBe(before);
    expect(await capabilities.get(org.organizationId, expired.capability_id)).toMatchObject({ consumed_at: null });
  });
});
