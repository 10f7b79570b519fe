// Webhooks (issue 21): decisions per second with and without a webhook subscribed (the Intent path
// writes nothing more for events: they are projected from the evidence log, so the difference is
// the delivery work sharing the machine and the database), and the latency from a decision's
// commit to the first delivery attempt of its DecisionCompleted event at a receiver in this
// process. The decision's HTTP answer stands for its commit (the answer leaves after the commit),
// so a delivery can even arrive before the answer is read: such latencies are negative. Runs
// without, with, then without again (a drift of the shared machine shows as a difference between
// the two runs without). Prints figures; asserts nothing.
//   npx tsx --expose-gc --v8-pool-size=1 bench/webhooks.ts   (BENCH_ONLY=webhooks npm run bench)
// Target: p50 from commit to first attempt under 100 ms; decisions/s within 10 % with a webhook.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { closedLoop, createAgents, describeRun, fmt, HttpClient, isMain, latencyOf, machineLine, openLoop, signIntents, spawnMandate, startBenchPostgres, type Latency, type Operation, type SignedIntent } from "./support.js";

const ORGS = Number(process.env.BENCH_ORGS ?? 2);
const AGENTS_PER_ORG = Number(process.env.BENCH_AGENTS_PER_ORG ?? 2);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 64);
const WARMUP = 3_000;
const MAX_RUN = Number(process.env.BENCH_WEBHOOKS_MAX ?? 24_000);
const MAX_SECONDS = Number(process.env.BENCH_WEBHOOKS_SECONDS ?? 8);
/** The steady rate at which commit-to-first-attempt latency is measured, below saturation. */
const RATE = Number(process.env.BENCH_WEBHOOKS_RATE ?? 200);
const RATE_RUN = Number(process.env.BENCH_WEBHOOKS_RATE_RUN ?? 2_000);

/** What bench/run.ts summarises. */
export interface WebhooksSummary {
  withoutPerSecond: number;
  withoutAgainPerSecond: number;
  withPerSecond: number;
  /** Service CPU per decision (µs) without a webhook (the mean of both runs), and with one (its delivery included). */
  cpuMicrosWithout: number;
  cpuMicrosWith: number;
  /** Commit to first attempt at the steady rate. */
  steady: Latency;
  /** Commit to first attempt during the max-concurrency run (deliveries queue behind decisions there). */
  underLoad: Latency;
}

