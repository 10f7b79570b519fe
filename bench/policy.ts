// In-process evaluation latency (opa-wasm) against the same bundle served by `opa run --server`.
//   npx tsx bench/policy.ts
// Targets: in-process p50 < 50 µs, and at least 5x faster than the server round trip. Prints
// figures; asserts nothing.
import { spawn } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { Agent, request } from "node:http";
import { createServer } from "node:net";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { buildBundle, type BuiltBundle, type BundlePolicy } from "../src/policy/build.js";
import { PolicyEngine, type DecisionInput } from "../src/policy/engine.js";
import { validateGraph } from "../src/policy/graph-checks.js";
import type { AuthorityGraph } from "../src/policy/graph-types.js";
import { libraryModules, opaPath } from "../src/policy/opa.js";
import { compileRules, STARTER_POLICY_KEY, STARTER_RULES } from "../src/policy/rules.js";
import { readTarGz } from "../src/policy/tar.js";

const IN_PROCESS_WARMUP = 20_000;
const IN_PROCESS_RUNS = 100_000;
const SERVER_WARMUP = 500;
const SERVER_RUNS = 5_000;
const NOW = "2026-06-01T12:00:00.000Z";

// A small deterministic generator, so every run measures the same graph.
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state * 1664525 + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

/** 1,000 principals in a 20-role hierarchy, 5,000 delegations (some chained, some expired), a three-band matrix. */
function generateGraph(): { graph: AuthorityGraph; refs: string[] } {
  const next = random(42);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)] as T;
  const refs = Array.from({ length: 1000 }, (_, i) => `E${String(i).padStart(4, "0")}`);
  const roles = Array.from({ length: 20 }, (_, i) => ({ role: `r${i}`, reports_to: i === 0 ? null : `r${Math.floor((i - 1) / 3)}` }));
  const roleLimit = (i: number) => 1000 * (20 - i);
  const memberOf = new Map(refs.map((ref) => [ref, Math.floor(next() * roles.length)]));
  const limits = roles.flatMap((r, i) =>
    ["USD", "EUR"].map((currency) => ({ holder: `role:${r.role}`, action: "vendor_payment", currency, max_amount: roleLimit(i), valid_until: null })),
  );
  const dates = [null, "2025-12-31", "2026-09-30", "2026-12-31", "2027-06-30"];
  const delegations = Array.from({ length: 5000 }, () => {
    const holder = pick(refs);
    let delegate = pick(refs);
    while (delegate === holder) delegate = pick(refs);
    // At most what the holder's own role grants, so the graph is valid whatever the chain.
    const max_amount = Math.round(roleLimit(memberOf.get(holder)!) * (0.2 + 0.8 * next()));
    return { holder, delegate, action: "vendor_payment", currency: pick(["USD", "EUR"]), max_amount, valid_until: pick(dates) };
  });
  const approval_matrix = [1000, 10_000, 100_000].flatMap((up_to_amount, approvals_required) =>
    ["USD", "EUR"].map((currency) => ({ action: "vendor_payment", currency, up_to_amount, approvals_required })),
  );
  return {
    refs,
    graph: { roles, memberships: refs.map((ref) => ({ principal: ref, role: `r${memberOf.get(ref)}` })), limits, delegations, approval_matrix },
  };
}

function inputFor(ref: string | null, intent: Partial<DecisionInput["intent"]> & { action: string }): DecisionInput {
  return {
    intent: { agent_id: "agt_bench", requested_at: NOW, nonce: "bench", ...intent },
    agent: { agent_id: "agt_bench", state: "active" },
    principal: { principal_id: "prn_bench", external_ref: ref, kind: "person" },
    now: NOW,
  };
}

interface Figures {
  p50: number;
  p99: number;
}

function percentiles(samples: Float64Array): Figures {
  samples.sort();
  return { p50: samples[Math.floor(samples.length * 0.5)]!, p99: samples[Math.floor(samples.length * 0.99)]! };
}

