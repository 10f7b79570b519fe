// `npm run bench:peers` (scripts/bench-peers.sh installs the tools, then runs this): Mandate
// beside the engines users would otherwise deploy (issue 24). One policy, expressed natively in
// each system (bench/peers/policy.ts); each system runs alone in turn: Mandate over /v1, Mandate
// over gRPC, `opa run --server`, the Cerbos PDP. For each:
//   1. every prepared case is asked once and must get the oracle's answer, or the bench stops;
//   2. saturation: an external load generator, 1 thread and 32 connections (wrk for HTTP/1.1
//      JSON; for gRPC, ghz with 32 concurrent calls on one HTTP/2 connection), for
//      PEERS_DURATION after PEERS_WARMUP; the service's CPU (its process tree), Postgres's
//      (the postmaster's tree) and the whole machine's are read from /proc before and after,
//      and for Mandate its decision ledger's group commits from GET /metrics;
//   3. latency at one fixed offered rate common to all systems (PEERS_RATE, by default half of
//      Mandate /v1's saturation throughput), from the bench's open-loop generator (support.ts
//      openLoop: latency counted from when each request was due, so a stall is not hidden);
//   4. peak RSS (VmHWM) of the service process.
// Prints a table and the ratios Mandate/OPA and Mandate/Cerbos, and writes both as JSON and
// markdown to bench/results/peers-<time>.{json,md} and peers-latest.{json,md}.
//   PEERS_DURATION=10s PEERS_WARMUP=2s PEERS_RATE=<per second> PEERS_SYSTEMS=mandate-v1,mandate-grpc,opa,cerbos
//   PEERS_GRPC_DEADLINE=20s (ghz sends no grpc-timeout by default here)
//   PEERS_ROUNDS=3 (every system measured three times in turn; medians reported, each round in the JSON)
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { Outcome } from "../../src/gen/mandate/v1/decisions_pb.js";
import {
  calibrate,
  fmt,
  HttpClient,
  machineLine,
  openLoop,
  protoBytesField,
  protoVarintField,
  RawGrpcClient,
  repoRoot,
  spawnMandate,
  startBenchPostgres,
  versus,
  type BenchAgent,
  type Operation,
  type SignedIntent,
} from "../support.js";
import { actingPrincipals, CERBOS_PATH, cerbosAllowed, cerbosBody, expected, OPA_PATH, opaBody, peerCases, type PeerCase } from "./policy.js";
import { CERBOS_BIN, machineCpuTicks, peakRssMiB, postmasterPid, setUpMandateOrg, signCase, startCerbos, startOpa, treeCpuSeconds, type PeerServer } from "./systems.js";

const run = promisify(execFile);

/** A setting that cannot be used: said plainly, without a stack trace. */
function refuse(message: string): never {
  console.error(`bench:peers: ${message}`);
  process.exit(2);
}

function seconds(name: string, fallback: string): number {
  const value = process.env[name] ?? fallback;
  const m = /^(\d+)s?$/.exec(value);
  if (!m || Number(m[1]) < 1) refuse(`${name} must be a whole number of seconds, e.g. 10s (got "${value}")`);
  return Number(m[1]);
}

function roundsSetting(): number {
  const value = process.env.PEERS_ROUNDS ?? "1";
  if (!/^[1-9]\d*$/.test(value)) refuse(`PEERS_ROUNDS must be a whole number of rounds, 1 or more (got "${value}")`);
  return Number(value);
}

function positive(name: string, fallback?: number): number | undefined {
  const value = process.env[name];
  if (value === undefined) return fallback;
  if (!(Number(value) > 0)) refuse(`${name} must be a positive number per second (got "${value}")`);
  return Number(value);
}

const SYSTEMS = ["mandate-v1", "mandate-grpc", "opa", "cerbos"] as const;
type SystemName = (typeof SYSTEMS)[number];
const DURATION = seconds("PEERS_DURATION", "10s");
const WARMUP = seconds("PEERS_WARMUP", "2s");
/**
 * Every selected system is measured this many times, in turn (round 1: each system, round 2: each
 * again, …), and each figure reported is its median over the rounds: this machine's speed drifts
 * by about a fifth between runs, and interleaving gives every system the same drift.
 */
