// The three systems of `npm run bench:peers`, each started alone: Mandate (the service as its own
// process on a throwaway Postgres, with an organization holding the peers policy and graph),
// `opa run --server` over the Rego module and data document, and the Cerbos PDP over the
// resource policy. Also what /proc says about a process tree: CPU time and peak RSS.
import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID, sign } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { opaPath } from "../../src/policy/opa.js";
import { createAgent, freePort, HttpClient, repoRoot, type BenchAgent, type SignedIntent } from "../support.js";
import { cerbosPolicy, intentFields, mandateGraph, mandatePolicySource, opaData, opaRego, PRINCIPALS, type PeerCase } from "./policy.js";

/** A process's stat fields after "(comm) ": ppid is the 2nd, utime and stime the 12th and 13th (clock ticks, USER_HZ 100). */
function statFields(pid: string | number): string[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(") ") + 2).split(" ");
  } catch {
    return null; // exited meanwhile
  }
}

/** CPU seconds (user + system) used so far by `root` and every process descending from it. */
export function treeCpuSeconds(root: number): number {
  const children = new Map<number, number[]>();
  const ticks = new Map<number, number>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const fields = statFields(entry);
    if (!fields) continue;
    const pid = Number(entry);
    const ppid = Number(fields[1]);
    children.set(ppid, [...(children.get(ppid) ?? []), pid]);
    ticks.set(pid, Number(fields[11]) + Number(fields[12]));
  }
  let total = 0;
  for (const stack = [root]; stack.length > 0; ) {
    const pid = stack.pop()!;
    total += ticks.get(pid) ?? 0;
    stack.push(...(children.get(pid) ?? []));
  }
  return total / 100;
}

/** The machine's CPU time so far from /proc/stat, in clock ticks: busy (all but idle and iowait) and total. */
export function machineCpuTicks(): { busy: number; total: number } {
  const fields = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1, 9).map(Number);
  const total = fields.reduce((a, b) => a + b, 0);
  return { busy: total - fields[3]! - fields[4]!, total };
}

/** Peak resident set size (VmHWM) of one process, in MiB. */
export function peakRssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? NaN) / 1024;
}

/** The postmaster of the Postgres listening on `port` (its command line holds `-p <port>`): several may run on the machine. */
export function postmasterPid(port: number): number {
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    let args: string[];
    try {
      args = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0");
    } catch {
      continue;
    }
    const p = args.indexOf("-p");
    if (path.basename(args[0] ?? "") === "postgres" && p >= 0 && args[p + 1] === String(port)) return Number(entry);
  }
  throw new Error(`no postgres process listening on port ${port}`);
}

/** Where scripts/bench-peers.sh unpacks the pinned Cerbos PDP. */
export const CERBOS_BIN = path.join(repoRoot, ".tools/cerbos/cerbos");

/** A server the bench started: where it answers, its process, how to stop it. */
export interface PeerServer {
  baseUrl: string;
  pid: number;
  stop(): Promise<void>;
}

function waitForExit(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once("exit", () => resolve());
  });
}

