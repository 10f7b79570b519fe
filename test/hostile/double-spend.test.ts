import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exportEvidence, newAgent, newOrgFixture, TRANSPORTS, type OrgFixture, type TestAgent } from "../support/agents.js";
import { sharedRedisUrl, startService, type TestService } from "../support/service.js";
import { allowedCapability, verify } from "../e2e/capabilities-support.js";
import { recordRow, scaled } from "./report.js";

/*
 * Hostile row 3, concurrent double spends across two replicas. Two services in
 * this process on one database (and one Redis on the Redis path); M tokens,
 * each presented K times at once, the verifies split across both replicas and
 * both transports. A failure: a token consumed more than once (more than one
 * 200, or more than one `capability.consumed` evidence record), or never (no
 * winner). Full scale: 40 tokens × 100 verifies on each consume path; short:
 * 5 × 20.
 */

const TOKENS = scaled(5, 40);
const CONCURRENT = scaled(20, 100);

describe.each([
  { name: "Redis + Postgres", redis: true, order: 3.1 },
  { name: "Postgres only", redis: false, order: 3.2 },
])("hostile: double spends across two replicas, $name", ({ name, redis, order }) => {
  let one: TestService;
  let two: TestService;
  let org: OrgFixture;
  let agent: TestAgent;

  beforeAll(async () => {
    const env = { REDIS_URL: redis ? sharedRedisUrl() : undefined };
    [one, two] = await Promise.all([startService(env), startService(env)]);
    org = await newOrgFixture(one);
    agent = await newAgent(one, org);
  });
  afterAll(async () => {
    await Promise.all([one?.close(), two?.close()]);
  });

  it(`${TOKENS} tokens × ${CONCURRENT} concurrent verifies over two replicas: each consumed exactly once`, async () => {
    const caps = [];
    for (let i = 0; i < TOKENS; i++) caps.push(await allowedCapability(i % 2 ? two : one, agent));
    const failures: string[] = [];
    const refusals: Record<string, number> = {};
    for (const c of caps) {
      const results = await Promise.all(
        Array.from({ length: CONCURRENT }, (_, i) => verify(i % 2 ? two : one, TRANSPORTS[(i >> 1) % 2]!, org.apiKey, c.presentation)),
      );
      const wins = results.filter((r) => r.status === 200).length;
      for (const r of results) if (r.status !== 200) refusals[`${r.status} ${r.detail}`] = (refusals[`${r.status} ${r.detail}`] ?? 0) + 1;
      if (wins !== 1) failures.push(`${c.capabilityId}: ${wins} successful verifies`);
    }
    const { records } = await exportEvidence(one, org.apiKey);
    const consumed: Record<string, number> = {};
    for (const r of records) if (r.kind === "capability.consumed") consumed[r.subject_id] = (consumed[r.subject_id] ?? 0) + 1;
    for (const c of caps) if (consumed[c.capabilityId] !== 1) failures.push(`${c.capabilityId}: ${consumed[c.capabilityId] ?? 0} capability.consumed records`);
    recordRow({
      order,
      attack: `double spends, two replicas (${name}): ${TOKENS} tokens × ${CONCURRENT} concurrent verifies`,
      probes: TOKENS,
      failures: failures.length,
      note: `failure = a token consumed ≠ 1 time; refusals: ${Object.entries(refusals).map(([k, n]) => `${n}× ${k}`).join(", ")}`,
    });
    expect(failures).toEqual([]);
  }, 300_000);
});