function measureInProcess(engine: PolicyEngine, digest: string, inputs: DecisionInput[]): Figures {
  for (let i = 0; i < IN_PROCESS_WARMUP; i++) engine.evaluate(digest, inputs[i % inputs.length]!);
  const samples = new Float64Array(IN_PROCESS_RUNS);
  for (let i = 0; i < IN_PROCESS_RUNS; i++) {
    const input = inputs[i % inputs.length]!;
    const start = process.hrtime.bigint();
    engine.evaluate(digest, input);
    samples[i] = Number(process.hrtime.bigint() - start) / 1000;
  }
  return percentiles(samples);
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port"))));
    });
  });
}

/**
 * The OPA server over the same Rego and data as the bundle. It cannot be handed the bundle
 * itself: this opa build has no WebAssembly runtime, and a wasm bundle's Rego files lack
 * the rules compiled into policy.wasm (opa build removes the entrypoint's rules).
 */
async function startServer(bundle: Buffer, policies: readonly BundlePolicy[]): Promise<{ port: number; stop: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), "mandate-bench-"));
  await mkdir(join(dir, "library"));
  await mkdir(join(dir, "policies"));
  await writeFile(join(dir, "data.json"), readTarGz(bundle).get("data.json")!);
  for (const { name, rego } of await libraryModules()) await writeFile(join(dir, "library", name), rego);
  for (const p of policies) await writeFile(join(dir, "policies", `${p.policy_key}.rego`), p.rego);
  const port = await freePort();
  const child = spawn(opaPath(), ["run", "--server", "--addr", `127.0.0.1:${port}`, "--log-level", "error", "--bundle", dir], {
    stdio: "ignore",
  });
  const stop = async () => {
    child.kill();
    await rm(dir, { recursive: true, force: true });
  };
  for (let attempt = 0; attempt < 100; attempt++) {
    const ready = await fetch(`http://127.0.0.1:${port}/health`).then((r) => r.ok, () => false);
    if (ready) return { port, stop };
    await new Promise((r) => setTimeout(r, 100));
  }
  await stop();
  throw new Error("opa run --server did not become healthy");
}

