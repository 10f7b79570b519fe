import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  decisionCount,
  evidenceCount,
  expectResult,
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
import { recordRow } from "../hostile/report.js";
import { startService, type TestService } from "../support/service.js";

/*
 * Issue 19 item 5: one tenant's slow policy. docs/architecture.md, Policies (the time limit and
 * isolation) and The Intent path, step 9: an evaluation past the time limit (default 50 ms) is
 * 503 `evaluation_unavailable` naming the policy, with no decision and no evidence; the bundle is
 * quarantined to a worker thread, so another organization's Intents keep being answered.
 */

// A hand-written policy whose evaluation takes far longer than the limit (about a second
// in-process on the test machine): a comprehension over a million numbers.
const SLOW_REGO = [
  "package mandate.policies.busy_loop",
  "",
  'actions := {"slow_action"}',
  "",
  'results contains {"outcome": "ALLOW", "reason": "counted", "rule": "count"} if {',
  "  count({n | some n in numbers.range(1, 1000000); n % 7 == 0}) > 0",
  "}",
  "",
].join("\n");

// Hand-written Rego that is fast unless the Intent asks otherwise: the attack a probe on the
// first evaluation cannot catch.
const SOMETIMES_SLOW_REGO = [
  "package mandate.policies.sometimes_slow",
  "",
  'actions := {"sometimes_slow"}',
  "",
  'results contains {"outcome": "ALLOW", "reason": "fast_path", "rule": "fast"} if {',
  "  not input.intent.context.slow",
  "}",
  "",
  'results contains {"outcome": "ALLOW", "reason": "counted", "rule": "count"} if {',
  "  input.intent.context.slow",
  "  count({n | some n in numbers.range(1, 1000000); n % 7 == 0}) > 0",
  "}",
  "",
].join("\n");

let svc: TestService;
const logs: Record<string, unknown>[] = [];
let slowOrg: OrgFixture;
let quietOrg: OrgFixture;
let slowAgent: TestAgent;
let quietAgent: TestAgent;

async function publishRego(o: OrgFixture, key: string, rego: string): Promise<void> {
  const approver = await newApiKey(svc, o.apiKey, ["POLICY_APPROVER"], "approver");
  const steps: [string, string, unknown, string][] = [
    ["POST", "/v1/policies", { policy_key: key, description: "Hand-written.", source: { rego } }, o.apiKey],
    ["POST", `/v1/policies/${key}/versions/1/submit`, {}, o.apiKey],
    ["POST", `/v1/policies/${key}/versions/1/approve`, {}, approver.apiKey],
    ["POST", `/v1/policies/${key}/versions/1/publish`, {}, approver.apiKey],
  ];
  for (const [method, path, body, bearer] of steps) {
    const res = await svc.v1(method, path, { bearer, body });
    if (res.status !== 200) throw new Error(`${method} ${path} failed: ${res.status} ${JSON.stringify(res.body)}`);
  }
}

function expectTimeLimit(res: Result): void {
  expectResult(res, 503, "evaluation_unavailable");
  // Named: the bundle's policies (the evaluation did not finish, so there is no trace to narrow them by).
  expect(res.body.message, JSON.stringify(res.body)).toMatch(/busy_loop \(version 1\)/);
  expect(res.body.message).toMatch(/within the 50 ms time limit/);
  expect(res.body.decision_id).toBeUndefined();
}

function expectAllowed(res: Result): void {
  expect(res.status, `${res.transport}: ${JSON.stringify(res.body)}`).toBe(200);
  expect(res.body.outcome).toBe("ALLOW");
  expect(res.body.reason).toBe("starter_reference_action");
}

