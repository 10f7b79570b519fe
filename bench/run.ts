// `npm run bench`: every benchmark in one run, one after the other, then a summary of the figures
// beside their targets. Prints; asserts nothing. The machine is shared with whatever else runs on
// it (the load average and a yardstick are printed with each bench): read the figures with that.
//   BENCH_ONLY=policy,intents,capabilities,replay,webhooks  picks a subset.
import { spawn } from "node:child_process";
import { runCapabilitiesBench, type CapabilityPathSummary } from "./capabilities.js";
import { runIntentsBench, type IntentsSummary } from "./intents.js";
import { runReplayBench, type ReplaySummary } from "./replay.js";
import { runWebhooksBench, type WebhooksSummary } from "./webhooks.js";
import { fmt, machineLine, repoRoot, versus } from "./support.js";

const only = new Set((process.env.BENCH_ONLY ?? "policy,intents,capabilities,replay,webhooks").split(",").map((s) => s.trim()));
const started = performance.now();
console.log(`Mandate benchmarks: ${machineLine()}`);

interface PolicyFigures {
  scenario: string;
  p50: number;
  p99: number;
  speedupP50: number;
}

/** bench/policy.ts in its own process (its tight loops measure best alone); its output is passed through and parsed. */
async function runPolicyBench(): Promise<PolicyFigures[]> {
  console.log("\nPolicy evaluation (bench/policy.ts)");
  const child = spawn(process.execPath, ["--import", "tsx", "bench/policy.ts"], { cwd: repoRoot, stdio: ["ignore", "pipe", "inherit"] });
  let text = "";
  child.stdout!.on("data", (chunk: Buffer) => {
    text += chunk.toString();
    process.stdout.write(chunk.toString().replace(/^(?=.)/gm, "  "));
  });
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  if (code !== 0) console.log(`  bench/policy.ts exited with ${code}`);
  const figures: PolicyFigures[] = [];
  let scenario = "";
  for (const line of text.split("\n")) {
    if (/^\S/.test(line) && !line.startsWith("Node ")) scenario = line.trim();
    const p = /in-process \(opa-wasm\)\s+p50\s+([\d.]+) µs\s+p99\s+([\d.]+) µs/.exec(line);
    if (p) figures.push({ scenario, p50: Number(p[1]), p99: Number(p[2]), speedupP50: NaN });
    const s = /in-process is ([\d.]+)x faster at p50/.exec(line);
    if (s && figures.length) figures[figures.length - 1]!.speedupP50 = Number(s[1]);
  }
  return figures;
}

let policy: PolicyFigures[] = [];
let intents: IntentsSummary | undefined;
let capabilities: CapabilityPathSummary[] = [];
let replay: ReplaySummary | undefined;
let webhooks: WebhooksSummary | undefined;
if (only.has("policy")) policy = await runPolicyBench();
if (only.has("intents")) intents = await runIntentsBench();
if (only.has("capabilities")) capabilities = await runCapabilitiesBench();
if (only.has("replay")) replay = await runReplayBench();
if (only.has("webhooks")) webhooks = await runWebhooksBench();

console.log(`\nSummary (${((performance.now() - started) / 1000).toFixed(0)} s in all; ${machineLine()})`);
for (const f of policy) {
  console.log(`  policy: ${f.scenario.split(" (")[0]}`);
  console.log(versus("  in-process evaluation p50", f.p50, 50, "µs", false));
  console.log(versus("  in-process vs opa run --server at p50", f.speedupP50, 5, "x"));
}
if (intents) {
  for (const t of ["v1", "grpc"] as const) {
    console.log(versus(`decisions/s at max concurrency (${t})`, intents.max[t].perSecond, 2_000, "/s"));
    const r = intents.atRate[t];
    console.log(versus(`p99 at 1,000/s offered (${t})${r.saturated ? " [saturated]" : ""}`, r.latency.p99, 20, "ms", false));
    console.log(`    (at 100/s offered: p50 ${fmt(intents.light[t].latency.p50, 2)} ms, p99 ${fmt(intents.light[t].latency.p99, 2)} ms)`);
  }
  console.log(`  gRPC/v1 throughput ratio ${(intents.max.grpc.perSecond / intents.max.v1.perSecond).toFixed(2)}; service peak RSS ${fmt(intents.peakRssMiB, 1)} MiB; ${fmt(intents.cpuMicrosPerDecision)} µs service CPU per decision`);
}
const redis = capabilities.find((c) => c.path === "redis");
const pg = capabilities.find((c) => c.path === "postgres");
for (const c of capabilities) {
  console.log(
    `  capabilities (${c.path}): ${fmt(c.pairs.perSecond)} issue+verify pairs/s; ${fmt(c.verifyMax.perSecond)} consumes/s (p50 ${fmt(c.verifyMax.latency.p50, 2)} ms, p99 ${fmt(c.verifyMax.latency.p99, 2)} ms); at 1,000/s offered p50 ${fmt(c.verifyAtRate.latency.p50, 2)} ms, p99 ${fmt(c.verifyAtRate.latency.p99, 2)} ms${c.verifyAtRate.saturated ? " [saturated]" : ""}; at 100/s p50 ${fmt(c.verifyLight.latency.p50, 2)} ms, p99 ${fmt(c.verifyLight.latency.p99, 2)} ms; replays refused ${c.replaysRejected}`,
  );
}
if (redis) console.log(versus("consumes/s on the Redis path", redis.verifyMax.perSecond, 3_000, "/s"));
if (redis && pg) console.log(`  Redis/Postgres-only consume throughput ratio ${(redis.verifyMax.perSecond / pg.verifyMax.perSecond).toFixed(2)}`);
if (replay) console.log(versus(`replay of ${fmt(replay.recorded)} recorded Intents`, replay.firstMs, 2_000, "ms", false));
if (webhooks) {
  console.log(`  decisions/s without a webhook ${fmt(webhooks.withoutPerSecond)} (again ${fmt(webhooks.withoutAgainPerSecond)}), with one per organization ${fmt(webhooks.withPerSecond)}; service CPU per decision ${fmt(webhooks.cpuMicrosWithout)} µs without, ${fmt(webhooks.cpuMicrosWith)} µs with`);
  console.log(versus("commit → first webhook attempt p50 (steady)", webhooks.steady.p50, 100, "ms", false));
  console.log(`    (p99 ${fmt(webhooks.steady.p99, 1)} ms; under max load p50 ${fmt(webhooks.underLoad.p50, 1)} ms, p99 ${fmt(webhooks.underLoad.p99, 1)} ms)`);
}
