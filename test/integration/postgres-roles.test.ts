import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { evidenceKeyCommand } from "../../src/cli/evidence-key.js";
import { startEmbeddedPostgres } from "../../src/storage/postgres/embedded.js";
import { SERVICE_GRANTS } from "../../src/storage/postgres/roles.js";
import {
  expectResult,
  exportEvidence,
  heartbeat,
  independentRecordCheck,
  newAgent,
  newOrgFixture,
  paymentDoc,
  publishPaymentsPolicy,
  signBody,
  submitIntent,
} from "../support/agents.js";
import { createTestDatabase, sharedDatabaseUrl, startService, type TestService } from "../support/service.js";
import { allowedCapability, expectConsumed, verify } from "../e2e/capabilities-support.js";

/*
 * Issue 19 item 4: the service connects as a role that owns nothing, is no superuser and holds
 * only the grants it needs; migrations run as the owner role (src/storage/postgres/roles.ts).
 * On the embedded cluster the service makes both roles; on an external database the operator
 * does (README, External Postgres) and gives the owner's URL in MANDATE_MIGRATION_DATABASE_URL.
 */

const cleanup: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const c of cleanup.reverse()) await c().catch(() => undefined);
});

async function dataDir(prefix: string): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), prefix));
  await chmod(dir, 0o777);
  cleanup.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

async function started(overrides: Parameters<typeof startService>[0], logs?: Record<string, unknown>[]): Promise<TestService> {
  const svc = await startService(overrides, logs ? { logs } : {});
  cleanup.push(() => svc.close());
  return svc;
}

/** The `mandate` database of the embedded cluster running in `dir`, as `user` with the password kept in `passwordFile`. */
function embeddedUrl(dir: string, user: string, passwordFile: string): string {
  // postmaster.pid: pid, data folder, start time, port, socket folder, …
  const [, , , port, socketDir] = readFileSync(path.join(dir, "postgres", "postmaster.pid"), "utf8").split("\n");
  const password = encodeURIComponent(readFileSync(path.join(dir, passwordFile), "utf8").trim());
  return socketDir ? `postgres://${user}:${password}@localhost:${port}/mandate?host=${encodeURIComponent(socketDir)}` : `postgres://${user}:${password}@127.0.0.1:${port}/mandate`;
}

