import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EvidenceLog } from "../../src/domain/evidence-log.js";
import { newId } from "../../src/domain/ids.js";
import type { DecisionQuery, DecisionRow, DecisionStore, NewDecision, ReviewChange, ReviewEntry } from "../../src/storage/decisions.js";
import { NotFoundError } from "../../src/storage/errors.js";
import type { EvidenceStore } from "../../src/storage/evidence.js";
import type { ExecutionStore } from "../../src/storage/execution.js";
import type { Ledger } from "../../src/storage/ledger.js";
import { createDatabase, type Database } from "../../src/storage/postgres/database.js";
import { PostgresDecisionStore } from "../../src/storage/postgres/decisions.js";
import { EvidenceChain } from "../../src/storage/postgres/evidence-chain.js";
import { PostgresEvidenceStore } from "../../src/storage/postgres/evidence.js";
import { PostgresExecutionStore } from "../../src/storage/postgres/execution.js";
import { PostgresLedger } from "../../src/storage/postgres/ledger.js";
import { PostgresPolicyStore } from "../../src/storage/postgres/policies.js";
import { newAgent, newAgentKey, newApiKey, newOrgFixture, type OrgFixture, type TestAgent } from "../support/agents.js";
import { draftDecision } from "../support/decisions.js";
import { createTestDatabase, startService, type TestService } from "../support/service.js";

/*
 * The DecisionStore contract (src/storage/decisions.ts) on real Postgres: reads scoped to their
 * organization (get with the latest reconciliation, getMany one entry per key in order without
 * one, byNonce per agent), the review queue newest first with its filters and a strict keyset
 * position, the Intent path's contexts one per lookup in order, and review steps that are atomic (a refused
 * step writes nothing), serialised on the decision (concurrent steps each see the one before),
 * appended to the evidence chain with the change, and NotFoundError outside the organization.
 * Decisions are recorded through the Ledger; organizations, agents and an integration come from a
 * service on this suite's own database.
 * recordedEvaluations has its suite in recorded-evaluations.test.ts.
 */

let svc: TestService;
let db: Database;
let store: DecisionStore;
let ledger: Ledger;
let evidence: EvidenceStore;
let execution: ExecutionStore;
let policies: PostgresPolicyStore;
let orgA: OrgFixture;
let orgB: OrgFixture;
let agentA: TestAgent;
let agentB: TestAgent;

beforeAll(async () => {
  const url = await createTestDatabase("decision_store");
  svc = await startService({ DATABASE_URL: url, MANDATE_MIGRATION_DATABASE_URL: url });
  [orgA, orgB] = await Promise.all([newOrgFixture(svc), newOrgFixture(svc)]);
  [agentA, agentB] = await Promise.all([newAgent(svc, orgA), newAgent(svc, orgB)]);
  db = createDatabase(url, 8);
  evidence = new PostgresEvidenceStore(db);
  const log = await EvidenceLog.open(evidence);
  const chain = new EvidenceChain(db, () => log.keys);
  store = new PostgresDecisionStore(db, chain);
  ledger = new PostgresLedger(db, chain);
  execution = new PostgresExecutionStore(db, chain);
  policies = new PostgresPolicyStore(db, chain);
});

afterAll(async () => {
  await db?.close();
  await svc?.close();
});

/** Records through the Ledger a decision of `agent` on its organization's policy head (ALLOW reference_noop unless `fields` say otherwise). */
async function record(agent: TestAgent, fields: Partial<NewDecision> = {}): Promise<NewDecision> {
  const decision = await draftDecision(policies, agent, fields);
  const result = await ledger.recordDecision({ decision, payload: { decision_id: decision.decision_id }, certificateId: agent.certificateId, ifSuspended: null });
  if (!("recorded" in result)) throw new Error(`the ledger refused: ${JSON.stringify(result)}`);
  return { ...decision, evidence_id: result.evidenceId };
}

const entry = (resolution: ReviewEntry["resolution"], by: string): ReviewEntry => ({ resolution, resolved_by: by, resolved_at: new Date().toISOString(), reason: `by ${by}` });

