import { existsSync, readFileSync } from "node:fs";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { freePort, processesMentioning, spawnService, type ServiceProcess } from "../support/process.js";
import { createTestDatabase, createV1Client, uniqueEmail } from "../support/service.js";
import { waitFor } from "../support/wait.js";

/*
 * The service as operators run it: separate processes started by `tsx
 * src/main.ts` (what `npm start` runs). Two replicas migrate one fresh
 * database at the same time and both serve; with DATABASE_URL unset the
 * embedded Postgres is started, survives a restart with its data, and is
 * stopped on SIGTERM.
 */

const running: ServiceProcess[] = [];
const cleanup: (() => Promise<void>)[] = [];
afterAll(async () => {
  await Promise.all(running.map((p) => p.stop("SIGKILL")));
  for (const c of cleanup) await c();
});

/** The service process whose embedded Postgres runs in `dataDir`: the postmaster's parent (under the tsx wrapper). */
function serviceOwning(dataDir: string): number {
  const postmaster = Number(readFileSync(path.join(dataDir, "postgres", "postmaster.pid"), "utf8").split("\n")[0]);
  return Number(readFileSync(`/proc/${postmaster}/stat`, "utf8").split(") ")[1]!.split(" ")[1]);
}

async function track(p: Promise<ServiceProcess>): Promise<ServiceProcess> {
  const s = await p;
  running.push(s);
  return s;
}

describe("two replicas against one fresh Postgres", () => {
  it("start together (migrations under the advisory lock) and both serve", async () => {
    const databaseUrl = await createTestDatabase("replicas");
    const operatorKey = "op_replicas_test";
    const env = (port: number) => ({
      PORT: String(port),
      DATABASE_URL: databaseUrl,
      MANDATE_OPERATOR_KEY: operatorKey,
      MANDATE_SANDBOX_PER_ADDRESS_PER_HOUR: "1000",
    });
    const [portA, portB] = [await freePort(), await freePort()];
    const [a, b] = await Promise.all([track(spawnService(env(portA))), track(spawnService(env(portB)))]);
    expect([a.port, b.port]).toEqual([portA, portB]);

    // Each serves a sandbox creation; each sees the other's organization (one database).
    const [ra, rb] = await Promise.all(
      [a, b].map((s) => createV1Client(s.baseUrl)("POST", "/v1/sandbox/organizations", { body: { email: uniqueEmail("replica") } })),
    );
    expect(ra!.status, JSON.stringify(ra!.body)).toBe(200);
    expect(rb!.status, JSON.stringify(rb!.body)).toBe(200);
    const seenByA = await createV1Client(a.baseUrl)("GET", "/v1/organization", { bearer: rb!.body.api_key });
    const seenByB = await createV1Client(b.baseUrl)("GET", "/v1/organization", { bearer: ra!.body.api_key });
    expect(seenByA.body.organization_id).toBe(rb!.body.organization_id);
    expect(seenByB.body.organization_id).toBe(ra!.body.organization_id);

    // Every migration was applied exactly once, whoever applied it.
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    try {
      const { rows } = await client.query<{ version: string; n: number }>("SELECT version, count(*)::int AS n FROM schema_migrations GROUP BY version");
      expect(rows.length).toBeGreaterThan(0);
      expect(rows.filter((r) => r.n !== 1)).toEqual([]);
    } finally {
      await client.end();
    }
    const applied = [a, b].map((s) => s.output.filter((l) => l.includes('"migrations applied"')).length);
    expect(applied.reduce((x, y) => x + y), `migration logs: ${applied}`).toBeGreaterThanOrEqual(1);

    const [ea, eb] = await Promise.all([a.stop(), b.stop()]);
    expect(ea).toEqual({ code: 0, signal: null });
    expect(eb).toEqual({ code: 0, signal: null });
  });
});

describe("npm start's default: the embedded Postgres", () => {
  it("starts in MANDATE_DATA_DIR, stops on SIGTERM/SIGINT to npm, and keeps its data for the next start", async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), "mandate-embedded-"));
    await chmod(dataDir, 0o777);
    cleanup.push(() => rm(dataDir, { recursive: true, force: true }));
    const env = async () => ({ PORT: String(await freePort()), MANDATE_DATA_DIR: dataDir, MANDATE_OPERATOR_KEY: "op_embedded_test" });

    // Exactly what a user runs: `npm start` (its setup check, then the service); signals go to npm.
    const first = await track(spawnService(await env(), { via: "npm start" }));
    expect(existsSync(path.join(dataDir, "postgres", "PG_VERSION"))).toBe(true);
    expect(processesMentioning(dataDir).length, "a postgres process serves the data folder").toBeGreaterThan(0);
    const created = await createV1Client(first.baseUrl)("POST", "/v1/sandbox/organizations", { body: { email: uniqueEmail("embedded") } });
    expect(created.status, JSON.stringify(created.body)).toBe(200);

    expect(await first.stop("SIGTERM")).toEqual({ code: 0, signal: null });
    expect(processesMentioning(dataDir), "postgres still running after SIGTERM").toEqual([]);
    expect(existsSync(path.join(dataDir, "postgres", "postmaster.pid")), "postmaster.pid left behind: Postgres was not shut down cleanly").toBe(false);

    const second = await track(spawnService(await env(), { via: "npm start" }));
    const again = await createV1Client(second.baseUrl)("GET", "/v1/organization", { bearer: created.body.api_key });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(again.body).toMatchObject({ organization_id: created.body.organization_id, sandbox: true });

    const ex = await second.stop("SIGINT");
    expect(ex, second.output.slice(-30).join("\n")).toEqual({ code: 0, signal: null });
    expect(processesMentioning(dataDir)).toEqual([]);
  });
});

