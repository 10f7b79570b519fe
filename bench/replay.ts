// Replay of recorded Intents (issue 20, POST /v1/policies:replay): an organization records 1,000
// signed Intents under a published policy, then a draft version is replayed against them, each
// with the input its decision's evidence recorded. The first replay builds and loads the draft's
// bundle (opa build, WebAssembly compile, the first evaluation in a worker); the next ones
// build it again (the build is not cached) but find it loaded. Prints figures; asserts nothing.
//   npx tsx --expose-gc --v8-pool-size=1 bench/replay.ts   (BENCH_ONLY=replay npm run bench)
// Target: 1,000 recorded Intents replayed in under 2 s.
import { randomUUID, sign } from "node:crypto";
import { closedLoop, createAgents, fmt, HttpClient, isMain, latencyOf, machineLine, spawnMandate, startBenchPostgres, versus } from "./support.js";

const RECORDED = Number(process.env.BENCH_REPLAY_RECORDED ?? 1_000);
const REPEATS = 5;

// v1 (published): review above 500, else allow. v2 (the draft replayed): review above 300, deny above 900.
const V1 = {
  actions: ["pay"],
  rules: [
    { id: "large", when: { amount: { gt: 500 } }, outcome: "HUMAN_REVIEW", reason: "large_payment" },
    { id: "small", when: { amount: { lte: 500 } }, outcome: "ALLOW", reason: "small_payment" },
  ],
};
const V2 = {
  actions: ["pay"],
  rules: [
    { id: "huge", when: { amount: { gt: 900 } }, outcome: "DENY", reason: "huge_payment" },
    { id: "large", when: { amount: { gt: 300 } }, outcome: "HUMAN_REVIEW", reason: "large_payment" },
    { id: "small", when: { amount: { lte: 300 } }, outcome: "ALLOW", reason: "small_payment" },
  ],
};

/** What bench/run.ts summarises: the first replay (bundle built and loaded) and the later ones. */
export interface ReplaySummary {
  recorded: number;
  firstMs: number;
  laterP50Ms: number;
  flipped: number;
}

export async function runReplayBench(log: (line: string) => void = console.log): Promise<ReplaySummary> {
  log(`\nReplay of recorded Intents (${machineLine()})`);
  const pg = await startBenchPostgres();
  try {
    const svc = await spawnMandate(pg.url);
    const http = new HttpClient(svc.baseUrl, 64);
    try {
      const [agent] = await createAgents(http, svc.operatorKey, 1, 1);
      const author = agent!.apiKey;
      const approver = (await http.json("POST", "/v1/organization/api-keys", { name: "approver", permissions: ["POLICY_APPROVER"] }, author)).api_key as string;
      await http.json("POST", "/v1/policies", { policy_key: "pay", description: "payments", source: { rules: V1 } }, author);
      await http.json("POST", "/v1/policies/pay/versions/1/submit", {}, author);
      await http.json("POST", "/v1/policies/pay/versions/1/approve", {}, approver);
      await http.json("POST", "/v1/policies/pay/versions/1/publish", {}, approver);
      await http.json("POST", "/v1/policies/pay/versions", { source: { rules: V2 } }, author);

      const requestedAt = new Date().toISOString();
      const recording = await closedLoop(32, RECORDED, async (i) => {
        const bytes = Buffer.from(JSON.stringify({ agent_id: agent!.agentId, action: "pay", amount: i % 1000, currency: "USD", requested_at: requestedAt, nonce: randomUUID() }));
        const res = await http.request("POST", "/v1/intents", bytes, { "x-service-key-id": agent!.certificateId, "x-service-signature": sign(null, bytes, agent!.privateKey).toString("base64") });
        return res.status === 200 ? true : `${res.status} ${res.text.slice(0, 200)}`;
      });
      log(`  recorded ${fmt(recording.ok)} signed Intents (${recording.failed} failed) under v1, through /v1; service pid ${svc.pid}`);

      const replay = async () => {
        const started = performance.now();
        const body = await http.json("POST", "/v1/policies:replay", { policy_versions: { pay: 2 }, limit: RECORDED }, author);
        return { ms: performance.now() - started, body };
      };
      const first = await replay();
      const later: number[] = [];
      for (let i = 0; i < REPEATS; i++) later.push((await replay()).ms);
      const summary = { recorded: first.body.evaluated as number, firstMs: first.ms, laterP50Ms: latencyOf(later).p50, flipped: first.body.flipped.length as number };
      log(`  replay of ${fmt(summary.recorded)} recorded Intents: ${fmt(summary.firstMs, 1)} ms (first: the draft's bundle built and loaded; ${fmt(summary.flipped)} flipped)`);
      log(`  later replays of the same draft (bundle built again, found loaded): p50 ${fmt(summary.laterP50Ms, 1)} ms over ${REPEATS}`);
      return summary;
    } finally {
      http.close();
      await svc.stop();
    }
  } finally {
    await pg.stop();
  }
}

if (isMain(import.meta.url)) {
  const s = await runReplayBench();
  console.log("\nTargets");
  console.log(versus(`replay of ${fmt(s.recorded)} recorded Intents`, s.firstMs, 2_000, "ms", false));
}