describe("PostgresDecisionStore: reads", () => {
  it("reads a decision of the organization as recorded, before any review and reconciliation; null for another organization's or an unknown id", async () => {
    const d = await record(agentA, { outcome: "HUMAN_REVIEW", reason: "needs_review", status: "PENDING" });
    expect(await store.get(orgA.organizationId, d.decision_id)).toEqual({ ...d, resolution: null, approvals: [], reconciliation: null });
    expect(await store.get(orgB.organizationId, d.decision_id)).toBeNull();
    expect(await store.get(orgA.organizationId, "dec_unknown")).toBeNull();
  });

  it("reads a decision with its latest reconciliation", async () => {
    const d = await record(agentA);
    const reconcile = (status: "MISMATCHED" | "MATCHED", at: Date) =>
      execution.recordReconciliation(
        { reconciliation_id: newId("rec"), organization_id: orgA.organizationId, decision_id: d.decision_id, status, receipt_id: `rcp-${status}`, reported_by: "adapter-1", reconciled_at: at },
        { organizationId: orgA.organizationId, kind: "reconciliation", subjectId: d.decision_id, payload: { status } },
      );
    const now = Date.now();
    // The later one is recorded first: "latest" is by reconciled_at, not by insertion.
    await reconcile("MATCHED", new Date(now));
    await reconcile("MISMATCHED", new Date(now - 60_000));
    const read = await store.get(orgA.organizationId, d.decision_id);
    expect(read!.reconciliation).toMatchObject({ status: "MATCHED", receipt_id: "rcp-MATCHED", reported_by: "adapter-1" });
    expect(new Date(read!.reconciliation!.reconciled_at).getTime()).toBe(now);
  });

  it("reads many by (organization, id): one entry per key, in order, null when absent or of another organization, without reconciliation", async () => {
    const [a, b] = await Promise.all([record(agentA), record(agentB)]);
    const rows = await store.getMany([
      { organizationId: orgB.organizationId, id: b.decision_id },
      { organizationId: orgA.organizationId, id: a.decision_id },
      { organizationId: orgB.organizationId, id: a.decision_id },
      { organizationId: orgA.organizationId, id: "dec_unknown" },
      { organizationId: orgA.organizationId, id: a.decision_id },
    ]);
    expect(rows.map((r) => r?.decision_id ?? null)).toEqual([b.decision_id, a.decision_id, null, null, a.decision_id]);
    expect(rows[1]).toEqual({ ...a, resolution: null, approvals: [] });
    expect(rows[1]).not.toHaveProperty("reconciliation");
    expect(await store.getMany([])).toEqual([]);
  });

  it("reads the decision an agent got for a nonce, null for another agent or an unused nonce", async () => {
    const d = await record(agentA);
    expect(await store.byNonce(agentA.agentId, d.nonce)).toMatchObject({ decision_id: d.decision_id, nonce: d.nonce });
    expect(await store.byNonce(agentB.agentId, d.nonce)).toBeNull();
    expect(await store.byNonce(agentA.agentId, randomUUID())).toBeNull();
  });

  it("lists the organization's decisions newest first (ties by id), filtered, from a strict keyset position, at most `limit`", async () => {
    const org = await newOrgFixture(svc);
    const [x, y] = await Promise.all([newAgent(svc, org), newAgent(svc, org)]);
    const t = Date.now() - 3_600_000;
    const at = (minutes: number) => new Date(t + minutes * 60_000);
    const made = [
      await record(x, { evaluated_at: at(0) }),
      await record(y, { evaluated_at: at(1), outcome: "DENY", reason: "denied" }),
      await record(x, { evaluated_at: at(1), outcome: "HUMAN_REVIEW", reason: "review", status: "PENDING" }),
      await record(y, { evaluated_at: at(2), outcome: "HUMAN_REVIEW", reason: "review", status: "PENDING" }),
      await record(x, { evaluated_at: at(3) }),
    ];
    const newestFirst = [...made].sort((a, b) => b.evaluated_at.getTime() - a.evaluated_at.getTime() || (a.decision_id < b.decision_id ? 1 : -1)).map((d) => d.decision_id);
    const all: DecisionQuery = { status: null, outcome: null, agentId: null, before: null, limit: 100 };
    const ids = async (q: Partial<DecisionQuery>) => (await store.list(org.organizationId, { ...all, ...q })).map((d) => d.decision_id);
    expect(await ids({})).toEqual(newestFirst);
    expect(await ids({ limit: 2 })).toEqual(newestFirst.slice(0, 2));
    expect(await ids({ outcome: "HUMAN_REVIEW" })).toEqual(newestFirst.filter((id) => made.find((d) => d.decision_id === id)!.outcome === "HUMAN_REVIEW"));
    expect(await ids({ status: "PENDING", agentId: y.agentId })).toEqual([made[3]!.decision_id]);
    expect(await ids({ agentId: x.agentId })).toEqual(newestFirst.filter((id) => made.find((d) => d.decision_id === id)!.agent_id === x.agentId));
    // Paging two at a time from each page's last (evaluated_at, id) walks the list once, the tie included.
    const walked: string[] = [];
    for (let before: { at: Date; id: string } | null = null; ; ) {
      const page = await store.list(org.organizationId, { ...all, before, limit: 2 });
      walked.push(...page.map((d) => d.decision_id));
      if (page.length < 2) break;
      const last = page[page.length - 1]!;
      before = { at: last.evaluated_at, id: last.decision_id };
    }
    expect(walked).toEqual(newestFirst);
    expect(await store.list(orgB.organizationId, { ...all, agentId: x.agentId })).toEqual([]);
  });

  it("reads the Intent path's contexts, one per lookup in order, null for an unknown certificate", async () => {
    const org = await newOrgFixture(svc);
    const [agent, held] = await Promise.all([newAgent(svc, org), newAgent(svc, org, "suspended")]);
    const prior = await record(agent);
    const head = (await policies.head(org.organizationId))!;
    const contexts = await store.intentContexts([
      { certificateId: held.certificateId, nonce: randomUUID(), action: "reference_noop" },
      { certificateId: "crt_unknown", nonce: prior.nonce, action: "reference_noop" },
      { certificateId: agent.certificateId, nonce: prior.nonce, action: "reference_noop" },
      { certificateId: agent.certificateId, nonce: randomUUID(), action: "reference_noop" },
    ]);
    const common = {
      cert_state: "active",
      organization_state: "active",
      ...head,
      integration_id: null,
      contract_version: null,
      resource_path: null,
      context_bindings: null,
      field_types: null,
    };
    expect(contexts).toEqual([
      { ...common, agent_state: "suspended", prior: null },
      null,
      { ...common, agent_state: "active", prior: { ...prior, resolution: null, approvals: [] } },
      { ...common, agent_state: "active", prior: null },
    ]);
    expect(contexts[2]!.prior!.body_sha256).toBeInstanceOf(Buffer);
    expect(await store.intentContexts([])).toEqual([]);
  });

  it("reads the signer's and its organization's live states into the context: a revoked certificate, a suspended organization", async () => {
    const org = await newOrgFixture(svc);
    const [revoked, agent] = await Promise.all([newAgent(svc, org, "revoked"), newAgent(svc, org)]);
    const lookup = (a: TestAgent) => ({ certificateId: a.certificateId, nonce: randomUUID(), action: "reference_noop" });
    expect(await store.intentContexts([lookup(revoked)])).toEqual([expect.objectContaining({ cert_state: "revoked", agent_state: "revoked", organization_state: "active" })]);
    const res = await svc.v1("POST", `/v1/organizations/${org.organizationId}/suspend`, { headers: { "x-service-operator-key": svc.operatorKey! }, body: {} });
    expect(res.status).toBe(200);
    expect(await store.intentContexts([lookup(agent)])).toEqual([expect.objectContaining({ cert_state: "active", agent_state: "active", organization_state: "suspended" })]);
  });

  it("reads the active integration contract covering an Intent's action into its context", async () => {
    const org = await newOrgFixture(svc);
    const agent = await newAgent(svc, org);
    const approver = await newApiKey(svc, org.apiKey, ["POLICY_APPROVER"], "approver");
    const post = async (path: string, body: unknown, bearer = org.apiKey) => {
      const res = await svc.v1("POST", path, { bearer, body });
      expect(res.status, `${path}: ${JSON.stringify(res.body)}`).toBe(200);
      return res.body;
    };
    const integrationId = (await post("/v1/integrations", { name: "ERP", actions: ["reference_noop"] })).integration_id;
    await post(`/v1/integrations/${integrationId}/contract-versions`, { resource_path: "resource", context_bindings: { po: "context.po" } });
    await post(`/v1/integrations/${integrationId}/contract-versions/1/approve`, {}, approver.apiKey);
    await post(`/v1/integrations/${integrationId}/adapters`, { name: "erp-adapter", public_key: newAgentKey().publicKey });
    const [covered, other] = await store.intentContexts([
      { certificateId: agent.certificateId, nonce: randomUUID(), action: "reference_noop" },
      { certificateId: agent.certificateId, nonce: randomUUID(), action: "something_else" },
    ]);
    expect(covered).toMatchObject({ integration_id: integrationId, contract_version: 1, resource_path: "resource", context_bindings: { po: "context.po" } });
    expect(covered!.field_types).toEqual(expect.any(Object));
    expect(other).toMatchObject({ integration_id: null, contract_version: null, resource_path: null, context_bindings: null, field_types: null });
  });
});