async function isolatedEvaluations(): Promise<number> {
  const metrics = await (await fetch(`${svc.baseUrl}/metrics`)).text();
  return Number(/^mandate_policy_isolated_evaluations_total (\d+)$/m.exec(metrics)?.[1]);
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

beforeAll(async () => {
  svc = await startService({}, { logs });
  [slowOrg, quietOrg] = await Promise.all([newOrgFixture(svc), newOrgFixture(svc)]);
  await publishRego(slowOrg, "busy_loop", SLOW_REGO);
  [slowAgent, quietAgent] = await Promise.all([newAgent(svc, slowOrg), newAgent(svc, quietOrg)]);
});

afterAll(async () => {
  await svc?.close();
});

describe.each(TRANSPORTS)("a policy past the evaluation time limit over %s", (transport: Transport) => {
  it("answers 503 evaluation_unavailable naming the policy, and records no decision and no evidence", async () => {
    const evidenceBefore = await evidenceCount(svc, slowOrg.apiKey);
    for (let i = 0; i < 3; i++) {
      const started = performance.now();
      const res = await submitIntent(svc, transport, signBody(slowAgent, intentDoc(slowAgent.agentId, { action: "slow_action" })));
      expectTimeLimit(res);
      console.log(`${transport}: a slow Intent answered 503 in ${Math.round(performance.now() - started)} ms`);
    }
    expect(await decisionCount(svc, slowOrg.apiKey, slowAgent.agentId)).toBe(0);
    expect(await evidenceCount(svc, slowOrg.apiKey)).toBe(evidenceBefore);
  });
});

describe("the quarantine", () => {
  it("is logged once and shown in /metrics", async () => {
    await submitIntent(svc, "v1", signBody(slowAgent, intentDoc(slowAgent.agentId, { action: "slow_action" })));
    const lines = logs.filter((l) => l.msg === "policy bundle quarantined: its evaluations run in a worker thread from now on");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 40, policy_bundle: { reason: "timeout", limitMs: 50 } });
    const metrics = await (await fetch(`${svc.baseUrl}/metrics`)).text();
    expect(metrics).toMatch(/^mandate_policy_bundles_quarantined 1$/m);
    expect(Number(/^mandate_policy_evaluation_timeouts_total (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(1);
    expect(Number(/^mandate_policy_workers_terminated_total (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(1);
  });
});

describe("a hand-written policy fast on its first inputs and slow on a later one", () => {
  it("is stopped at the limit in a worker: its slow input never runs on the event loop", async () => {
    const org = await newOrgFixture(svc);
    await publishRego(org, "sometimes_slow", SOMETIMES_SLOW_REGO);
    const agent = await newAgent(svc, org);
    const isolatedBefore = await isolatedEvaluations();
    for (let i = 0; i < 5; i++) {
      const res = await submitIntent(svc, "v1", signBody(agent, intentDoc(agent.agentId, { action: "sometimes_slow" })));
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.reason).toBe("fast_path");
    }
    const res = await submitIntent(svc, "v1", signBody(agent, intentDoc(agent.agentId, { action: "sometimes_slow", context: { slow: true } })));
    expectResult(res, 503, "evaluation_unavailable");
    expect(res.body.message).toMatch(/sometimes_slow \(version 1\)/);
    expect(res.body.message).toMatch(/within the 50 ms time limit/);
    // All six ran in a worker: none was judged fast enough for the event loop.
    expect((await isolatedEvaluations()) - isolatedBefore).toBe(6);
  });
});

describe("isolation", () => {
  // Timing is printed, not asserted: the machine is shared and tests do not race its load.
  it("keeps answering another organization's Intents while one organization keeps submitting to its slow policy", async () => {
    // Quiet and attacked blocks alternate, so that a drift in the shared machine's load falls on
    // both sides; p99 is read over all blocks of each side.
    const rounds = 100;
    const blocks = process.env.HOSTILE_SCALE === "full" ? 6 : 3;
    // Answers are kept and checked after the run, so that the hostile row is recorded before asserting.
    const quietAnswers: Result[] = [];
    const quietRun = async (): Promise<number[]> => {
      const latencies: number[] = [];
      for (let i = 0; i < rounds; i++) {
        const started = performance.now();
        quietAnswers.push(await submitIntent(svc, "v1", signBody(quietAgent, intentDoc(quietAgent.agentId))));
        latencies.push(performance.now() - started);
      }
      return latencies;
    };
    const attackAnswers: Result[] = [];
    const attackedRun = async (): Promise<number[]> => {
      let attacking = true;
      const attack = (async () => {
        while (attacking) {
          attackAnswers.push(await submitIntent(svc, "v1", signBody(slowAgent, intentDoc(slowAgent.agentId, { action: "slow_action" }))));
        }
      })();
      const latencies = await quietRun().finally(() => {
        attacking = false;
      });
      await attack;
      return latencies;
    };
    await quietRun(); // warm-up
    const quiet: number[] = [];
    const underAttack: number[] = [];
    for (let b = 0; b < blocks; b++) {
      quiet.push(...(await quietRun()));
      underAttack.push(...(await attackedRun()));
    }

    const [q, a] = [percentile(quiet, 99), percentile(underAttack, 99)];
    console.log(
      `other organization's Intent latency, quiet: p50 ${percentile(quiet, 50).toFixed(1)} ms, p99 ${q.toFixed(1)} ms; ` +
        `while ${attackAnswers.length} slow Intents were answered: p50 ${percentile(underAttack, 50).toFixed(1)} ms, p99 ${a.toFixed(1)} ms (${(a / q).toFixed(2)}×)`,
    );
    // The hostile suite's row (test/hostile/report.ts; only written under `npm run test:hostile`).
    const wrong = quietAnswers.filter((r) => r.status !== 200 || r.body.outcome !== "ALLOW" || r.body.reason !== "starter_reference_action");
    recordRow({
      order: 9,
      attack: "noisy tenant: one organization's policy past the time limit, another's Intents",
      probes: quietAnswers.length,
      failures: wrong.length,
      note: `other tenant's p99 ${q.toFixed(1)} ms quiet, ${a.toFixed(1)} ms under attack: ${(a / q).toFixed(2)}× (target ≤ 2×, not asserted); ${attackAnswers.length} slow Intents answered 503`,
    });
    for (const res of quietAnswers) expectAllowed(res);
    expect(attackAnswers.length).toBeGreaterThan(0);
    for (const res of attackAnswers) expectTimeLimit(res);
    expect(await decisionCount(svc, slowOrg.apiKey, slowAgent.agentId)).toBe(0);
  }, 180_000);
});