function post(agent: Agent, port: number, body: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request(
      { agent, host: "127.0.0.1", port, method: "POST", path: "/v1/data/mandate/main/decision", headers: { "content-type": "application/json" } },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (text += chunk));
        res.on("end", () => resolve(text));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

async function measureServer(
  built: BuiltBundle,
  policies: readonly BundlePolicy[],
  engine: PolicyEngine,
  inputs: DecisionInput[],
): Promise<Figures & { agree: number }> {
  const server = await startServer(built.bundle, policies);
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  try {
    const bodies = inputs.map((input) => JSON.stringify({ input }));
    // The server must answer what the engine answers, or the comparison means nothing.
    let agree = 0;
    for (const [i, input] of inputs.entries()) {
      const { result } = JSON.parse(await post(agent, server.port, bodies[i]!)) as { result?: { outcome: string; reason: string } };
      const local = engine.evaluate(built.digest, input);
      if (result?.outcome === local.outcome && result.reason === local.reason) agree++;
    }
    for (let i = 0; i < SERVER_WARMUP; i++) await post(agent, server.port, bodies[i % bodies.length]!);
    const samples = new Float64Array(SERVER_RUNS);
    for (let i = 0; i < SERVER_RUNS; i++) {
      const start = process.hrtime.bigint();
      await post(agent, server.port, bodies[i % bodies.length]!);
      samples[i] = Number(process.hrtime.bigint() - start) / 1000;
    }
    return { ...percentiles(samples), agree };
  } finally {
    agent.destroy();
    await server.stop();
  }
}

async function scenario(name: string, policies: readonly BundlePolicy[], graph: AuthorityGraph | null, inputs: DecisionInput[]): Promise<void> {
  let start = performance.now();
  const built = await buildBundle({ policies, graph, graph_version: graph ? 1 : null });
  const buildMs = performance.now() - start;
  const engine = new PolicyEngine();
  start = performance.now();
  await engine.load(built.digest, built.bundle);
  const loadMs = performance.now() - start;
  const outcomes = new Map<string, number>();
  for (const input of inputs) {
    const { outcome, reason } = engine.evaluate(built.digest, input);
    outcomes.set(`${outcome}/${reason}`, (outcomes.get(`${outcome}/${reason}`) ?? 0) + 1);
  }
  const local = measureInProcess(engine, built.digest, inputs);
  start = performance.now();
  const remote = await measureServer(built, policies, engine, inputs);
  const serverMs = performance.now() - start;
  console.log(`\n${name}`);
  console.log(`  bundle ${(built.bundle.length / 1024).toFixed(0)} KiB, built (index + opa build) in ${buildMs.toFixed(0)} ms, loaded in ${loadMs.toFixed(1)} ms`);
  console.log(`  ${inputs.length} distinct inputs:`);
  for (const [key, count] of [...outcomes].sort()) console.log(`    ${String(count).padStart(4)} ${key}`);
  console.log(`  in-process (opa-wasm)   p50 ${local.p50.toFixed(1).padStart(7)} µs   p99 ${local.p99.toFixed(1).padStart(7)} µs   (${IN_PROCESS_RUNS} runs)`);
  console.log(`  opa run --server (HTTP) p50 ${remote.p50.toFixed(1).padStart(7)} µs   p99 ${remote.p99.toFixed(1).padStart(7)} µs   (${SERVER_RUNS} runs, ${(serverMs / 1000).toFixed(1)} s)`);
  console.log(`  server agrees with the engine on ${remote.agree}/${inputs.length} inputs`);
  console.log(`  in-process is ${(remote.p50 / local.p50).toFixed(1)}x faster at p50, ${(remote.p99 / local.p99).toFixed(1)}x at p99`);
}

const starter = { policy_key: STARTER_POLICY_KEY, version: 1, rego: compileRules(STARTER_POLICY_KEY, STARTER_RULES) };
// The figures are only as quiet as the machine: say how busy it was.
console.log(`Node ${process.version}, ${cpus().length} CPUs, load average ${loadavg().map((l) => l.toFixed(2)).join(" ")}, opa at ${opaPath()}`);

await scenario("starter policy (reference_noop, no graph)", [starter], null, [inputFor(null, { action: "reference_noop" })]);

const { graph, refs } = generateGraph();
const start = performance.now();
const validated = validateGraph(graph, new Set(refs));
if (!validated.ok) throw new Error(`generated graph invalid: ${JSON.stringify(validated.errors.slice(0, 3))}`);
console.log(`\ngenerated graph: ${refs.length} principals, ${graph.roles.length} roles, ${graph.delegations.length} delegations`);
console.log(`  validateGraph ${(performance.now() - start).toFixed(0)} ms`);
const policies = [
  starter,
  { policy_key: "payments", version: 1, rego: compileRules("payments", { actions: ["vendor_payment"], rules: [{ id: "authority", authority: true }] }) },
  {
    policy_key: "sanctions",
    version: 1,
    rego: compileRules("sanctions", {
      actions: ["vendor_payment"],
      rules: [{ id: "blocked", when: { counterparty: { in: ["acme_shell_co"] } }, outcome: "DENY", reason: "counterparty_blocked" }],
    }),
  },
];
const next = random(7);
const inputs = Array.from({ length: 256 }, () =>
  inputFor(refs[Math.floor(next() * refs.length)]!, {
    action: "vendor_payment",
    amount: Math.round(next() * 25_000),
    currency: next() < 0.5 ? "USD" : "EUR",
    counterparty: next() < 0.05 ? "acme_shell_co" : "initech",
  }),
);
await scenario("authority graph (1,000 principals, 5,000 delegations; payments + sanctions policies)", policies, validated.graph, inputs);