describe("PostgresDecisionStore: review", () => {
  const approve = (by: string, kind = "decision.approved") => (current: DecisionRow): ReviewChange => ({
    status: "PENDING",
    resolution: null,
    approvals: [...current.approvals, entry("approved", by)],
    evidence: { kind, payload: { by, seen: current.approvals.length } },
  });

  it("hands the step the decision as it stands, stores the change and appends its evidence record, and returns the decision as changed", async () => {
    const d = await record(agentA, { outcome: "HUMAN_REVIEW", reason: "review", status: "PENDING" });
    let seen: DecisionRow | undefined;
    const resolution = entry("approved", "reviewer-1");
    const changed = await store.review(orgA.organizationId, d.decision_id, (current) => {
      seen = current;
      return { status: "RESOLVED", resolution, approvals: [resolution], evidence: { kind: "decision.resolved", payload: { resolution: "approved" } } };
    });
    expect(seen).toMatchObject({ decision_id: d.decision_id, status: "PENDING", resolution: null, approvals: [] });
    expect(changed).toMatchObject({ decision_id: d.decision_id, outcome: "HUMAN_REVIEW", status: "RESOLVED", resolution, approvals: [resolution] });
    expect(await store.get(orgA.organizationId, d.decision_id)).toMatchObject({ status: "RESOLVED", resolution, approvals: [resolution] });
    const records = await evidence.bySubject(orgA.organizationId, d.decision_id);
    expect(records.map((r) => [r.kind, r.payload])).toEqual([
      ["decision", { decision_id: d.decision_id }],
      ["decision.resolved", { resolution: "approved" }],
    ]);
  });

  it("writes nothing when the step refuses, and hands its error to the caller", async () => {
    const d = await record(agentA, { outcome: "HUMAN_REVIEW", reason: "review", status: "PENDING" });
    const refusal = new Error("already resolved");
    await expect(store.review(orgA.organizationId, d.decision_id, () => { throw refusal; })).rejects.toBe(refusal);
    expect(await store.get(orgA.organizationId, d.decision_id)).toMatchObject({ status: "PENDING", resolution: null, approvals: [] });
    expect(await evidence.bySubject(orgA.organizationId, d.decision_id)).toHaveLength(1);
  });

  it("throws NotFoundError for an unknown decision or another organization's, without calling the step", async () => {
    const d = await record(agentB, { outcome: "HUMAN_REVIEW", reason: "review", status: "PENDING" });
    let called = false;
    const step = (current: DecisionRow) => ((called = true), approve("x")(current));
    await expect(store.review(orgA.organizationId, d.decision_id, step)).rejects.toBeInstanceOf(NotFoundError);
    await expect(store.review(orgA.organizationId, "dec_unknown", step)).rejects.toBeInstanceOf(NotFoundError);
    expect(called).toBe(false);
    expect(await store.get(orgB.organizationId, d.decision_id)).toMatchObject({ approvals: [] });
  });

  it("serialises concurrent steps on the decision: each sees the change before it, none is lost", async () => {
    const d = await record(agentA, { outcome: "HUMAN_REVIEW", reason: "review", status: "PENDING" });
    // Five transactions on five connections at once; without the lock, two would read the same approvals.
    await Promise.all(["first", "other-0", "other-1", "other-2", "other-3"].map((by) => store.review(orgA.organizationId, d.decision_id, approve(by))));
    const stored = (await store.get(orgA.organizationId, d.decision_id))!;
    expect(stored.approvals.map((a) => a.resolved_by).sort()).toEqual(["first", "other-0", "other-1", "other-2", "other-3"]);
    const records = (await evidence.bySubject(orgA.organizationId, d.decision_id)).slice(1);
    // Every step saw all the approvals before it: 0, 1, 2, 3, 4, in chain order.
    expect(records.map((r) => r.payload.seen)).toEqual([0, 1, 2, 3, 4]);
  });
});
