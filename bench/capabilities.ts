// Capability Authorizations (issue 6): issue+verify pairs per second, and verify-and-consume
// throughput and p50/p99 latency, on both consume paths: REDIS_URL set (Lua script, then the
// Postgres arbiter) against a redis-server this bench starts, and unset (the Postgres statement
// alone). The service runs as its own process; decisions and tokens are prepared first so each
// phase measures one thing. The load generator shares the machine. Prints figures; asserts nothing.
//   npx tsx --expose-gc --v8-pool-size=1 bench/capabilities.ts   (as `npm run bench` runs it)
// Target: ≥ 3,000 consumes/s on the Redis path.
import {
  calibrate,
  closedLoop,
  createAgents,
  describeRun,
  fmt,
  HttpClient,
  isMain,
  machineLine,
  openLoop,
  signIntents,
  spawnMandate,
  postgresCpuSeconds,
  startBenchPostgres,
  startBenchRedis,
  versus,
  type BenchAgent,
  type RunResult,
} from "./support.js";

const ORGS = Number(process.env.BENCH_CAP_ORGS ?? 8);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 64);
const DECISIONS = Number(process.env.BENCH_CAP_DECISIONS ?? 24_000);
const PAIRS = Number(process.env.BENCH_CAP_PAIRS ?? 3_000);
const PHASE_SECONDS = Number(process.env.BENCH_CAP_SECONDS ?? 5);
/** Setup (decisions, then tokens) runs to completion unless it takes longer than this. */
const SETUP_SECONDS = 60;
const RATE = 1_000;
const RATE_RUN = 3_000;
/** A light load, for the latency of one verify when the service is not queueing. */
const LIGHT_RATE = 100;
const LIGHT_RUN = 200;

const FIELDS = { amount: 12.5, currency: "EUR", counterparty: "ACME Corp", resource: "invoice:INV-1" };
const PRESENTED = { audience: "erp-gateway", action: "reference_noop", resource: FIELDS.resource, constraints: { amount: "12.5", currency: "EUR", counterparty: "ACME Corp" } };

/** One path's figures. */
export interface CapabilityPathSummary {
  path: "redis" | "postgres";
  pairs: RunResult;
  verifyMax: RunResult;
  verifyOneOrg: RunResult;
  verifyAtRate: RunResult;
  verifyLight: RunResult;
  replaysRejected: string;
  peakRssMiB: number;
}

interface Prepared {
  agent: BenchAgent;
  decisionId: string;
}

interface Token {
  agent: BenchAgent;
  token: string;
}

