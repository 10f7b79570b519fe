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
 * reads in chain order after a position, by kind, within the retention window; wake-ups from
 * migration 014's trigger at commit, none for a rolled-back append, and a listening connection
 * that comes back (waking everyone) after Postgres cut it.
 */

let svc: TestService;
let db: Database;
let chain: EvidenceChain;
let store: PostgresEventLogStore;
let notifications: PostgresEventNotifications;

beforeAll(async () => {
  svc = await startService();
  db = createDatabase(sharedDatabaseUrl(), 4);
  const log = await EvidenceLog.open(new PostgresEvidenceStore(db));
  chain = new EvidenceChain(db, () => log.keys);
  store = new PostgresEventLogStore(db);
  notifications = new PostgresEventNotifications(sharedDatabaseUrl(), { connectTimeoutMs: 3000 });
});

afterAll(async () => {
  await notifications?.close();
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
  /** Resolves on the next wake-up for `organizationId`. */
  function nextWake(organizationId: string): Promise<void> {
    const woken = deferred();
    const off = notifications.subscribe(organizationId, () => {
      off();
      woken.resolve();
    });
    return woken.promise;
  }

  it("wakes the organization's subscribers when its records commit, and only them", async () => {
    const a = await svc.newOrg();
    const b = await svc.newOrg();
    let wokenB = 0;
    const offB = notifications.subscribe(b.organizationId, () => wokenB++);
    await waitFor("the listening connection", () => notifications.listening);
    // Connecting wakes every subscriber once (whatever committed before went unannounced).
    wokenB = 0;
    const all: (string | null)[] = [];
    const offAll = notifications.subscribeAll((org) => all.push(org));
    const wake = nextWake(a.organizationId);
    await append(a.organizationId, ["decision", "decision"]);
    await wake;
    offB();
    offAll();
    expect(wokenB).toBe(0);
    expect(all).toContain(a.organizationId);
  });

  it("says nothing for an append that rolled back", async () => {
    const a = await svc.newOrg();
    await waitFor("the listening connection", () => notifications.listening);
    let woken = 0;
    const off = notifications.subscribe(a.organizationId, () => woken++);
    const rolledBack = db.transaction(async (tx) => {
      await chain.append(tx, [{ organizationId: a.organizationId, kind: "decision", subjectId: "s", payload: {} }]);
      throw new Error("the change failed");
    });
    await expect(rolledBack).rejects.toThrow("the change failed");
    // A later commit of the same organization is the barrier: notifications arrive in commit order.
    const wake = nextWake(a.organizationId);
    const [committed] = await append(a.organizationId, ["decision"]);
    await wake;
    off();
    expect(woken).toBe(1);
    expect((await store.after(a.organizationId, 0, new Date(0), 100)).map((r) => r.seq)).toEqual([committed!.seq]);
  });

  it("reconnects after Postgres drops the listening connection, and wakes every subscriber", async () => {
    const a = await svc.newOrg();
    await waitFor("the listening connection", () => notifications.listening);
    const admin = new pg.Client({ connectionString: sharedDatabaseUrl() });
    await admin.connect();
    try {
      const reconnected = nextWake(a.organizationId);
      const { rows } = await admin.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%' AND pid <> pg_backend_pid()) t",
        [APPLICATION_NAME],
      );
      expect(rows[0]!.n).toBeGreaterThanOrEqual(1);
      // Woken without any append: what was committed meanwhile went unannounced.
      await reconnected;
      const wake = nextWake(a.organizationId);
      await append(a.organizationId, ["decision"]);
      await wake;
    } finally {
      await admin.end();
    }
  });
});