const ROUNDS = roundsSetting();
const CONNECTIONS = 32;
const ACTING = 32;
/** Intents signed per second of a saturation run: more than Mandate can take, so none is sent twice. */
const PRESIGN_RATE = positive("PEERS_PRESIGN_RATE", 8_000)!;
const CERBOS = process.env.PEERS_CERBOS_BIN ?? CERBOS_BIN;
const GRPC_LOAD_BIN = process.env.PEERS_GRPC_LOAD_BIN ?? path.join(repoRoot, ".tools/bin/peers-grpc-load");
/** A deadline on each gRPC call (e.g. 20s, ghz's default), which takes the service's general gRPC path; none by default. */
const GRPC_DEADLINE = process.env.PEERS_GRPC_DEADLINE ?? "0s";
const selected = (process.env.PEERS_SYSTEMS ?? SYSTEMS.join(",")).split(",").map((s) => s.trim());
for (const s of selected) if (!(SYSTEMS as readonly string[]).includes(s)) refuse(`PEERS_SYSTEMS: unknown system "${s}" (known: ${SYSTEMS.join(", ")})`);
if (!/^\d+(ms|s|m)$/.test(GRPC_DEADLINE)) refuse(`PEERS_GRPC_DEADLINE must be a duration such as 20s (got "${GRPC_DEADLINE}")`);
let rate = positive("PEERS_RATE");

