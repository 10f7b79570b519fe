import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import net from "node:net";
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

/** The service as `npm start` runs it (src/main.ts under tsx), with exactly `env` on top of PATH and HOME. */
function runService(env: Record<string, string>): {
  child: ChildProcess;
  /** Every complete line written so far, stdout and stderr together. */
  lines: string[];
  /** Everything written to stderr so far. */
  stderr(): string;
  exited: Promise<number | null>;
  /** Resolves once a line matches `match`; rejects if the process exits first. */
  line(match: RegExp): Promise<void>;
} {
  const child = spawn(path.join(repoRoot, "node_modules/.bin/tsx"), [...serviceNodeFlags, "src/main.ts"], {
    cwd: repoRoot,
    env: { PATH: process.env.PATH!, HOME: process.env.HOME!, PORT: "0", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const lines: string[] = [];
  let stderr = "";
  const waiting: { match: RegExp; resolve(): void }[] = [];
  for (const stream of [child.stdout!, child.stderr!]) {
    let pending = "";
    stream.on("data", (d: Buffer) => {
      if (stream === child.stderr) stderr += d.toString();
      const parts = (pending + d.toString()).split("\n");
      pending = parts.pop()!;
      lines.push(...parts.filter(Boolean));
      for (const w of waiting) if (lines.some((l) => w.match.test(l))) w.resolve();
    });
  }
  const exited = new Promise<number | null>((resolve, reject) => {
    child.once("error", reject);
    child.once("exit", (code) => resolve(code));
  });
  const written = (match: RegExp) => new Promise<void>((resolve) => (lines.some((l) => match.test(l)) ? resolve() : waiting.push({ match, resolve })));
  const line = (match: RegExp) =>
    Promise.race([
      written(match),
      exited.then((code) => {
        throw new Error(`exited (${code}) before writing ${match}:\n${lines.join("\n")}`);
      }),
    ]);
  return { child, lines, stderr: () => stderr, exited, line };
}

/** Runs the service with `env` until it exits (it must, these starts fail); its exit code and stderr. */
async function failedStart(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  const svc = runService({ LOG_LEVEL: "warn", ...env });
  return { code: await svc.exited, stderr: svc.stderr() };
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

describe("a signal while starting", () => {
  /**
   * A TCP door to the test Postgres that holds its first connection until `release()`: the
   * service's start-up waits there, long after main.ts has installed its signal handlers.
   */
  async function heldDatabase(): Promise<{ url: string; held: Promise<void>; release(): void; close(): void }> {
    const real = new URL(await createTestDatabase("startup"));
    const socketDir = real.searchParams.get("host");
    const upstream = () => (socketDir?.startsWith("/") ? net.connect(path.join(socketDir, `.s.PGSQL.${real.port}`)) : net.connect(Number(real.port), real.hostname));
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let first!: () => void;
    const held = new Promise<void>((resolve) => (first = resolve));
    let connections = 0;
    const sockets = new Set<net.Socket>();
    const server = net.createServer((client) => {
      sockets.add(client);
      client.on("error", () => undefined);
      const wait = connections++ === 0 ? (first(), released) : Promise.resolve();
      void wait.then(() => {
        const pg = upstream();
        sockets.add(pg);
        pg.on("error", () => client.destroy());
        client.pipe(pg).pipe(client);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const door = new URL(real);
    door.hostname = "127.0.0.1";
    door.port = String((server.address() as net.AddressInfo).port);
    door.searchParams.delete("host");
    return {
      url: door.toString(),
      held,
      release,
      close() {
        for (const s of sockets) s.destroy();
        server.close();
      },
    };
  }

  /** The service on a held database, signalled once while starting (it has said so); close `db` after. */
  async function signalledWhileStarting(signal: NodeJS.Signals): Promise<{ db: Awaited<ReturnType<typeof heldDatabase>>; svc: ReturnType<typeof runService> }> {
    const db = await heldDatabase();
    try {
      // A long database timeout: the held connection must not fail start-up while the test signals.
      const svc = runService({ LOG_LEVEL: "info", DATABASE_URL: db.url, MANDATE_DATABASE_TIMEOUT_MS: "60000" });
      await db.held;
      svc.child.kill(signal);
      await svc.line(new RegExp(`${signal} while starting: stopping once started`));
      return { db, svc };
    } catch (err) {
      db.close();
      throw err;
    }
  }

  it("stops the service once it has started (drained, exit 0)", async () => {
    const { db, svc } = await signalledWhileStarting("SIGTERM");
    try {
      db.release();
      expect(await svc.exited, svc.lines.join("\n")).toBe(0);
      const order = ["listening", "shutting down"].map((msg) => svc.lines.findIndex((l) => l.includes(`"msg":"${msg}"`)));
      expect(order[0], svc.lines.join("\n")).toBeGreaterThanOrEqual(0);
      expect(order[1]).toBeGreaterThan(order[0]!);
    } finally {
      db.close();
    }
  });

  it("a second signal exits at once, without waiting for start-up", async () => {
    const { db, svc } = await signalledWhileStarting("SIGINT");
    try {
      svc.child.kill("SIGINT");
      // Start-up is still held at the database: only the second signal can have ended it.
      expect(await svc.exited, svc.lines.join("\n")).toBe(130);
      expect(svc.lines.some((l) => l.includes('"msg":"listening"'))).toBe(false);
    } finally {
      db.close();
    }
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