describe("a closed terminal (SIGHUP to the service)", () => {
  it("stops it as SIGTERM does: it shuts down, stops the embedded Postgres cleanly and exits 0", async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), "mandate-hangup-"));
    await chmod(dataDir, 0o777);
    cleanup.push(() => rm(dataDir, { recursive: true, force: true }));
    const svc = await track(spawnService({ PORT: String(await freePort()), MANDATE_DATA_DIR: dataDir, MANDATE_OPERATOR_KEY: "op_hangup_test" }));
    // A terminal's hangup reaches the service itself, not only its wrapper.
    const service = serviceOwning(dataDir);
    process.kill(service, "SIGHUP");
    await waitFor("the service to exit", () => svc.child.exitCode !== null || svc.child.signalCode !== null);
    expect(await svc.stop(), svc.output.slice(-30).join("\n")).toEqual({ code: 0, signal: null });
    expect(svc.output.some((l) => l.includes('"shutting down"') && l.includes('"SIGHUP"')), svc.output.join("\n")).toBe(true);
    expect(processesMentioning(dataDir)).toEqual([]);
    expect(existsSync(path.join(dataDir, "postgres", "postmaster.pid")), "postmaster.pid left behind").toBe(false);
  });
});

describe("after a SIGKILL, the embedded Postgres left running", () => {
  it("is recognised as this data folder's, stopped, and started again: the next start serves the same data", async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), "mandate-orphan-"));
    await chmod(dataDir, 0o777);
    cleanup.push(() => rm(dataDir, { recursive: true, force: true }));
    const env = async () => ({ PORT: String(await freePort()), MANDATE_DATA_DIR: dataDir, MANDATE_OPERATOR_KEY: "op_orphan_test" });

    const first = await track(spawnService(await env()));
    const created = await createV1Client(first.baseUrl)("POST", "/v1/sandbox/organizations", { body: { email: uniqueEmail("orphan") } });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    // The service process (the postmaster's parent, under the tsx wrapper) dies without a chance
    // to stop its Postgres, which keeps running, orphaned.
    const service = serviceOwning(dataDir);
    process.kill(service, "SIGKILL");
    await first.stop("SIGKILL");
    await waitFor("the killed service to be gone", () => !existsSync(`/proc/${service}/cmdline`) || readFileSync(`/proc/${service}/cmdline`, "utf8") === "");
    const orphans = processesMentioning(path.join(dataDir, "postgres"));
    expect(orphans.length, "the killed service's Postgres is still running").toBeGreaterThan(0);

    const second = await track(spawnService(await env()));
    expect(second.output.some((l) => l.includes("orphaned")), second.output.join("\n")).toBe(true);
    for (const o of orphans) expect(existsSync(`/proc/${o.pid}`) && processesMentioning(path.join(dataDir, "postgres")).some((p) => p.pid === o.pid), `orphan ${o.pid} still running`).toBe(false);
    const again = await createV1Client(second.baseUrl)("GET", "/v1/organization", { bearer: created.body.api_key });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(again.body.organization_id).toBe(created.body.organization_id);

    expect(await second.stop("SIGTERM")).toEqual({ code: 0, signal: null });
    expect(processesMentioning(path.join(dataDir, "postgres"))).toEqual([]);
  });

  it("names the failing part and its cause when the embedded Postgres cannot start", async () => {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), "mandate-broken-"));
    await chmod(dataDir, 0o777);
    cleanup.push(() => rm(dataDir, { recursive: true, force: true }));
    // A cluster folder that is not a cluster: initdb is skipped (PG_VERSION exists) and start fails.
    const { mkdir, writeFile } = await import("node:fs/promises");
    await mkdir(path.join(dataDir, "postgres"), { recursive: true });
    await writeFile(path.join(dataDir, "postgres", "PG_VERSION"), "18\n");
    const failed = await spawnService({ PORT: String(await freePort()), MANDATE_DATA_DIR: dataDir }).then(
      () => null,
      (err: Error) => err.message,
    );
    expect(failed).not.toBeNull();
    expect(failed).toMatch(/mandate: could not start: the embedded Postgres .*did not start: \S/);
    expect(failed).not.toMatch(/could not start: undefined/);
  });
});