/** What one system measured. */
interface SystemResult {
  system: SystemName;
  label: string;
  generator: string;
  saturation: { perSecond: number; decisions: number; failed: number; seconds: number; p50Ms: number; p99Ms: number };
  atRate: { rate: number; p50Ms: number; p99Ms: number; maxMs: number; ok: number; failed: number; saturated: boolean };
  cpuSecondsPer1000: { service: number; postgres: number | null };
  /** How busy the whole machine's CPUs were during the saturation run (load generator included), 0-100. */
  machineBusyPercent: number;
  peakRssMiB: number;
  /** Mandate: the decision ledger's groups during the saturation run (from /metrics). */
  ledger?: LedgerFigures;
  /** With PEERS_ROUNDS above 1: each round's saturation throughput (the other figures are medians). */
  roundsPerSecond?: number[];
  failures: string[];
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/** One system's rounds as one result: each number its median, a flag set if any round set it, the failures of all. */
function overRounds(rs: readonly SystemResult[]): SystemResult {
  const merge = (values: readonly unknown[]): unknown => {
    const first = values[0];
    if (typeof first === "number") return median(values as number[]);
    if (typeof first === "boolean") return values.some(Boolean);
    if (first !== null && typeof first === "object" && !Array.isArray(first)) {
      return Object.fromEntries(Object.keys(first).map((k) => [k, merge(values.map((v) => (v as Record<string, unknown>)[k]))]));
    }
    return first;
  };
  const merged = merge(rs) as SystemResult;
  // Failures add up: a median would hide a round that failed.
  merged.saturation.failed = rs.reduce((n, r) => n + r.saturation.failed, 0);
  merged.atRate.failed = rs.reduce((n, r) => n + r.atRate.failed, 0);
  return { ...merged, roundsPerSecond: rs.map((r) => r.saturation.perSecond), failures: rs.flatMap((r) => r.failures) };
}

/** Decision group commits over a run: how many per second, their mean size and mean duration. */
interface LedgerFigures {
  groupsPerSecond: number;
  meanGroupSize: number;
  meanCommitMs: number;
}

/** The decision ledger's group histograms' sums and counts, as GET /metrics has them now. */
async function ledgerTotals(baseUrl: string): Promise<{ groups: number; items: number; seconds: number }> {
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  const read = (name: string) => Number(new RegExp(`^${name}\\{kind="decision"\\} (\\S+)$`, "m").exec(text)?.[1] ?? 0);
  return { groups: read("mandate_ledger_group_size_count"), items: read("mandate_ledger_group_size_sum"), seconds: read("mandate_ledger_group_commit_seconds_sum") };
}

const LABELS: Record<SystemName, string> = {
  "mandate-v1": "Mandate POST /v1/intents (signature verified, evaluated, evidence signed and committed)",
  "mandate-grpc": "Mandate gRPC SubmitIntent (the same path over h2c)",
  opa: "opa run --server, bare evaluation",
  cerbos: "Cerbos PDP, bare CheckResources (HTTP)",
};

const cases = peerCases(actingPrincipals(ACTING));
const workDir = await mkdtemp(path.join(tmpdir(), "mandate-peers-"));

/** Writes prepared requests for the wrk script and the gRPC driver: "key id \t signature \t body" per line. */
async function writeBodies(name: string, lines: string[]): Promise<string> {
  const file = path.join(workDir, name);
  await writeFile(file, lines.join("\n") + "\n");
  return file;
}

/** `count` fresh signed Intents for cases first, first + 1, … (round robin), each by the agent acting for its case's principal; sign right before use (±300 s window). */
function signPeerIntents(agents: Map<string, BenchAgent>, count: number, first = 0): SignedIntent[] {
  const requestedAt = new Date().toISOString();
  return Array.from({ length: count }, (_, i) => {
    const c = cases[(first + i) % cases.length]!;
    return signCase(agents.get(c.principal)!, c, requestedAt);
  });
}

/** Requests as lines of the body file: signed Intents carry their credentials, OPA and Cerbos bodies none. */
const intentLines = (signed: SignedIntent[]) => signed.map((s) => `${s.keyId}\t${s.signature}\t${s.bytes.toString("utf8")}`);
const plainLines = (body: (c: PeerCase) => string, count: number) => Array.from({ length: count }, (_, i) => `\t\t${body(cases[i % cases.length]!)}`);

interface LoadFigures {
  decisions: number;
  failed: number;
  seconds: number;
  p50Ms: number;
  p99Ms: number;
  failures: string[];
}

/** wrk, 1 thread, 32 connections, the bodies of `file` in turn (bench/peers/wrk-bodies.lua); `signed`: how many Intents the file holds, each to be sent once. */
async function wrk(url: string, file: string, duration: number, signed?: number): Promise<LoadFigures> {
  const { stdout } = await run("wrk", ["-t1", `-c${CONNECTIONS}`, `-d${duration}s`, "--timeout", "20s", "-s", path.join(repoRoot, "bench/peers/wrk-bodies.lua"), url, "--", file], {
    maxBuffer: 1 << 20,
  });
  const line = stdout.split("\n").find((l) => l.startsWith("PEERS_WRK "));
  if (!line) throw new Error(`wrk printed no summary:\n${stdout}`);
  const r = JSON.parse(line.slice("PEERS_WRK ".length));
  const failed = r.errors.status + r.errors.timeout + r.errors.read + r.errors.write + r.errors.connect;
  const failures = failed ? [`wrk: ${r.errors.status} non-2xx, ${r.errors.timeout} timeouts, ${r.errors.connect + r.errors.read + r.errors.write} socket errors`] : [];
  if (signed !== undefined && r.requests > signed) failures.push(`the ${fmt(signed)} signed Intents ran out and were sent again (refused as replays): raise PEERS_PRESIGN_RATE`);
  return { decisions: r.requests - r.errors.status, failed, seconds: r.duration_us / 1e6, p50Ms: r.latency_us.p50 / 1000, p99Ms: r.latency_us.p99 / 1000, failures };
}

/** ghz (bench/peers/grpc-load) against SubmitIntent: 32 concurrent calls on one connection, the Intents of `file` in turn. */
async function ghz(baseUrl: string, file: string, duration: number): Promise<LoadFigures> {
  const args = ["-host", new URL(baseUrl).host, "-intents", file, "-c", String(CONNECTIONS), "-duration", `${duration}s`, "-deadline", GRPC_DEADLINE];
  const { stdout } = await run(GRPC_LOAD_BIN, args, { maxBuffer: 64 << 20 });
  const r = JSON.parse(stdout);
  const at = (p: number) => (r.latencyDistribution ?? []).find((d: { percentage: number }) => d.percentage === p)?.latency / 1e6;
  const ok = r.statusCodeDistribution?.OK ?? 0;
  const errors = Object.entries(r.errorDistribution ?? {}).map(([k, v]) => `ghz: ${v} × ${k}`);
  return { decisions: ok, failed: r.count - ok, seconds: r.total / 1e9, p50Ms: at(50), p99Ms: at(99), failures: errors.slice(0, 3) };
}

/** One system, already running: equivalence, warm-up, saturation with CPU readings, the fixed rate, peak RSS. */
async function measure(
  system: SystemName,
  server: PeerServer,
  pgPid: number | null,
  drive: {
    /** Asks case i once; true when allowed. */
    decide(i: number): Promise<boolean>;
    /** Prepares a body file for `seconds` of saturation. */
    bodies(seconds: number): Promise<string>;
    saturate(file: string, seconds: number): Promise<LoadFigures>;
    /** The fixed-rate operation over `count` prepared requests. */
    atRate(count: number): Operation;
  },
): Promise<SystemResult> {
  const wrong: string[] = [];
  for (let i = 0; i < cases.length; i += CONNECTIONS) {
    await Promise.all(
      cases.slice(i, i + CONNECTIONS).map(async (c, k) => {
        const allowed = await drive.decide(i + k);
        if (allowed !== expected(c)) wrong.push(`${JSON.stringify(c)}: expected ${expected(c) ? "allow" : "deny"}, got ${allowed ? "allow" : "deny"}`);
      }),
    );
  }
  if (wrong.length) throw new Error(`${system} disagrees with the policy on ${wrong.length} of ${cases.length} cases; nothing measured:\n  ${wrong.slice(0, 10).join("\n  ")}`);
  console.log(`  ${system}: all ${cases.length} cases answered as the policy says`);

  await drive.saturate(await drive.bodies(WARMUP), WARMUP);
  const file = await drive.bodies(DURATION);
  const machine0 = machineCpuTicks();
  const cpu0 = treeCpuSeconds(server.pid);
  const pg0 = pgPid === null ? 0 : treeCpuSeconds(pgPid);
  const ledger0 = system.startsWith("mandate-") ? await ledgerTotals(server.baseUrl) : null;
  const sat = await drive.saturate(file, DURATION);
  const cpu = treeCpuSeconds(server.pid) - cpu0;
  const pg = pgPid === null ? null : treeCpuSeconds(pgPid) - pg0;
  const machine1 = machineCpuTicks();
  const machineBusyPercent = ((machine1.busy - machine0.busy) / (machine1.total - machine0.total)) * 100;
  let ledger: LedgerFigures | undefined;
  if (ledger0) {
    const t = await ledgerTotals(server.baseUrl);
    const groups = t.groups - ledger0.groups;
    ledger = { groupsPerSecond: groups / sat.seconds, meanGroupSize: (t.items - ledger0.items) / groups, meanCommitMs: ((t.seconds - ledger0.seconds) / groups) * 1000 };
  }
  const perSecond = sat.decisions / sat.seconds;
  rate ??= Math.max(50, Math.round(perSecond / 2 / 50) * 50);

  const total = Math.round(rate * DURATION);
  const fixed = await openLoop(rate, total, drive.atRate(total), { maxInFlight: Math.max(rate, 1000) });
  const result: SystemResult = {
    system,
    label: LABELS[system],
    generator: system === "mandate-grpc" ? "ghz (library), 32 concurrent calls, 1 connection" : "wrk, 1 thread, 32 connections",
    saturation: { perSecond, decisions: sat.decisions, failed: sat.failed, seconds: sat.seconds, p50Ms: sat.p50Ms, p99Ms: sat.p99Ms },
    atRate: { rate, p50Ms: fixed.latency.p50, p99Ms: fixed.latency.p99, maxMs: fixed.latency.max, ok: fixed.ok, failed: fixed.failed, saturated: fixed.saturated },
    cpuSecondsPer1000: { service: (cpu / sat.decisions) * 1000, postgres: pg === null ? null : (pg / sat.decisions) * 1000 },
    machineBusyPercent,
    peakRssMiB: peakRssMiB(server.pid),
    ...(ledger && { ledger }),
    failures: [...sat.failures, ...fixed.failures.slice(0, 3)],
  };
  const f = result;
  console.log(
    `  ${system}: ${fmt(f.saturation.perSecond)}/s saturated (p50 ${fmt(f.saturation.p50Ms, 2)} ms, p99 ${fmt(f.saturation.p99Ms, 2)} ms); at ${fmt(rate)}/s p50 ${fmt(f.atRate.p50Ms, 2)} ms, p99 ${fmt(f.atRate.p99Ms, 2)} ms${f.atRate.saturated ? " [fell behind]" : ""}; CPU s per 1,000: service ${fmt(f.cpuSecondsPer1000.service, 3)}, Postgres ${f.cpuSecondsPer1000.postgres === null ? "—" : fmt(f.cpuSecondsPer1000.postgres, 3)}; machine ${fmt(f.machineBusyPercent)}% busy; peak RSS ${fmt(f.peakRssMiB, 1)} MiB${f.ledger ? `; decision groups ${fmt(f.ledger.groupsPerSecond)}/s, mean ${fmt(f.ledger.meanGroupSize, 1)} decisions, ${fmt(f.ledger.meanCommitMs, 2)} ms each` : ""}${f.saturation.failed + f.atRate.failed ? `; FAILED ${f.saturation.failed + f.atRate.failed} (${f.failures[0]})` : ""}`,
  );
  return result;
}

/** Mandate over one transport: a fresh service process on the prepared database. */
async function measureMandate(system: "mandate-v1" | "mandate-grpc", databaseUrl: string, pgPid: number, byPrincipal: Map<string, BenchAgent>): Promise<SystemResult> {
  const svc = await spawnMandate(databaseUrl);
  const http = new HttpClient(svc.baseUrl, CONNECTIONS);
  const grpc = new RawGrpcClient(svc.baseUrl);
  try {
    const server = { baseUrl: svc.baseUrl, pid: svc.pid, stop: svc.stop };
    const submit = async (s: SignedIntent): Promise<boolean | string> => {
      if (system === "mandate-v1") {
        const res = await http.request("POST", "/v1/intents", s.bytes, { "x-service-key-id": s.keyId, "x-service-signature": s.signature });
        if (res.status !== 200) return `${res.status} ${res.text.slice(0, 200)}`;
        return JSON.parse(res.text).outcome === "ALLOW";
      }
      const res = await grpc.unary("/mandate.v1.IntentService/SubmitIntent", protoBytesField(1, s.bytes), { "x-service-key-id": s.keyId, "x-service-signature": s.signature });
      if (res.status !== 0) return `grpc-status ${res.status} ${res.message}`;
      return protoVarintField(res.body, 2) === Outcome.ALLOW;
    };
    return await measure(system, server, pgPid, {
      async decide(i) {
        const r = await submit(signPeerIntents(byPrincipal, 1, i)[0]!);
        if (typeof r === "string") throw new Error(`${system}: ${r}`);
        return r;
      },
      bodies: (seconds) => writeBodies(`${system}.tsv`, intentLines(signPeerIntents(byPrincipal, PRESIGN_RATE * seconds))),
      saturate: (file, seconds) => (system === "mandate-v1" ? wrk(`${svc.baseUrl}/v1/intents`, file, seconds, PRESIGN_RATE * seconds) : ghz(svc.baseUrl, file, seconds)),
      atRate(count) {
        const signed = signPeerIntents(byPrincipal, count);
        return async (i) => {
          const r = await submit(signed[i]!);
          return typeof r === "string" ? r : true;
        };
      },
    });
  } finally {
    http.close();
    grpc.close();
    await svc.stop();
  }
}

/** OPA or Cerbos: bare evaluation over HTTP/1.1 JSON. */
async function measureEngine(system: "opa" | "cerbos", server: PeerServer): Promise<SystemResult> {
  const http = new HttpClient(server.baseUrl, CONNECTIONS);
  const route = system === "opa" ? OPA_PATH : CERBOS_PATH;
  const body = system === "opa" ? opaBody : cerbosBody;
  const bodies = cases.map(body);
  const ask = async (i: number) => {
    const res = await http.request("POST", route, bodies[i % bodies.length]!);
    if (res.status !== 200) throw new Error(`${system}: ${res.status} ${res.text.slice(0, 200)}`);
    return res.text;
  };
  try {
    return await measure(system, server, null, {
      async decide(i) {
        const answer = JSON.parse(await ask(i));
        return system === "opa" ? answer.result === true : cerbosAllowed(answer, cases[i]!.action);
      },
      // The cases in turn: every system is asked the same things in the same order.
      bodies: () => writeBodies(`${system}.tsv`, plainLines(body, cases.length)),
      saturate: (file, seconds) => wrk(server.baseUrl + route, file, seconds),
      atRate: () => async (i) => {
        await ask(i);
        return true;
      },
    });
  } finally {
    http.close();
    await server.stop();
  }
}

const measured: SystemResult[][] = [];
const started = new Date();
console.log(`Mandate beside OPA and Cerbos (${machineLine()}; yardstick: ${fmt(await calibrate())} µs CPU per local HTTP round trip)`);
console.log(
  `  ${cases.length} cases over ${ACTING} acting principals of a 1,000-principal graph; ${DURATION} s saturation after ${WARMUP} s warm-up; ${CONNECTIONS} connections${ROUNDS > 1 ? `; ${ROUNDS} rounds, medians reported` : ""}`,
);
try {
  const mandate = selected.filter((s): s is "mandate-v1" | "mandate-grpc" => s.startsWith("mandate-"));
  for (let round = 1; round <= ROUNDS; round++) {
    if (ROUNDS > 1) console.log(`  round ${round} of ${ROUNDS}`);
    const results: SystemResult[] = [];
    if (mandate.length) {
      // A database of each round's own: a later round must not run on the decisions of the earlier ones.
      const pg = await startBenchPostgres();
      try {
        const pgPid = postmasterPid(Number(new URL(pg.url).port));
        const agents = await prepareMandate(pg.url);
        for (const system of mandate) results.push(await measureMandate(system, pg.url, pgPid, agents));
      } finally {
        await pg.stop();
      }
    }
    if (selected.includes("opa")) results.push(await measureEngine("opa", await startOpa()));
    if (selected.includes("cerbos")) results.push(await measureEngine("cerbos", await startCerbos(CERBOS)));
    measured.push(results);
  }
} finally {
  await rm(workDir, { recursive: true, force: true });
}
await report(ROUNDS === 1 ? measured[0]! : measured[0]!.map((r) => overRounds(measured.map((round) => round.find((x) => x.system === r.system)!))), measured);

/**
 * Makes the organization, its policy, graph and agents through a service process of its own:
 * each measured process then starts on the prepared database, its CPU and peak RSS its own.
 */
async function prepareMandate(databaseUrl: string): Promise<Map<string, BenchAgent>> {
  const svc = await spawnMandate(databaseUrl);
  const http = new HttpClient(svc.baseUrl, CONNECTIONS);
  try {
    return await setUpMandateOrg(http, svc.operatorKey, actingPrincipals(ACTING));
  } finally {
    http.close();
    await svc.stop();
  }
}

async function report(all: SystemResult[], everyRound: SystemResult[][]): Promise<void> {
  const by = new Map(all.map((r) => [r.system, r]));
  const ratios: { mandate: SystemName; peer: SystemName; throughput: number; p99AtRate: number; serviceCpu: number }[] = [];
  for (const mandate of ["mandate-v1", "mandate-grpc"] as const)
    for (const peer of ["opa", "cerbos"] as const) {
      const m = by.get(mandate);
      const p = by.get(peer);
      if (m && p)
        ratios.push({
          mandate,
          peer,
          throughput: m.saturation.perSecond / p.saturation.perSecond,
          p99AtRate: m.atRate.p99Ms / p.atRate.p99Ms,
          serviceCpu: m.cpuSecondsPer1000.service / p.cpuSecondsPer1000.service,
        });
    }
  const n2 = (x: number | null, d = 2) => (x === null ? "—" : fmt(x, d));
  const table = [
    `| system | decisions/s (saturated${ROUNDS > 1 ? `; median of ${ROUNDS} rounds, then each` : ""}) | p50 / p99 saturated | p50 / p99 at ${fmt(rate ?? NaN)}/s | CPU s per 1,000: service | Postgres | machine busy | peak RSS | failed |`,
    "|---|---|---|---|---|---|---|---|---|",
    ...all.map(
      (r) =>
        `| ${r.label} | ${fmt(r.saturation.perSecond)}${r.roundsPerSecond ? ` (${r.roundsPerSecond.map((x) => fmt(x)).join(", ")})` : ""} | ${n2(r.saturation.p50Ms)} / ${n2(r.saturation.p99Ms)} ms | ${n2(r.atRate.p50Ms)} / ${n2(r.atRate.p99Ms)} ms${r.atRate.saturated ? " (fell behind)" : ""} | ${n2(r.cpuSecondsPer1000.service, 3)} | ${n2(r.cpuSecondsPer1000.postgres, 3)} | ${fmt(r.machineBusyPercent)}% | ${fmt(r.peakRssMiB, 1)} MiB | ${fmt(r.saturation.failed + r.atRate.failed)} |`,
    ),
  ];
  const ratioLines = ratios.map(
    (r) => `- ${r.mandate} / ${r.peer}: throughput ${r.throughput.toFixed(2)}×, p99 at the common rate ${r.p99AtRate.toFixed(2)}×, service CPU per decision ${r.serviceCpu.toFixed(2)}×`,
  );
  // Issue 24's targets: throughput at least Cerbos's (floor 0.8x) on each transport; p99 under 10 ms at half of Mandate's own saturation.
  const targets: string[] = [];
  const cerbos = by.get("cerbos");
  for (const t of ["mandate-v1", "mandate-grpc"] as const) {
    const m = by.get(t);
    if (m && cerbos) targets.push(versus(`${t} decisions/s vs Cerbos's (floor 0.8x)`, m.saturation.perSecond, cerbos.saturation.perSecond, "/s"));
    if (m) targets.push(versus(`${t} p99 at ${fmt(m.atRate.rate)}/s${Math.abs(m.atRate.rate * 2 - m.saturation.perSecond) > m.saturation.perSecond * 0.1 ? " (not half its saturation)" : ""}`, m.atRate.p99Ms, 10, "ms", false));
  }
  const ledgerLines = all.flatMap((r) =>
    r.ledger ? [`- ${r.system}: ${fmt(r.ledger.groupsPerSecond)} decision groups/s, mean ${fmt(r.ledger.meanGroupSize, 1)} decisions and ${fmt(r.ledger.meanCommitMs, 2)} ms per group commit`] : [],
  );
  const markdown = [
    `# Mandate beside OPA and Cerbos (${started.toISOString()})`,
    "",
    `${machineLine()}.${ROUNDS > 1 ? ` ${ROUNDS} rounds of every system in turn; each figure is its median over the rounds (failures: their sum).` : ""} Saturation: ${DURATION} s after ${WARMUP} s warm-up; wrk (1 thread, 32 connections) for HTTP/1.1, ghz (32 concurrent calls, one connection) for gRPC. Fixed rate: the bench's open-loop generator, latency from each request's due time, 32 HTTP/1.1 connections or one HTTP/2 connection. ${cases.length} cases in turn, the same for every system.`,
    "",
    ...table,
    "",
    "Ratios (Mandate / peer; throughput above 1 is better, p99 and CPU below 1 are):",
    "",
    ...ratioLines,
    "",
    ...(ledgerLines.length ? ["Mandate's ledger during saturation (one group commits at a time; from GET /metrics):", "", ...ledgerLines, ""] : []),
    "Targets (issue 24):",
    "",
    "```",
    ...targets,
    "```",
    "",
  ].join("\n");
  console.log(`\n${table.join("\n")}\n\nRatios (Mandate / peer):\n${ratioLines.join("\n")}\n\nTargets (issue 24):\n${targets.join("\n")}`);
  const dir = path.join(repoRoot, "bench/results");
  await mkdir(dir, { recursive: true });
  const stamp = started.toISOString().replace(/[:.]/g, "-");
  const json = JSON.stringify({ started: started.toISOString(), machine: machineLine(), durationSeconds: DURATION, warmupSeconds: WARMUP, connections: CONNECTIONS, rate, cases: cases.length, results: all, ratios, targets, ...(everyRound.length > 1 && { rounds: everyRound }) }, null, 2);
  for (const name of [`peers-${stamp}`, "peers-latest"]) {
    await writeFile(path.join(dir, `${name}.json`), json + "\n");
    await writeFile(path.join(dir, `${name}.md`), markdown);
  }
  console.log(`\nwritten: bench/results/peers-${stamp}.{json,md} and peers-latest.{json,md}`);
}