export async function runWebhooksBench(log: (line: string) => void = console.log): Promise<WebhooksSummary> {
  log(`\nWebhooks (${machineLine()})`);
  // The receiver: when each decision's DecisionCompleted first arrived.
  const arrived = new Map<string, number>();
  let deliveries = 0;
  const receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const at = performance.now();
      deliveries++;
      try {
        const id = JSON.parse(Buffer.concat(chunks).toString("utf8")).data.decision_id as string;
        if (!arrived.has(id)) arrived.set(id, at);
      } catch {
        // Not an envelope: counted, not timed.
      }
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
  const pg = await startBenchPostgres();
  try {
    const svc = await spawnMandate(pg.url);
    const client = new HttpClient(svc.baseUrl, CONCURRENCY);
    try {
      const agents = await createAgents(client, svc.operatorKey, ORGS, AGENTS_PER_ORG);
      log(`  ${ORGS} orgs × ${AGENTS_PER_ORG} agents, starter policy (reference_noop → ALLOW), /v1, max concurrency ${CONCURRENCY}; service pid ${svc.pid}`);
      const answered = new Map<string, number>();
      const submit = (intents: SignedIntent[]): Operation => async (i) => {
        const s = intents[i]!;
        const res = await client.request("POST", "/v1/intents", s.bytes, { "x-service-key-id": s.keyId, "x-service-signature": s.signature });
        const at = performance.now();
        if (res.status !== 200 || !res.text.includes('"ALLOW"')) return `${res.status} ${res.text.slice(0, 200)}`;
        answered.set(JSON.parse(res.text).decision_id as string, at);
        return true;
      };
      // Service CPU per decision (deliveries included) is what the machine's load changes least.
      const maxRun = async (label: string) => {
        const cpu0 = svc.cpuTimes();
        const run = await closedLoop(CONCURRENCY, MAX_RUN, submit(signIntents(agents, MAX_RUN)), MAX_SECONDS);
        const cpu1 = svc.cpuTimes();
        const cpuMicros = ((cpu1.user - cpu0.user + cpu1.system - cpu0.system) / Math.max(1, run.ok)) * 1e6;
        log(`${describeRun(label, run)}   service CPU per decision ${fmt(cpuMicros)} µs`);
        return { ...run, cpuMicros };
      };
      /** Commit-to-first-attempt latencies of the decisions answered since `from`, once each has arrived (or the deadline passed). */
      const latencies = async (ids: string[], deadlineMs = 120_000): Promise<{ latency: Latency; missing: number }> => {
        const deadline = performance.now() + deadlineMs;
        while (ids.some((id) => !arrived.has(id)) && performance.now() < deadline) await new Promise((r) => setTimeout(r, 50));
        const samples = ids.filter((id) => arrived.has(id)).map((id) => arrived.get(id)! - answered.get(id)!);
        return { latency: latencyOf(samples), missing: ids.length - samples.length };
      };

      await closedLoop(CONCURRENCY, WARMUP, submit(signIntents(agents, WARMUP)), 2);
      const without = await maxRun("  without a webhook, max concurrency");

      const orgs = [...new Map(agents.map((a) => [a.organizationId, a.apiKey])).values()];
      const hooks = await Promise.all(orgs.map((key) => client.json("POST", "/v1alpha/webhooks", { url: receiverUrl, events: ["DecisionCompleted"], description: "bench" }, key)));
      answered.clear();
      const withHook = await maxRun(`  with one webhook per organization (DecisionCompleted), max concurrency`);
      const loadIds = [...answered.keys()];
      const drainStart = performance.now();
      const underLoad = await latencies(loadIds);
      log(`    its ${fmt(loadIds.length)} deliveries all arrived ${fmt((performance.now() - drainStart) / 1000, 1)} s after the run (${underLoad.missing} missing); commit → first attempt under that load: p50 ${fmt(underLoad.latency.p50, 1)} ms, p99 ${fmt(underLoad.latency.p99, 1)} ms`);

      answered.clear();
      const steadyRun = await openLoop(RATE, RATE_RUN, submit(signIntents(agents, RATE_RUN)));
      log(describeRun(`  with the webhooks, offered ${fmt(RATE)}/s`, steadyRun));
      const steady = await latencies([...answered.keys()]);
      log(`    commit → first delivery attempt at ${fmt(RATE)}/s: p50 ${fmt(steady.latency.p50, 1)} ms, p99 ${fmt(steady.latency.p99, 1)} ms, max ${fmt(steady.latency.max, 1)} ms over ${fmt(answered.size - steady.missing)} (${steady.missing} missing)`);

      for (let i = 0; i < orgs.length; i++) await client.request("DELETE", `/v1alpha/webhooks/${hooks[i].webhook_id}`, undefined, { authorization: `Bearer ${orgs[i]}` });
      const again = await maxRun("  without a webhook again, max concurrency");
      log(`  ${fmt(deliveries)} requests reached the receiver in all`);
      const summary = {
        withoutPerSecond: without.perSecond,
        withoutAgainPerSecond: again.perSecond,
        withPerSecond: withHook.perSecond,
        cpuMicrosWithout: (without.cpuMicros + again.cpuMicros) / 2,
        cpuMicrosWith: withHook.cpuMicros,
        steady: steady.latency,
        underLoad: underLoad.latency,
      };
      const base = (summary.withoutPerSecond + summary.withoutAgainPerSecond) / 2;
      log(`  decisions/s: ${fmt(summary.withoutPerSecond)} without, ${fmt(summary.withPerSecond)} with a webhook, ${fmt(summary.withoutAgainPerSecond)} without again (${fmt(((summary.withPerSecond - base) / base) * 100, 1)} % against the mean without); service CPU per decision ${fmt(summary.cpuMicrosWithout)} µs without, ${fmt(summary.cpuMicrosWith)} µs with its delivery`);
      return summary;
    } finally {
      client.close();
      await svc.stop();
    }
  } finally {
    await pg.stop();
    receiver.closeAllConnections();
    receiver.close();
  }
}

if (isMain(import.meta.url)) await runWebhooksBench();
