import { spawn, type ChildProcess } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { SERVICE_NODE_FLAGS } from "../../src/cli/serve.js";

/** The repository root. */
export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** The node flags the service runs with (`npm start`, `mandate serve`): the tests and the bench start it the same way. */
export const serviceNodeFlags: readonly string[] = SERVICE_NODE_FLAGS;

/** A free TCP port on loopback (the tiny race before it is bound is acceptable for tests). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** A service started as `npm start` starts it (its node flags, its own process), from source or through `npm start` itself. */
export interface ServiceProcess {
  child: ChildProcess;
  port: number;
  baseUrl: string;
  /** Every log line so far (pino JSON, or raw text). */
  output: string[];
  /** Sends SIGTERM and resolves with the exit code and signal. */
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Spawns `tsx <serviceNodeFlags> src/main.ts` (the source of what `npm start` runs), `npm start`
 * itself (setup check and build, then the service; signals go to npm), or a given command (an
 * installed `mandate serve`), with exactly `env` on
 * top of PATH/HOME, and resolves once it logs "listening". DATABASE_URL, REDIS_URL
 * and friends are only set when given: nothing leaks from the test's environment.
 */
export async function spawnService(
  env: Record<string, string>,
  options: { via?: "tsx" | "npm start" | { command: string; args: string[]; cwd: string }; timeoutMs?: number } = {},
): Promise<ServiceProcess> {
  const timeoutMs = options.timeoutMs ?? 90_000;
  const base: Record<string, string> = {};
  for (const k of ["PATH", "HOME", "TMPDIR", "LANG", "USER"]) if (process.env[k] !== undefined) base[k] = process.env[k]!;
  const via = options.via ?? "tsx";
  const [command, args, cwd] =
    via === "npm start"
      ? ["npm", ["start", "--silent"], repoRoot]
      : via === "tsx"
        ? [path.join(repoRoot, "node_modules/.bin/tsx"), [...serviceNodeFlags, "src/main.ts"], repoRoot]
        : [via.command, via.args, via.cwd];
  const child = spawn(command, args, {
    cwd,
    env: { ...base, LOG_LEVEL: "info", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const output: string[] = [];
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no "listening" within ${timeoutMs} ms:\n${output.join("\n")}`)), timeoutMs);
    let pending = "";
    const onData = (chunk: Buffer) => {
      pending += chunk.toString();
      const lines = pending.split("\n");
      pending = lines.pop()!;
      for (const line of lines) {
        output.push(line);
        try {
          const entry = JSON.parse(line) as { msg?: string; port?: number };
          if (entry.msg === "listening" && typeof entry.port === "number") {
            clearTimeout(timer);
            resolve(entry.port);
          }
        } catch {
          // Not a log line (a stack trace, npm noise): kept in output for the failure message.
        }
      }
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`exited (${code ?? signal}) before listening:\n${output.join("\n")}${pending}`));
    });
  });
  return {
    child,
    port,
    baseUrl: `http://127.0.0.1:${port}`,
    output,
    async stop(signal = "SIGTERM") {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

/** Processes (pid and command line) whose command line mentions `needle`, e.g. a data folder. */
export function processesMentioning(needle: string): { pid: number; cmdline: string }[] {
  const found: { pid: number; cmdline: string }[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, "utf8").replace(/\0/g, " ").trim();
      if (cmdline.includes(needle)) found.push({ pid: Number(entry), cmdline });
    } catch {
      // The process ended while we looked.
    }
  }
  return found;
}
