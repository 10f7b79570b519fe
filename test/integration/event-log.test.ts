import { afterAll, beforeAll, describe, expect, it } from "vitest";
import pg from "pg";
import { EvidenceLog } from "../../src/domain/evidence-log.js";
import type { EventSourceRecord } from "../../src/storage/events.js";
import { createDatabase, type Database } from "../../src/storage/postgres/database.js";
import { EvidenceChain } from "../../src/storage/postgres/evidence-chain.js";
import { PostgresEvidenceStore } from "../../src/storage/postgres/evidence.js";
import { APPLICATION_NAME, PostgresEventNotifications } from "../../src/storage/postgres/event-notifications.js";
import { PostgresEventLogStore } from "../../src/storage/postgres/events.js";
import { sharedDatabaseUrl, startService, type TestService } from "../support/service.js";
import { deferred, waitFor } from "../support/wait.js";

/*
 * The EventLogStore and EventNotifications contracts (src/storage/events.ts) on real Postgres:
 * reads in chain order after a position, by kind, within the retention window; wake-ups announced
 * by the evidence chain after each commit, at once in the writing process and over NOTIFY in
 * another ("replica" B, its own listening connection), none for a rolled-back append, and a
 * listening connection that comes back (waking everyone) after Postgres cut it.
 */

let svc: TestService;
let db: Database;
let chain: EvidenceChain;
let store: PostgresEventLogStore;
/** The writing process's notifications (the chain announces on them) and another replica's. */
let notifications: PostgresEventNotifications;
let replica: PostgresEventNotifications;

beforeAll(async () => {
  svc = await startService();
  db = createDatabase(sharedDatabaseUrl(), 4);
  const log = await EvidenceLog.open(new PostgresEvidenceStore(db));
  notifications = new PostgresEventNotifications(sharedDatabaseUrl(), { connectTimeoutMs: 3000 });
  replica = new PostgresEventNotifications(sharedDatabaseUrl(), { connectTimeoutMs: 3000 });
  chain = new EvidenceChain(db, () => log.keys, (organizationIds) => notifications.announce(organizationIds));
  store = new PostgresEventLogStore(db);
});

afterAll(async () => {
  await notifications?.close();
  await replica?.close();
  await db?.close();
  await svc?.close();
});

async function append(organizationId: string, kinds: string[], at = new Date()) {
  return db.transaction((tx) => chain.append(tx, kinds.map((kind, i) => ({ organizationId, kind, subjectId: `s${i}`, payload: { i } })), at));
}

describe("PostgresEventLogStore", () => {
  it("reads an organization's records after a position, in order, bounded, by kind", async () => {
    const { organizationId } = await svc.newOrg();
    const before = await store.head(organizationId);
    const sealed = await append(organizationId, ["agent.registered", "decision", "capability.issued", "decision", "policy.published"]);
    expect(await store.head(organizationId)).toBe(before + 5);
    const all = await store.after(organizationId, before, new Date(0), 100);
    expect(all.map((r) => r.seq)).toEqual(sealed.map((r) => r.seq));
    const first: EventSourceRecord = all[0]!;
    expect(first).toEqual({ evidence_id: sealed[0]!.evidence_id, seq: sealed[0]!.seq, kind: "agent.registered", created_at: sealed[0]!.created_at, digest: sealed[0]!.digest, payload: { i: 0 } });
    expect((await store.after(organizationId, before, new Date(0), 2)).map((r) => r.seq)).toEqual([before + 1, before + 2]);
    expect((await store.after(organizationId, before + 2, new Date(0), 2)).map((r) => r.seq)).toEqual([before + 3, before + 4]);
    expect((await store.after(organizationId, before, new Date(0), 100, ["decision"])).map((r) => r.seq)).toEqual([before + 2, before + 4]);
    expect(await store.after(organizationId, before + 5, new Date(0), 100)).toEqual([]);
  });

  it("serves nothing older than the retention window; the evidence stays", async () => {
    const { organizationId } = await svc.newOrg();
    const old = new Date(Date.now() - 8 * 86_400_000);
    const [stale] = await append(organizationId, ["decision"], old);
    const [fresh] = await append(organizationId, ["decision"]);
    const since = new Date(Date.now() - 7 * 86_400_000);
    expect((await store.after(organizationId, 0, since, 100)).map((r) => r.evidence_id)).toEqual(expect.arrayContaining([fresh!.evidence_id]));
    expect((await store.after(organizationId, 0, since, 100)).map((r) => r.evidence_id)).not.toContain(stale!.evidence_id);
    expect(await store.position(organizationId, stale!.evidence_id)).toEqual({ seq: stale!.seq, createdAt: old });
  });

  it("finds a record's position only in its own organization", async () => {
    const a = await svc.newOrg();
    const b = await svc.newOrg();
    const [r] = await append(a.organizationId, ["decision"]);
    expect((await store.position(a.organizationId, r!.evidence_id))?.seq).toBe(r!.seq);
    expect(await store.position(b.organizationId, r!.evidence_id)).toBeNull();
    expect(await store.position(a.organizationId, "evd_00000000000000000000000000")).toBeNull();
  });
});