async function withClient<T>(url: string, work: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** The roles of the service's own connections to `mandate` (seen by the superuser at `adminUrl`). */
async function serviceConnectionRoles(adminUrl: string): Promise<string[]> {
  return withClient(adminUrl, async (c) => {
    const { rows } = await c.query<{ usename: string }>(
      "SELECT DISTINCT usename FROM pg_stat_activity WHERE datname = 'mandate' AND backend_type = 'client backend' AND pid <> pg_backend_pid() ORDER BY 1",
    );
    return rows.map((r) => r.usename);
  });
}

/** The error `sql` fails with as the client's role, or "succeeded". */
async function refusal(c: pg.Client, sql: string): Promise<string> {
  try {
    await c.query(sql);
    return "succeeded";
  } catch (err) {
    const e = err as { code?: string; message: string };
    return `${e.code} ${e.message}`;
  }
}

/** The tables of schema public and their owners; the grants `role` holds on each. */
async function ownershipAndGrants(url: string, role: string): Promise<{ owners: Record<string, string>; grants: Record<string, string[]> }> {
  return withClient(url, async (c) => {
    const owners = await c.query<{ table: string; owner: string }>("SELECT tablename AS table, tableowner AS owner FROM pg_tables WHERE schemaname = 'public'");
    const grants = await c.query<{ table: string; privilege: string }>(
      "SELECT table_name AS table, privilege_type AS privilege FROM information_schema.role_table_grants WHERE grantee = $1 AND table_schema = 'public' ORDER BY 1, 2",
      [role],
    );
    const byTable: Record<string, string[]> = {};
    for (const g of grants.rows) (byTable[g.table] ??= []).push(g.privilege);
    return { owners: Object.fromEntries(owners.rows.map((r) => [r.table, r.owner])), grants: byTable };
  });
}

/** SERVICE_GRANTS as role_table_grants lists them (sorted). */
function expectedGrants(): Record<string, string[]> {
  return Object.fromEntries(Object.entries(SERVICE_GRANTS).map(([t, p]) => [t, [...p].sort()]));
}

/** The service serves as the restricted role: Intents decided, a capability issued and consumed, a heartbeat, a valid chain. */
async function exercise(svc: TestService): Promise<void> {
  const org = await newOrgFixture(svc);
  await publishPaymentsPolicy(svc, org);
  const agent = await newAgent(svc, org);
  const payment = await submitIntent(svc, "v1", signBody(agent, paymentDoc(agent.agentId, 500)));
  expectResult(payment, 200);
  expect(payment.body.outcome).toBe("ALLOW");
  expectResult(await heartbeat(svc, "v1", agent), 200);
  const c = await allowedCapability(svc, agent);
  expectConsumed(await verify(svc, "v1", org.apiKey, c.presentation), c);
  expectResult(await verify(svc, "v1", org.apiKey, c.presentation), 409, "capability_consumed");
  const suspended = await svc.v1("POST", `/v1/agents/${agent.agentId}/suspend`, { bearer: org.apiKey, body: {} });
  expect(suspended.status, JSON.stringify(suspended.body)).toBe(200);
  const { records, jwks } = await exportEvidence(svc, org.apiKey);
  expect(records.length).toBeGreaterThan(3);
  for (const r of records) expect(independentRecordCheck(r, jwks)).toEqual([]);
}

describe("the embedded Postgres's roles", () => {
  it("the service connects as a role that is no superuser, owns nothing and cannot rewrite history; it still serves, and rotates the evidence key", async () => {
    const dir = await dataDir("mandate-roles-");
    let svc = await started({ DATABASE_URL: undefined, MANDATE_DATA_DIR: dir, REDIS_URL: undefined });
    const adminUrl = embeddedUrl(dir, "mandate", "postgres.password");
    expect(await serviceConnectionRoles(adminUrl)).toEqual(["mandate_service"]);
    const serviceUrl = embeddedUrl(dir, "mandate_service", "postgres.service.password");
    for (const f of ["postgres.service.password", "postgres.owner.password"]) expect(readFileSync(path.join(dir, f)).length).toBeGreaterThan(30);

    await withClient(serviceUrl, async (c) => {
      const me = await c.query<{ rolsuper: boolean; rolcreaterole: boolean; rolcreatedb: boolean }>(
        "SELECT rolsuper, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = current_user",
      );
      expect(me.rows).toEqual([{ rolsuper: false, rolcreaterole: false, rolcreatedb: false }]);
      const owned = await c.query("SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relowner = (SELECT oid FROM pg_roles WHERE rolname = current_user) AND n.nspname = 'public'");
      expect(owned.rows).toEqual([]);
      const attacks = [
        "UPDATE evidence_records SET kind = kind",
        "DELETE FROM evidence_records",
        "TRUNCATE evidence_records",
        "ALTER TABLE evidence_records DISABLE TRIGGER ALL",
        "COPY evidence_records TO PROGRAM 'cat > /dev/null'",
        "DROP TABLE evidence_records",
        "DELETE FROM decisions",
        "UPDATE schema_migrations SET version = version",
        "CREATE TABLE intruder (a int)",
        "ALTER TABLE evidence_heads OWNER TO mandate_service",
      ];
      for (const sql of attacks) expect(await refusal(c, sql), sql).toMatch(/^42501 (permission denied|must be owner|must be superuser)/);
    });
    const grants = await ownershipAndGrants(adminUrl, "mandate_service");
    expect(grants.grants).toEqual(expectedGrants());
    expect(new Set(Object.values(grants.owners))).toEqual(new Set(["mandate_owner"]));

    await exercise(svc);

    // The CLI rotates the key as the service role (DATABASE_URL); a restart signs with the new key.
    const saved = process.env.DATABASE_URL;
    process.env.DATABASE_URL = serviceUrl;
    const out: string[] = [];
    try {
      expect(await evidenceKeyCommand.run(["rotate"], { out: (l) => out.push(l), err: (l) => out.push(l) })).toBe(0);
    } finally {
      if (saved === undefined) delete process.env.DATABASE_URL;
      else process.env.DATABASE_URL = saved;
    }
    const kid = /active evidence key: (\S+)/.exec(out.join("\n"))?.[1];
    expect(kid, out.join("\n")).toBeDefined();
    await svc.close();
    svc = await started({ DATABASE_URL: undefined, MANDATE_DATA_DIR: dir, REDIS_URL: undefined });
    const jwks = await svc.v1("GET", "/.well-known/jwks.json");
    expect(jwks.body.keys.map((k: { kid: string }) => k.kid)).toContain(kid);
    await exercise(svc);
  });

  it("a database migrated by earlier versions (tables owned by the superuser) moves to the owner role and gets the grants, with its data", async () => {
    const dir = await dataDir("mandate-roles-legacy-");
    // As earlier versions ran: the superuser migrates and serves.
    const cluster = await startEmbeddedPostgres(dir);
    let stopped = false;
    cleanup.push(() => (stopped ? Promise.resolve() : cluster.stop()));
    let svc = await started({ DATABASE_URL: cluster.url, MANDATE_MIGRATION_DATABASE_URL: cluster.url, REDIS_URL: undefined });
    const org = await newOrgFixture(svc);
    const agent = await newAgent(svc, org);
    const before = await exportEvidence(svc, org.apiKey);
    await svc.close();
    const legacy = await ownershipAndGrants(cluster.url, "mandate_service");
    expect(new Set(Object.values(legacy.owners))).toEqual(new Set(["mandate"]));
    await cluster.stop();
    stopped = true;

    svc = await started({ DATABASE_URL: undefined, MANDATE_DATA_DIR: dir, REDIS_URL: undefined });
    const adminUrl = embeddedUrl(dir, "mandate", "postgres.password");
    const moved = await ownershipAndGrants(adminUrl, "mandate_service");
    expect(moved.owners).toEqual(Object.fromEntries(Object.keys(legacy.owners).map((t) => [t, "mandate_owner"])));
    expect(moved.grants).toEqual(expectedGrants());
    expect(await serviceConnectionRoles(adminUrl)).toEqual(["mandate_service"]);
    // The data is there and the chain goes on.
    const after = await exportEvidence(svc, org.apiKey);
    expect(after.records.slice(0, before.records.length)).toEqual(before.records);
    const decided = await submitIntent(svc, "v1", signBody(agent, paymentDoc(agent.agentId, 10)));
    expectResult(decided, 200);
    await exercise(svc);
  });

  it("every table the migrations make has the service role's grants (src/storage/postgres/roles.ts)", async () => {
    const url = await createTestDatabase("roles");
    const svc = await started({ DATABASE_URL: url });
    await svc.close();
    const { owners } = await ownershipAndGrants(url, "nobody");
    expect(Object.keys(owners).filter((t) => t !== "schema_migrations").sort()).toEqual(Object.keys(SERVICE_GRANTS).sort());
  });
});

describe("an external Postgres with the two roles (README, External Postgres)", () => {
  it("migrates as the owner given by MANDATE_MIGRATION_DATABASE_URL and serves as DATABASE_URL's role with only its grants", async () => {
    const suffix = randomBytes(4).toString("hex");
    const owner = `ext_owner_${suffix}`;
    const service = `ext_service_${suffix}`;
    const database = `ext_${suffix}`;
    const [ownerPassword, servicePassword] = [randomBytes(16).toString("hex"), randomBytes(16).toString("hex")];
    // The README's SQL, run as an administrator.
    await withClient(sharedDatabaseUrl(), async (c) => {
      await c.query(`CREATE ROLE ${owner} LOGIN PASSWORD '${ownerPassword}'`);
      await c.query(`CREATE ROLE ${service} LOGIN PASSWORD '${servicePassword}'`);
      await c.query(`CREATE DATABASE ${database} OWNER ${owner}`);
    });
    const base = new URL(sharedDatabaseUrl());
    base.pathname = `/${database}`;
    const as = (user: string, password: string) => {
      const u = new URL(base);
      u.username = user;
      u.password = password;
      return u.toString();
    };
    await withClient(as(owner, ownerPassword), (c) => c.query(`REVOKE CREATE ON SCHEMA public FROM PUBLIC`));
    const logs: Record<string, unknown>[] = [];
    const svc = await started({ DATABASE_URL: as(service, servicePassword), MANDATE_MIGRATION_DATABASE_URL: as(owner, ownerPassword) }, logs);
    expect(logs.filter((l) => (l.level as number) >= 40)).toEqual([]);
    const { owners, grants } = await ownershipAndGrants(base.toString(), service);
    expect(new Set(Object.values(owners))).toEqual(new Set([owner]));
    expect(grants).toEqual(expectedGrants());
    await withClient(as(service, servicePassword), async (c) => {
      expect(await refusal(c, "ALTER TABLE evidence_records DISABLE TRIGGER ALL")).toMatch(/^42501 must be owner/);
      expect(await refusal(c, "DELETE FROM evidence_records")).toMatch(/^42501 permission denied/);
    });
    await exercise(svc);
  });

  it("warns when MANDATE_MIGRATION_DATABASE_URL is unset (the service's role then owns the schema)", async () => {
    const url = await createTestDatabase("roles_single");
    const logs: Record<string, unknown>[] = [];
    await started({ DATABASE_URL: url, MANDATE_MIGRATION_DATABASE_URL: undefined }, logs);
    expect(logs.filter((l) => l.level === 40).map((l) => l.msg)).toEqual([expect.stringContaining("MANDATE_MIGRATION_DATABASE_URL unset")]);
  });
});