async function runPath(pgUrl: string, redisUrl: string | undefined, log: (line: string) => void): Promise<CapabilityPathSummary> {
  const path = redisUrl ? "redis" : "postgres";
  const svc = await spawnMandate(pgUrl, redisUrl);
  const http = new HttpClient(svc.baseUrl, CONCURRENCY * 2);
  try {
    log(`\n  ${redisUrl ? "Redis path (REDIS_URL set: Lua consume, then the Postgres arbiter)" : "Postgres-only path (REDIS_URL unset: one SQL statement)"}, service pid ${svc.pid}`);
    const agents = await createAgents(http, svc.operatorKey, ORGS, 1);

    // ALLOW decisions to issue from (not measured beyond this line).
    const prepared: Prepared[] = [];
    const intents = signIntents(agents, DECISIONS, FIELDS);
    const made = await closedLoop(
      CONCURRENCY,
      DECISIONS,
      async (i) => {
        const s = intents[i]!;
        const res = await http.request("POST", "/v1/intents", s.bytes, { "x-service-key-id": s.keyId, "x-service-signature": s.signature });
        if (res.status !== 200) return `${res.status} ${res.text.slice(0, 200)}`;
        prepared.push({ agent: s.agent, decisionId: (JSON.parse(res.text) as { decision_id: string }).decision_id });
        return true;
      },
      SETUP_SECONDS,
    );
    log(describeRun("(setup) ALLOW decisions to issue from", made));

    const issue = async (p: Prepared): Promise<string> => {
      const res = await http.request("POST", `/v1/decisions/${p.decisionId}/capability-token`, { audience: "erp-gateway", issued_by: "bench", ttl_seconds: 600 }, { authorization: `Bearer ${p.agent.apiKey}` });
      if (res.status !== 200) throw new Error(`issue: ${res.status} ${res.text.slice(0, 200)}`);
      return (JSON.parse(res.text) as { token: string }).token;
    };
    const verify = async (t: Token): Promise<{ status: number; text: string }> =>
      http.request("POST", "/v1/capability-tokens/verify", { token: t.token, ...PRESENTED }, { authorization: `Bearer ${t.agent.apiKey}` });
    const verifyOk = async (t: Token): Promise<true | string> => {
      const res = await verify(t);
      return res.status === 200 ? true : `${res.status} ${res.text.slice(0, 200)}`;
    };

    // Issue + verify pairs, back to back per worker.
    const pairPool = prepared.slice(0, Math.min(PAIRS, Math.floor(prepared.length / 4)));
    const pairs = await closedLoop(CONCURRENCY, pairPool.length, async (i) => verifyOk({ agent: pairPool[i]!.agent, token: await issue(pairPool[i]!) }), PHASE_SECONDS);
    log(describeRun("issue+verify pairs (latency of the pair)", pairs));

    // Tokens for the verify-only phases.
    const tokenPool = prepared.slice(pairPool.length);
    const tokens: Token[] = [];
    const issued = await closedLoop(
      CONCURRENCY,
      tokenPool.length,
      async (i) => {
        tokens.push({ agent: tokenPool[i]!.agent, token: await issue(tokenPool[i]!) });
        return true;
      },
      SETUP_SECONDS,
    );
    log(describeRun("issue only", issued));

    // Verify-and-consume at max concurrency over every org, then over one org, then at a fixed rate.
    const oneOrg = tokens.filter((t) => t.agent.organizationId === agents[0]!.organizationId).slice(0, Math.floor(tokens.length / (ORGS * 2)));
    const rest = tokens.filter((t) => !oneOrg.includes(t));
    const forLight = rest.slice(0, Math.min(LIGHT_RUN, Math.floor(rest.length / 10)));
    const forRate = rest.slice(forLight.length, forLight.length + Math.min(RATE_RUN, Math.floor(rest.length / 3)));
    const forMax = rest.slice(forLight.length + forRate.length);
    const [cpu0, pg0] = [svc.cpuTimes(), postgresCpuSeconds()];
    const verifyMax = await closedLoop(CONCURRENCY, forMax.length, (i) => verifyOk(forMax[i]!), PHASE_SECONDS);
    const [cpu1, pg1] = [svc.cpuTimes(), postgresCpuSeconds()];
    const perConsume = (seconds: number) => fmt((seconds / Math.max(1, verifyMax.ok)) * 1e6);
    log(
      `${describeRun(`verify+consume, max concurrency, ${ORGS} orgs`, verifyMax)}   CPU per consume: service ${perConsume(cpu1.user - cpu0.user + cpu1.system - cpu0.system)} µs, Postgres ${perConsume(pg1 - pg0)} µs`,
    );
    const verifyOneOrg = await closedLoop(CONCURRENCY, oneOrg.length, (i) => verifyOk(oneOrg[i]!), PHASE_SECONDS);
    log(describeRun("verify+consume, max concurrency, one org", verifyOneOrg));
    const verifyAtRate = await openLoop(RATE, forRate.length, (i) => verifyOk(forRate[i]!));
    log(describeRun(`verify+consume, offered ${fmt(RATE)}/s`, verifyAtRate));
    const verifyLight = await openLoop(LIGHT_RATE, forLight.length, (i) => verifyOk(forLight[i]!));
    log(describeRun(`verify+consume, offered ${fmt(LIGHT_RATE)}/s`, verifyLight));

    // Sanity: a sample of consumed tokens replayed must all be refused.
    const sample = forMax.slice(0, Math.min(200, verifyMax.ok));
    const replays = await Promise.all(sample.map(verify));
    const refused = replays.filter((r) => r.status === 409 && r.text.includes("capability_consumed")).length;
    const replaysRejected = `${refused}/${sample.length}`;
    log(`  replays of consumed tokens refused with 409 capability_consumed: ${replaysRejected}`);
    const peakRssMiB = svc.peakRssMiB();
    log(`  service peak RSS (VmHWM): ${fmt(peakRssMiB, 1)} MiB`);
    return { path, pairs, verifyMax, verifyOneOrg, verifyAtRate, verifyLight, replaysRejected, peakRssMiB };
  } finally {
    http.close();
    await svc.stop();
  }
}

export async function runCapabilitiesBench(log: (line: string) => void = console.log): Promise<CapabilityPathSummary[]> {
  log(`\nCapability Authorizations: issue, verify and consume (${machineLine()}; yardstick: ${fmt(await calibrate())} µs CPU per local HTTP round trip)`);
  log(`  ${ORGS} orgs, tokens spread over them round-robin; max concurrency ${CONCURRENCY} in flight; /v1 keep-alive; synchronous_commit on`);
  const pg = await startBenchPostgres();
  const redis = await startBenchRedis();
  try {
    return [await runPath(pg.url, redis.url, log), await runPath(pg.url, undefined, log)];
  } finally {
    await redis.stop();
    await pg.stop();
  }
}

if (isMain(import.meta.url)) {
  const [r, p] = await runCapabilitiesBench();
  console.log("\nTargets");
  console.log(versus("consumes/s, Redis path, max concurrency", r!.verifyMax.perSecond, 3_000, "/s"));
  console.log(`  (Postgres-only path: ${fmt(p!.verifyMax.perSecond)} consumes/s; Redis/Postgres ratio ${(r!.verifyMax.perSecond / p!.verifyMax.perSecond).toFixed(2)})`);
}