/** Spawns `command` and waits until GET `healthUrl` answers 200; the error carries its output when it never does. */
async function spawnServer(command: string, args: string[], baseUrl: string, healthPath: string, dir: string): Promise<PeerServer> {
  const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  const keep = (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4000));
  child.stdout!.on("data", keep);
  child.stderr!.on("data", keep);
  const spawnError = new Promise<Error>((resolve) => child.once("error", resolve));
  const stop = async () => {
    child.kill("SIGTERM");
    await waitForExit(child);
    await rm(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 30_000;
  for (;;) {
    const failed = await Promise.race([spawnError, new Promise<null>((r) => setTimeout(() => r(null), 100))]);
    if (failed) throw new Error(`${command} did not start: ${failed.message}`);
    if (child.exitCode !== null) break;
    if (await fetch(baseUrl + healthPath).then((r) => r.ok, () => false)) return { baseUrl, pid: child.pid!, stop };
    if (Date.now() > deadline) break;
  }
  await stop();
  throw new Error(`${command} ${args.join(" ")} did not become healthy:\n${output}`);
}

/** `opa run --server` (the pinned CLI) over the peers Rego module and its data document. */
export async function startOpa(): Promise<PeerServer> {
  const dir = await mkdtemp(path.join(tmpdir(), "mandate-peers-opa-"));
  await writeFile(path.join(dir, "peers.rego"), opaRego);
  await writeFile(path.join(dir, "data.json"), JSON.stringify(opaData()));
  const port = await freePort();
  return spawnServer(opaPath(), ["run", "--server", "--addr", `127.0.0.1:${port}`, "--log-level", "error", dir], `http://127.0.0.1:${port}`, "/health", dir);
}

/** The Cerbos PDP (`cerbosBin`) over the peers resource policy, audit off, policies read once from disk. */
export async function startCerbos(cerbosBin: string): Promise<PeerServer> {
  const dir = await mkdtemp(path.join(tmpdir(), "mandate-peers-cerbos-"));
  await mkdir(path.join(dir, "policies"));
  await writeFile(path.join(dir, "policies", "intent.yaml"), cerbosPolicy());
  const [httpPort, grpcPort] = [await freePort(), await freePort()];
  const config = {
    server: { httpListenAddr: `127.0.0.1:${httpPort}`, grpcListenAddr: `127.0.0.1:${grpcPort}` },
    storage: { driver: "disk", disk: { directory: path.join(dir, "policies"), watchForChanges: false } },
    audit: { enabled: false },
  };
  await writeFile(path.join(dir, "config.yaml"), JSON.stringify(config));
  return spawnServer(cerbosBin, ["server", `--config=${path.join(dir, "config.yaml")}`, "--log-level=error"], `http://127.0.0.1:${httpPort}`, "/_cerbos/health", dir);
}

/**
 * An organization with the peers policy and graph published (authored by its key, approved and
 * published by a second, as the four-eyes rule requires), the 1,000 principals, and one active
 * agent acting for each of `acting`: the agent for a principal, by external_ref.
 */
export async function setUpMandateOrg(client: HttpClient, operatorKey: string, acting: readonly string[]): Promise<Map<string, BenchAgent>> {
  const org = await client.json("POST", "/v1/organizations", { name: `peers bench ${randomUUID().slice(0, 6)}` }, undefined, { "x-service-operator-key": operatorKey });
  const approver = await client.json("POST", "/v1/organization/api-keys", { name: "approver", permissions: ["POLICY_APPROVER"] }, org.api_key);
  const principalIds = new Map<string, string>();
  for (let i = 0; i < PRINCIPALS.length; i += 32) {
    await Promise.all(
      PRINCIPALS.slice(i, i + 32).map(async (ref) => {
        const p = await client.json("POST", "/v1/principals", { display_name: `Peer ${ref}`, kind: "person", external_ref: ref }, org.api_key);
        principalIds.set(ref, p.principal_id);
      }),
    );
  }
  const steps: [string, object, string][] = [
    ["/v1/policies", { policy_key: "payments", description: "Vendor payments within delegated authority (peers bench).", source: mandatePolicySource }, org.api_key],
    ["/v1/policies/payments/versions/1/submit", {}, org.api_key],
    ["/v1/policies/payments/versions/1/approve", {}, approver.api_key],
    ["/v1/policies/payments/versions/1/publish", {}, approver.api_key],
    ["/v1/authority-graph/versions", { graph: mandateGraph() }, org.api_key],
    ["/v1/authority-graph/versions/1/approve", {}, approver.api_key],
    ["/v1/authority-graph/versions/1/publish", {}, approver.api_key],
  ];
  for (const [route, body, bearer] of steps) await client.json("POST", route, body, bearer);
  const agents = new Map<string, BenchAgent>();
  await Promise.all(acting.map(async (ref, a) => agents.set(ref, await createAgent(client, org, principalIds.get(ref)!, `peers-${a}`))));
  return agents;
}

/** Case `c` as an Intent of `agent` (the one acting for c.principal), with a fresh nonce, signed; sign right before use (±300 s window). */
export function signCase(agent: BenchAgent, c: PeerCase, requestedAt = new Date().toISOString()): SignedIntent {
  const bytes = Buffer.from(JSON.stringify({ agent_id: agent.agentId, ...intentFields(c), requested_at: requestedAt, nonce: randomUUID() }));
  return { agent, bytes, keyId: agent.certificateId, signature: sign(null, bytes, agent.privateKey).toString("base64") };
}
