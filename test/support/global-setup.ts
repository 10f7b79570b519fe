import { spawn, type ChildProcess } from "node:child_process";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import type { TestProject } from "vitest/node";
import { startEmbeddedPostgres } from "../../src/storage/postgres/embedded.js";

declare module "vitest" {
  /** What the global setup hands every test file (read with `inject`). */
  export interface ProvidedContext {
    /** The shared embedded Postgres's `mandate` database; apps migrate it on start. */
    databaseUrl: string;
    /** The shared throwaway redis-server. */
    redisUrl: string;
  }
}

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

/**
 * One embedded Postgres and one redis-server for the whole run, torn down at
 * the end. Each test file starts its own in-process apps against them; apps
 * migrate on start (under the advisory lock), so nothing is migrated here.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "mandate-test-"));
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