describe("PostgresEventNotifications", () => {
  /** Resolves on the next wake-up for `organizationId` on `on`. */
  function nextWake(on: PostgresEventNotifications, organizationId: string): Promise<void> {
    const woken = deferred();
    const off = on.subscribe(organizationId, () => {
      off();
      woken.resolve();
    });
    return woken.promise;
  }

  /** Both processes listen; connecting wakes every subscriber once, so subscribers made after it count from zero. */
  async function bothListening(): Promise<void> {
    for (const n of [notifications, replica]) {
      n.subscribe("org_nobody", () => undefined)();
      await waitFor("the listening connection", () => n.listening);
    }
  }

  it("wakes the organization's subscribers in the writing process and in another, and only them", async () => {
    await bothListening();
    const a = await svc.newOrg();
    const b = await svc.newOrg();
    let wokenB = 0;
    const offB = replica.subscribe(b.organizationId, () => wokenB++);
    const all: (string | null)[] = [];
    const offAll = replica.subscribeAll((org) => all.push(org));
    const here = nextWake(notifications, a.organizationId);
    const there = nextWake(replica, a.organizationId);
    await append(a.organizationId, ["decision", "decision"]);
    await Promise.all([here, there]);
    offB();
    offAll();
    expect(wokenB).toBe(0);
    expect(all).toContain(a.organizationId);
  });

  it("says nothing for an append that rolled back, and the writer ignores its own echo", async () => {
    await bothListening();
    const a = await svc.newOrg();
    let wokenHere = 0;
    let wokenThere = 0;
    const offHere = notifications.subscribe(a.organizationId, () => wokenHere++);
    const offThere = replica.subscribe(a.organizationId, () => wokenThere++);
    const rolledBack = db.transaction(async (tx) => {
      await chain.append(tx, [{ organizationId: a.organizationId, kind: "decision", subjectId: "s", payload: {} }]);
      throw new Error("the change failed");
    });
    await expect(rolledBack).rejects.toThrow("the change failed");
    const there = nextWake(replica, a.organizationId);
    const [committed] = await append(a.organizationId, ["decision"]);
    await there;
    // A NOTIFY sent after the writer's has reached the writer, so its echo has too (one session
    // receives notifications in commit order).
    const barrier = nextWake(notifications, "org_barrier");
    const admin = new pg.Client({ connectionString: sharedDatabaseUrl() });
    await admin.connect();
    await admin.query("SELECT pg_notify('mandate_events', 'test|org_barrier')");
    await admin.end();
    await barrier;
    offHere();
    offThere();
    expect([wokenHere, wokenThere]).toEqual([1, 1]);
    expect((await store.after(a.organizationId, 0, new Date(0), 100)).map((r) => r.seq)).toEqual([committed!.seq]);
  });

  it("reconnects after Postgres drops the listening connections, and wakes every subscriber", async () => {
    await bothListening();
    const a = await svc.newOrg();
    const admin = new pg.Client({ connectionString: sharedDatabaseUrl() });
    await admin.connect();
    try {
      const reconnected = nextWake(replica, a.organizationId);
      const { rows } = await admin.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()) t",
        [APPLICATION_NAME],
      );
      expect(rows[0]!.n).toBeGreaterThanOrEqual(2);
      // Woken without any append: what was committed meanwhile went unannounced.
      await reconnected;
      await waitFor("the writer's connection back", () => notifications.listening, { timeoutMs: 30_000 });
      const wake = nextWake(replica, a.organizationId);
      await append(a.organizationId, ["decision"]);
      await wake;
    } finally {
      await admin.end();
    }
  });
});
