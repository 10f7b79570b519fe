import { spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

/*
 * Shared by the suites that run Python against a live service (clients.test.ts,
 * grpc-python.test.ts, examples.test.ts): the project's Python venv and an
 * asynchronous process runner. Asynchronous on purpose: the service under test
 * runs in this very process, so a spawnSync would block it and deadlock.
 */

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** What a finished process said. */
export interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs `command` to completion (killed after `timeoutMs`) and collects its output. */
export function run(command: string, args: string[], options: { env?: Record<string, string>; cwd?: string; timeoutMs?: number } = {}): Promise<Ran> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: options.cwd ?? ROOT, env: { ...process.env, ...options.env }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 120_000);
    child.once("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, ms: Date.now() - started });
    });
  });
}

/**
 * The python of clients/python/.venv, created (client editable, with its test
 * and gRPC extras) when missing or when pyproject.toml changed; concurrent
 * callers wait on one lock (clients/python/scripts/ensure_venv.py).
 */
export async function pythonVenv(): Promise<string> {
  const res = await run("python3", [path.join(ROOT, "clients/python/scripts/ensure_venv.py")], { timeoutMs: 300_000 });
  if (res.code !== 0) throw new Error(`creating clients/python/.venv failed (${res.code}):\n${res.stdout}\n${res.stderr}`);
  if (res.stderr.trim()) console.log(`[python venv] ${res.stderr.trim()}`);
  return res.stdout.trim().split("\n").at(-1)!;
}
