import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { repoRoot, serviceNodeFlags, spawnService, type ServiceProcess } from "../support/process.js";
import { createTestDatabase } from "../support/service.js";

/*
 * What an operator reads at start-up (issue 23, Operations): the "listening" line says where,
 * which version and on what storage; a start that fails names the dependency and where it was
 * looked for. Each case is a real `src/main.ts` process, as `npm start` runs it.
 */

const version = (JSON.parse(readFileSync(path.join(repoRoot, "package.json"), "utf8")) as { version: string }).version;

/** Runs the service with `env` until it exits (it must, these starts fail); its exit code and stderr. */
function failedStart(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(path.join(repoRoot, "node_modules/.bin/tsx"), [...serviceNodeFlags, "src/main.ts"], {
      cwd: repoRoot,
      env: { PATH: process.env.PATH!, HOME: process.env.HOME!, LOG_LEVEL: "warn", PORT: "0", ...env },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.once("error", reject);
    child.once("exit", (code) => resolve({ code, stderr }));
  });
}

const running: ServiceProcess[] = [];
afterAll(async () => {
  await Promise.all(running.map((s) => s.stop()));
});

describe("start-up", () => {
  it("an unreachable DATABASE_URL is named as the database, with its host:port", async () => {
    const { code, stderr } = await failedStart({ DATABASE_URL: "postgres://x@127.0.0.1:1/x" });
    expect(code).toBe(1);
    expect(stderr).toContain("mandate: could not start: the database (DATABASE_URL, 127.0.0.1:1) is unreachable: ");
    expect(stderr).toContain("ECONNREFUSED");
    expect(stderr).not.toContain("postgres://x@");
  });

  it("an unreachable MANDATE_MIGRATION_DATABASE_URL is named as the migration database", async () => {
    const { code, stderr } = await failedStart({ DATABASE_URL: await createTestDatabase("startup"), MANDATE_MIGRATION_DATABASE_URL: "postgres://owner:secret@127.0.0.1:1/x" });
    expect(code).toBe(1);
    expect(stderr).toContain("the migration database (MANDATE_MIGRATION_DATABASE_URL, 127.0.0.1:1) is unreachable");
    expect(stderr).not.toContain("secret");
  });

  it("a missing opa CLI is named with MANDATE_OPA_PATH", async () => {
    const { code, stderr } = await failedStart({ DATABASE_URL: await createTestDatabase("startup"), MANDATE_OPA_PATH: "/nonexistent/opa" });
    expect(code).toBe(1);
    expect(stderr).toContain("mandate: could not start: the opa CLI (MANDATE_OPA_PATH=/nonexistent/opa) failed: ");
  });

  it("an unusable data folder is named as the embedded Postgres's MANDATE_DATA_DIR", async () => {
    // A folder under a regular file can never be created, whoever runs the test (root included).
    const dataDir = path.join(repoRoot, "package.json", "data");
    const { code, stderr } = await failedStart({ MANDATE_DATA_DIR: dataDir });
    expect(code).toBe(1);
    expect(stderr).toContain(`mandate: could not start: the embedded Postgres (MANDATE_DATA_DIR=${dataDir}) failed: `);
  });

  it("the listening line gives the URL, version, storage and consume mode; an unreachable Redis is named, and the service serves", async () => {
    const svc = await spawnService({ PORT: "0", DATABASE_URL: await createTestDatabase("startup"), REDIS_URL: "redis://127.0.0.1:1" });
    running.push(svc);
    const entries = svc.output.flatMap((line) => {
      try {
        return [JSON.parse(line) as Record<string, unknown>];
      } catch {
        return [];
      }
    });
    const listening = entries.find((e) => e.msg === "listening")!;
    expect(listening).toMatchObject({
      port: svc.port,
      urls: [`http://127.0.0.1:${svc.port}`],
      version,
      storage: { mode: "external", database: expect.any(String) },
      consume: { mode: "redis", redis: "127.0.0.1:1" },
      events: true,
      webhooks: true,
    });
    expect(listening.summary).toBe(
      `Mandate ${version} on http://127.0.0.1:${svc.port}; storage: external Postgres at ${(listening.storage as { database: string }).database}; consume: Redis at 127.0.0.1:1; events and webhooks on`,
    );
    // The Redis report follows the listening line once its connection attempt has failed.
    const redisWarning = await waitForLine(svc, (e) => typeof e.msg === "string" && e.msg.startsWith("Redis (REDIS_URL, 127.0.0.1:1) is unreachable"));
    expect(redisWarning.level).toBe(40);
    expect((await fetch(`${svc.baseUrl}/readyz`)).status).toBe(200);
  });
});

/** The first log entry matching `match`, waiting for the process to write it. */
function waitForLine(svc: ServiceProcess, match: (e: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> {
  return new Promise((resolve) => {
    const look = (): boolean => {
      for (const line of svc.output) {
        try {
          const e = JSON.parse(line) as Record<string, unknown>;
          if (match(e)) {
            resolve(e);
            return true;
          }
        } catch {
          // not a log line
        }
      }
      return false;
    };
    if (look()) return;
    const onData = () => {
      // spawnService appends to output from its own listener, registered first.
      if (look()) {
        svc.child.stdout!.off("data", onData);
        svc.child.stderr!.off("data", onData);
      }
    };
    svc.child.stdout!.on("data", onData);
    svc.child.stderr!.on("data", onData);
  });
}
