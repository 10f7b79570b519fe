import { createHash, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EvidenceLog } from "../../src/domain/evidence-log.js";
import { newId } from "../../src/domain/ids.js";
import { recordedInput } from "../../src/domain/policy-trials.js";
import type { NewDecision } from "../../src/storage/decisions.js";
import { createDatabase, type Database } from "../../src/storage/postgres/database.js";
import { PostgresDecisionStore } from "../../src/storage/postgres/decisions.js";
import { EvidenceChain } from "../../src/storage/postgres/evidence-chain.js";
import { PostgresEvidenceStore } from "../../src/storage/postgres/evidence.js";
import { PostgresLedger } from "../../src/storage/postgres/ledger.js";
import { PostgresPolicyStore } from "../../src/storage/postgres/policies.js";
import { newAgent, newOrgFixture, type TestAgent } from "../support/agents.js";
import { sharedDatabaseUrl, startService, type TestService } from "../support/service.js";

/*
 * DecisionStore.recordedEvaluations (src/storage/decisions.ts) against real Postgres, and the
 * input a replay builds from each (recordedInput, domain/policy-trials.ts): the latest evaluated
 * decisions newest first, a suspended agent's left out, the recorded now/agent/principal when
 * the evidence holds them, and for records written before it did, evaluated_at, an active agent
 * and the acting principal as stored.
 */

let svc: TestService;
let db: Database;
let decisions: PostgresDecisionStore;
let ledger: PostgresLedger;
let policies: PostgresPolicyStore;

beforeAll(async () => {
  svc = await startService();
  db = createDatabase(sharedDatabaseUrl(), 4);
  const log = await EvidenceLog.open(new PostgresEvidenceStore(db));
  const chain = new EvidenceChain(db, () => log.keys);
  decisions = new PostgresDecisionStore(db, chain);
  ledger = new PostgresLedger(db, chain);
  policies = new PostgresPolicyStore(db, chain);
});

afterAll(async () => {
  await db?.close();
  await svc?.close();
});

/** Records one decision of `agent` at `at` with the given payload members (beside the decision's own). */
async function record(agent: TestAgent, at: Date, payload: Record<string, unknown>, suspended = false): Promise<string> {
  const head = (await policies.head(agent.org.organizationId))!;
  const nonce = randomUUID();
  const decision: Omit<NewDecision, "evidence_id"> = {
    decision_id: newId("dec"),
    organization_id: agent.org.organizationId,
    agent_id: agent.agentId,
    nonce,
    body_sha256: createHash("sha256").update(nonce).digest(),
    intent: { agent_id: agent.agentId, action: "reference_noop", requested_at: at.toISOString(), nonce },
    action: "reference_noop",
    outcome: suspended ? "HUMAN_REVIEW" : "ALLOW",
    reason: suspended ? "agent_suspended" : "starter_reference_action",
    status: suspended ? "PENDING" : null,
    policy_versions: suspended ? {} : head.policy_versions,
    graph_version: suspended ? 0 : head.graph_version,
    bundle_digest: suspended ? "" : head.bundle_digest,
    integration_id: null,
    contract_version: null,
    evaluated_at: at,
  };
  const result = await ledger.recordDecision({
    decision,
    payload: { decision_id: decision.decision_id, intent: decision.intent, outcome: decision.outcome, reason: decision.reason, ...payload },
    certificateId: agent.certificateId,
    ifSuspended: null,
  });
  expect(result).toMatchObject({ recorded: "decision" });
  return decision.decision_id;
}

describe("DecisionStore.recordedEvaluations (Postgres)", () => {
  it("reads the latest evaluated decisions with their recorded input, and falls back for records that predate it", async () => {
    const org = await newOrgFixture(svc);
    const agent = await newAgent(svc, org);
    const principal = (await svc.v1("GET", `/v1/principals/${org.principalId}`, { bearer: org.apiKey })).body;
    const t = Date.now();
    const old = await record(agent, new Date(t - 3000), {});
    await record(agent, new Date(t - 2000), {}, true);
    const recordedNow = new Date(t - 1500).toISOString();
    const recordedPrincipal = { principal_id: org.principalId, external_ref: principal.external_ref, kind: "person" };
    const fresh = await record(agent, new Date(t - 1000), { now: recordedNow, agent: { agent_id: agent.agentId, state: "active" }, principal: recordedPrincipal });

    const rows = await decisions.recordedEvaluations(org.organizationId, 10);
    // Newest first; the suspended agent's decision (no bundle evaluated it) is not among them.
    expect(rows.map((r) => r.decision_id)).toEqual([fresh, old]);
    expect(rows[0]).toMatchObject({ outcome: "ALLOW", reason: "starter_reference_action", now: recordedNow, agent: { agent_id: agent.agentId, state: "active" }, principal: recordedPrincipal });
    expect(rows[1]).toMatchObject({ now: null, agent: null, principal: null, acting_principal: recordedPrincipal });

    expect(recordedInput(rows[0]!)).toEqual({ intent: rows[0]!.intent, agent: { agent_id: agent.agentId, state: "active" }, principal: recordedPrincipal, now: recordedNow });
    expect(recordedInput(rows[1]!)).toEqual({
      intent: rows[1]!.intent,
      agent: { agent_id: agent.agentId, state: "active" },
      principal: recordedPrincipal,
      now: new Date(t - 3000).toISOString(),
    });
    expect(await decisions.recordedEvaluations(org.organizationId, 1)).toHaveLength(1);
  });
});
