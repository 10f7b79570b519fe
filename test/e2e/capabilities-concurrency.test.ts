import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exportEvidence, newAgent, newOrgFixture, TRANSPORTS, type OrgFixture, type TestAgent } from "../support/agents.js";
import { spawnService, type ServiceProcess } from "../support/process.js";
import { sharedDatabaseUrl, sharedRedisUrl, startService, type TestService } from "../support/service.js";
import { allowedCapability, capabilityState, instanceAt, verify, type Instance } from "./capabilities-support.js";

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
});
