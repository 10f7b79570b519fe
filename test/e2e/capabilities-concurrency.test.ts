import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exportEvidence, newAgent, newOrgFixture, TRANSPORTS, type OrgFixture, type TestAgent } from "../support/agents.js";
import { spawnService, type ServiceProcess } from "../support/process.js";
import { sharedDatabaseUrl, sharedRedisUrl, startService, type TestService } from "../support/service.js";
import { verifyEvidenceExport } from "../../src/evidence/verify.js";
import { allowedCapability, capabilityState, decide, expectConsumed, instanceAt, issue, verify, type Instance } from "./capabilities-support.js";

/*
 * Issue 6 "Done when": 100 concurrent verifies of one token, spread over two
 * service processes sharing Postgres (and Redis on the Redis path), give
 * exactly one 200 and 99 × 409 capability_consumed; 50 tokens in a row. One
 * instance runs in this process, the other is `tsx src/main.ts` spawned as its
 * own process; each instance takes half the verifies, half over /v1 and half
 * over gRPC.
 */

const TOKENS = 50;
const CONCURRENT = 100;

describe.each([
  { name: "Redis + Postgres", redis: true },
  { name: "Postgres only", redis: false },
])("single use across two processes on the $name path", ({ redis }) => {
  let local: TestService;
  let child: ServiceProcess;
  let remote: Instance;
  let org: OrgFixture;
  let agent: TestAgent;

  beforeAll(async () => {
    const redisUrl = redis ? sharedRedisUrl() : undefined;
    [local, child] = await Promise.all([
      startService({ REDIS_URL: redisUrl }),
      spawnService({
        PORT: "0",
        HOST: "127.0.0.1",
        DATABASE_URL: sharedDatabaseUrl(),
        ...(redisUrl && { REDIS_URL: redisUrl }),
        MANDATE_OPERATOR_KEY: `op_${randomBytes(24).toString("base64url")}`,
      }),
    ]);
    remote = instanceAt(child.baseUrl);
    org = await newOrgFixture(local);
    agent = await newAgent(local, org);
  });
  afterAll(async () => {
    await local?.close();
    await child?.stop();
  });

  it(`${CONCURRENT} concurrent verifies of one token → exactly one 200, the rest 409 capability_consumed; ${TOKENS} tokens`, async () => {
    // Issue every token first (alternating instances), so the timed part is only the races.
    const caps = [];
    for (let i = 0; i < TOKENS; i++) caps.push(await allowedCapability(i % 2 ? remote : local, agent));
    const winners = { local: 0, remote: 0, v1: 0, grpc: 0 };
    const started = performance.now();
    for (const c of caps) {
      const results = await Promise.all(
        Array.from({ length: CONCURRENT }, (_, i) => {
          const where = i % 2 ? "remote" : "local";
          const transport = TRANSPORTS[(i >> 1) % 2]!;
          return verify(where === "remote" ? remote : local, transport, org.apiKey, c.presentation).then((r) => ({ ...r, where }));
        }),
      );
      const ok = results.filter((r) => r.status === 200);
      const others = results.filter((r) => r.status !== 200).map((r) => `${r.status} ${r.detail}`);
      expect(ok, `token ${c.capabilityId}: ${ok.length} successes`).toHaveLength(1);
      expect(others).toEqual(Array(CONCURRENT - 1).fill("409 capability_consumed"));
      expect(ok[0]!.body).toEqual({ capability_id: c.capabilityId, decision_id: c.decisionId, resource: c.presentation.resource, constraints: c.presentation.constraints });
      winners[ok[0]!.where as "local" | "remote"]++;
      winners[ok[0]!.transport]++;
    }
    const ms = performance.now() - started;
    console.log(`[capabilities] ${redis ? "redis" : "postgres"}: ${TOKENS}×${CONCURRENT} verifies in ${ms.toFixed(0)} ms; winners ${JSON.stringify(winners)}`);

    // Both processes agree, and Postgres holds exactly one consumption (and one evidence record) per token.
    for (const c of caps.slice(0, 5)) {
      expect(await capabilityState(local, org.apiKey, c.capabilityId)).toBe("consumed");
      expect(await capabilityState(remote, org.apiKey, c.capabilityId)).toBe("consumed");
    }
    const { records } = await exportEvidence(local, org.apiKey);
    const consumed = records.filter((r) => r.kind === "capability.consumed").map((r) => r.subject_id);
    expect(consumed.sort()).toEqual(caps.map((c) => c.capabilityId).sort());
  }, 300_000);

  /*
   * Consumes of every organization commit together, one statement per group. An organization
   * whose share is refused (a replay, a revoked agent) or whose chain the other process moved
   * meanwhile must not hold up, lose or corrupt the others' consumes.
   */
  it("concurrent consumes of several organizations on two processes: refusals stay with their organization, every chain verifies", async () => {
    const orgs = await Promise.all(Array.from({ length: 4 }, () => newOrgFixture(local)));
    const agents = await Promise.all(orgs.map((o) => newAgent(local, o)));
    const fresh = (await Promise.all(agents.flatMap((a, k) => Array.from({ length: 8 }, (_, i) => allowedCapability((i + k) % 2 ? remote : local, a))))).map((c, i) => ({
      ...c,
      org: orgs[Math.floor(i / 8)]!,
    }));
    // Org 1: two tokens already consumed (replays now). Org 2: a second agent revoked after issue.
    const replayed = fresh.filter((c) => c.org === orgs[1]).slice(0, 2);
    for (const c of replayed) expectConsumed(await verify(local, "v1", c.org.apiKey, c.presentation), c);
    const doomed = await newAgent(local, orgs[2]!);
    const blocked = await Promise.all([0, 1, 2].map(() => allowedCapability(remote, doomed)));
    expect((await local.v1("POST", `/v1/agents/${doomed.agentId}/revoke`, { bearer: orgs[2]!.apiKey, body: {} })).status).toBe(200);

    const attempts = [
      ...fresh.filter((c) => !replayed.includes(c)).map((c) => ({ c, apiKey: c.org.apiKey, want: "200" })),
      ...replayed.map((c) => ({ c, apiKey: c.org.apiKey, want: "409 capability_consumed" })),
      ...blocked.map((c) => ({ c, apiKey: orgs[2]!.apiKey, want: "403 capability_dependency_inactive" })),
    ];
    const results = await Promise.all(attempts.map((a, i) => verify(i % 2 ? remote : local, TRANSPORTS[(i >> 1) % 2]!, a.apiKey, a.c.presentation)));
    expect(results.map((r) => (r.status === 200 ? "200" : `${r.status} ${r.detail}`))).toEqual(attempts.map((a) => a.want));
    for (const c of blocked) expect(await capabilityState(local, orgs[2]!.apiKey, c.capabilityId)).toBe("issued");

    for (const [k, o] of orgs.entries()) {
      const exported = await exportEvidence(local, o.apiKey);
      const verdict = verifyEvidenceExport(exported, { organizationId: o.organizationId });
      expect(verdict.problems, `org ${k}`).toEqual([]);
      const consumed = exported.records.filter((r) => r.kind === "capability.consumed").map((r) => r.subject_id);
      expect(consumed.sort(), `org ${k}`).toEqual(fresh.filter((c) => c.org === o).map((c) => c.capabilityId).sort());
    }
  }, 120_000);

  /*
   * Issues of every organization commit together too, one statement per group, and the two
   * processes move each other's chain heads. A decision issued on both at once must get exactly
   * one Capability without holding up, losing or corrupting anyone else's.
   */
  it("concurrent issues of several organizations on two processes, each decision asked twice: one Capability per decision, every chain verifies", async () => {
    const orgs = await Promise.all(Array.from({ length: 3 }, () => newOrgFixture(local)));
    const agents = await Promise.all(orgs.map((o) => newAgent(local, o)));
    const decisions = await Promise.all(agents.flatMap((a) => Array.from({ length: 6 }, () => decide(local, a).then((d) => ({ decisionId: d.decision_id, org: a.org })))));
    // Each decision twice, once on each process, the two far apart in the order sent.
    const attempts = [...decisions.map((d, i) => ({ ...d, at: i % 2 ? remote : local })), ...decisions.map((d, i) => ({ ...d, at: i % 2 ? local : remote }))];
    const results = await Promise.all(attempts.map((a) => issue(a.at, a.org.apiKey, a.decisionId)));
    for (const [i, d] of decisions.entries()) {
      const pair = [results[i]!, results[i + decisions.length]!].map((r) => (r.status === 200 ? "200" : `${r.status} ${r.body.detail}`)).sort();
      expect(pair, d.decisionId).toEqual(["200", "409 capability_already_issued"]);
    }

    for (const [k, o] of orgs.entries()) {
      const exported = await exportEvidence(local, o.apiKey);
      expect(verifyEvidenceExport(exported, { organizationId: o.organizationId }).problems, `org ${k}`).toEqual([]);
      const issued = exported.records.filter((r) => r.kind === "capability.issued").map((r) => (r.payload as { decision_id: string }).decision_id);
      expect(issued.sort(), `org ${k}`).toEqual(decisions.filter((d) => d.org === o).map((d) => d.decisionId).sort());
    }
  }, 120_000);
});
