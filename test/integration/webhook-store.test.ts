import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Database } from "../../src/storage/postgres/database.js";
import { EvidenceChain } from "../../src/storage/postgres/evidence-chain.js";
import { PostgresWebhookStore } from "../../src/storage/postgres/webhooks.js";
import type { CursorAdvance, NewDelivery } from "../../src/storage/webhooks.js";
import { newOrganizations, storeDatabase } from "../support/stores.js";
import { deferred, waitFor } from "../support/wait.js";

/*
 * The WebhookStore contract (src/storage/webhooks.ts) on real Postgres, where the database makes
 * every decision two replicas could race on: the per-organization limit, a claimed cursor skipped
 * by a second enqueuer, one delivery per (webhook, event), the in-flight bound under concurrent
 * leases, results recorded only under the current lease, one webhook.failing record per change to
 * failing, deleted webhooks never leased, and trimming. No service runs on this database while the
 * store is exercised, so nothing else leases.
 */

let db: Database;
let store: PostgresWebhookStore;
let chain: EvidenceChain;
const orgs: string[] = [];

beforeAll(async () => {
  const made = await storeDatabase("webhook_store", (svc) => newOrganizations(svc, 10));
  ({ db, chain } = made);
  orgs.push(...made.fixtures);
  store = new PostgresWebhookStore(db, chain);
});

afterAll(async () => {
  await db?.close();
});

let n = 0;
const hook = (organizationId: string, events: string[] = []) => ({
  webhook_id: `whk_test${String(++n).padStart(22, "0")}`,
  organization_id: organizationId,
  url: "http://127.0.0.1:9/hook",
  events,
  description: "",
  secret: "whsec_dGVzdA==",
});
const delivery = (seq: number, i = 0): NewDelivery => ({
  delivery_id: `msg_${seq}_${i}_${++n}`,
  event_id: `evt_${String(seq).padStart(16, "0")}_${i}_x`,
  event: "AgentStateChanged",
  occurred_at: new Date(),
  body: JSON.stringify({ seq, i }),
});

/** Appends `count` records to the organization's chain (moving its head past its cursors). */
async function record(organizationId: string, count = 1): Promise<void> {
  await db.transaction((tx) => chain.append(tx, Array.from({ length: count }, () => ({ organizationId, kind: "test.record", subjectId: "s", payload: {} }))));
}

/** Records something, then enqueues deliveries `seqs` for every claimed webhook of the organization, moving each cursor to the head. */
async function enqueueAll(organizationId: string, seqs: number[]): Promise<number> {
  await record(organizationId);
  return store.enqueue(organizationId, async (claimed, head) => claimed.map((c): CursorAdvance => ({ webhook_id: c.webhook_id, cursor_seq: head, deliveries: seqs.map((s) => delivery(s)) })));
}

describe("PostgresWebhookStore", () => {
  it("starts a webhook's cursor at its organization's head, and never passes the per-organization limit under concurrent creations", async () => {
    const org = orgs[0]!;
    await record(org);
    const head = (await db.pool.query<{ seq: number }>("SELECT seq FROM evidence_heads WHERE organization_id = $1", [org])).rows[0]!.seq;
    const made = await Promise.all(Array.from({ length: 6 }, () => store.create(hook(org), 3)));
    expect(made.filter((m) => m !== null)).toHaveLength(3);
    const cursors = await db.pool.query<{ cursor_seq: number }>("SELECT cursor_seq FROM webhook_cursors WHERE organization_id = $1", [org]);
    expect(cursors.rows.map((r) => r.cursor_seq)).toEqual([head, head, head]);
    expect(await store.behind()).not.toContain(org);
  });

  it("lets one enqueuer at a time claim a cursor (the other skips it), hands it the head, and keeps one delivery per webhook and event", async () => {
    const org = orgs[1]!;
    const w = (await store.create(hook(org), 10))!;
    // Nothing recorded since the webhook was made: nothing to plan.
    expect(await store.enqueue(org, async () => expect.unreachable("plan called with the cursor at the head"))).toBe(0);
    await record(org, 2);
    const holding = deferred();
    const claimedFirst = deferred();
    let planned: { from: number; head: number } | undefined;
    const first = store.enqueue(org, async (claimed, head) => {
      planned = { from: claimed[0]!.cursor_seq, head };
      claimedFirst.resolve();
      await holding.promise;
      return claimed.map((c) => ({ webhook_id: c.webhook_id, cursor_seq: head, deliveries: [delivery(1), delivery(2)] }));
    });
    await claimedFirst.promise;
    expect(planned!.head).toBe(planned!.from + 2);
    let secondCalled = false;
    const second = await store.enqueue(org, async () => {
      secondCalled = true;
      return [];
    });
    expect(second).toBe(0);
    // It never saw the claimed cursor: plan is not even called when nothing could be claimed.
    expect(secondCalled).toBe(false);
    holding.resolve();
    expect(await first).toBe(2);
    // The same events again (a replica that read an old cursor): nothing new, the cursor does not go back.
    await record(org);
    expect(await store.enqueue(org, async () => [{ webhook_id: w.webhook_id, cursor_seq: planned!.from, deliveries: [delivery(1), delivery(2)] }])).toBe(0);
    const rows = await db.pool.query<{ cursor_seq: number }>("SELECT cursor_seq FROM webhook_cursors WHERE webhook_id = $1", [w.webhook_id]);
    expect(rows.rows[0]!.cursor_seq).toBe(planned!.head);
    expect(await store.deliveries(org, w.webhook_id, 10)).toHaveLength(2);
    // Leasing is over every organization: this test's deliveries must not be leased by the next ones.
    await store.delete(org, w.webhook_id);
  });

  it("leases each webhook's oldest due deliveries, never more than the in-flight bound across concurrent leasers, and records only under the current lease", async () => {
    const org = orgs[2]!;
    const w = (await store.create(hook(org), 10))!;
    await enqueueAll(org, [1, 2, 3, 4, 5, 6, 7, 8]);
    const leases = await Promise.all(Array.from({ length: 4 }, () => store.lease(10, 60_000, 3, 1000)));
    const leased = leases.flat();
    expect(leased.map((d) => d.event_id).sort()).toEqual([1, 2, 3].map((s) => `evt_${String(s).padStart(16, "0")}_0_x`));
    expect(leased.every((d) => d.url === "http://127.0.0.1:9/hook" && d.secret === "whsec_dGVzdA==" && d.organization_id === org)).toBe(true);
    expect(await store.lease(10, 60_000, 3, 1000)).toEqual([]);
    const attempt = { attempted_at: new Date().toISOString(), status: 200, latency_ms: 3, error: "" };
    // Under another lease id: nothing recorded.
    expect(await store.record(leased[0]!.delivery_id, "not-the-lease", attempt, { kind: "delivered" })).toBe(false);
    expect(await store.record(leased[0]!.delivery_id, leased[0]!.lease_id, attempt, { kind: "delivered" })).toBe(true);
    expect(await store.record(leased[0]!.delivery_id, leased[0]!.lease_id, attempt, { kind: "delivered" })).toBe(false);
    // One slot free: the next oldest goes.
    const next = await store.lease(10, 60_000, 3, 1000);
    expect(next.map((d) => d.event_id)).toEqual([`evt_${String(4).padStart(16, "0")}_0_x`]);
    const listed = await store.deliveries(org, w.webhook_id, 100);
    const done = listed.find((d) => d.delivery_id === leased[0]!.delivery_id)!;
    expect(done).toMatchObject({ state: "delivered", next_attempt_at: null, attempts: [attempt] });
    await store.delete(org, w.webhook_id);
  });

  it("hands a lapsed lease to the next leaser; the first holder's late result is not recorded", async () => {
    const org = orgs[3]!;
    const w = (await store.create(hook(org), 10))!;
    await enqueueAll(org, [1]);
    const [held] = await store.lease(10, 1, 1, 1000);
    const [taken] = await waitFor("the lease to lapse", async () => {
      const l = await store.lease(10, 60_000, 1, 1000);
      return l.length > 0 && l;
    });
    expect(taken!.delivery_id).toBe(held!.delivery_id);
    expect(taken!.lease_id).not.toBe(held!.lease_id);
    const attempt = { attempted_at: new Date().toISOString(), status: 500, latency_ms: 1, error: "HTTP 500" };
    expect(await store.record(held!.delivery_id, held!.lease_id, attempt, { kind: "retry", at: new Date() })).toBe(false);
    expect(await store.record(taken!.delivery_id, taken!.lease_id, attempt, { kind: "retry", at: new Date(Date.now() + 3_600_000) })).toBe(true);
    // Not due for an hour.
    expect(await store.lease(10, 60_000, 1, 1000)).toEqual([]);
    await store.delete(org, w.webhook_id);
  });

  it("marks the webhook failing and appends webhook.failing once per change from active; a delivery that gets through, or a rotation, makes it active", async () => {
    const org = orgs[4]!;
    const w = (await store.create(hook(org), 10))!;
    await enqueueAll(org, [1, 2]);
    const failed = { attempted_at: new Date().toISOString(), status: 503, latency_ms: 1, error: "HTTP 503" };
    const evidence = (eventId: string) => ({ organizationId: org, kind: "webhook.failing", subjectId: w.webhook_id, payload: { webhook_id: w.webhook_id, event_id: eventId, attempts: 8 } });
    const count = async () => (await db.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM evidence_records WHERE organization_id = $1 AND kind = 'webhook.failing'", [org])).rows[0]!.n;
    for (const d of await store.lease(10, 60_000, 2, 1000)) expect(await store.record(d.delivery_id, d.lease_id, failed, { kind: "failed", evidence: evidence(d.event_id) })).toBe(true);
    expect(await count()).toBe(1);
    expect((await store.get(org, w.webhook_id))!.state).toBe("failing");
    expect((await store.deliveries(org, w.webhook_id, 10)).map((d) => d.state)).toEqual(["failed", "failed"]);
    // The endpoint is back: the next delivery that gets through makes the webhook active, so its next outage is told again.
    await enqueueAll(org, [3]);
    const delivered = { attempted_at: new Date().toISOString(), status: 200, latency_ms: 1, error: "" };
    for (const d of await store.lease(10, 60_000, 2, 1000)) expect(await store.record(d.delivery_id, d.lease_id, delivered, { kind: "delivered" })).toBe(true);
    expect((await store.get(org, w.webhook_id))!.state).toBe("active");
    await enqueueAll(org, [4]);
    for (const d of await store.lease(10, 60_000, 2, 1000)) expect(await store.record(d.delivery_id, d.lease_id, failed, { kind: "failed", evidence: evidence(d.event_id) })).toBe(true);
    expect(await count()).toBe(2);
    expect((await store.get(org, w.webhook_id))!.state).toBe("failing");
    expect((await store.rotateSecret(org, w.webhook_id, "whsec_bmV3"))!).toMatchObject({ state: "active", secret: "whsec_bmV3" });
    expect(await store.rotateSecret(orgs[5]!, w.webhook_id, "whsec_eA==")).toBeNull();
  });

  it("redelivers a finished delivery once, outside the schedule; never leases a deleted webhook's deliveries; trims old finished rows, never pending ones", async () => {
    const org = orgs[6]!;
    const w = (await store.create(hook(org), 10))!;
    await enqueueAll(org, [1]);
    const [d] = await store.lease(10, 60_000, 1, 1000);
    const attempt = { attempted_at: new Date().toISOString(), status: 200, latency_ms: 1, error: "" };
    await store.record(d!.delivery_id, d!.lease_id, attempt, { kind: "delivered" });
    expect(await store.redeliver(orgs[7]!, w.webhook_id, d!.delivery_id)).toBeNull();
    expect(await store.redeliver(org, w.webhook_id, d!.delivery_id)).toMatchObject({ state: "pending" });
    const [again] = await store.lease(10, 60_000, 1, 1000);
    expect(again).toMatchObject({ delivery_id: d!.delivery_id, redelivery: true, scheduled_attempts: 1 });
    await store.record(again!.delivery_id, again!.lease_id, attempt, { kind: "delivered" });
    expect((await store.deliveries(org, w.webhook_id, 10))[0]!.attempts).toHaveLength(2);

    await enqueueAll(org, [2]);
    expect(await store.delete(org, w.webhook_id)).toBe(true);
    expect(await store.delete(org, w.webhook_id)).toBe(false);
    expect((await store.lease(100, 60_000, 10, 1000)).filter((l) => l.webhook_id === w.webhook_id)).toEqual([]);
    expect(await store.get(org, w.webhook_id)).toBeNull();

    const total = async (states: string[]) => (await db.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM webhook_deliveries WHERE state = ANY($1)", [states])).rows[0]!.n;
    const [finished, pending] = [await total(["delivered", "failed"]), await total(["pending"])];
    expect(pending).toBeGreaterThan(0);
    expect(await store.trim(new Date(Date.now() - 86_400_000), 1000)).toBe(0);
    expect(await store.trim(new Date(Date.now() + 60_000), 2)).toBe(2);
    expect(await total(["delivered", "failed"])).toBe(finished - 2);
    // However old, a delivery still retrying is never trimmed: only finished ones go.
    expect(await store.trim(new Date(Date.now() + 60_000), 1000)).toBe(finished - 2);
    expect(await total(["delivered", "failed"])).toBe(0);
    expect(await total(["pending"])).toBe(pending);
  });

  it("never leases more of one organization than its bound, over its webhooks and concurrent leasers, and another organization's due delivery still goes", async () => {
    const [a, b] = [orgs[8]!, orgs[9]!];
    for (let i = 0; i < 3; i++) await store.create(hook(a), 10);
    const other = (await store.create(hook(b), 10))!;
    await enqueueAll(a, [1, 2, 3, 4]);
    await enqueueAll(b, [1]);
    const leased = (await Promise.all(Array.from({ length: 3 }, () => store.lease(100, 60_000, 4, 5)))).flat();
    const ofA = leased.filter((d) => d.organization_id === a);
    // Twelve due (three webhooks, four each, each webhook's bound 4), five leased: the organization's bound.
    expect(ofA).toHaveLength(5);
    expect(leased.filter((d) => d.organization_id === b).map((d) => d.webhook_id)).toEqual([other.webhook_id]);
    expect((await store.lease(100, 60_000, 4, 5)).filter((d) => d.organization_id === a)).toEqual([]);
    // One of A's finished: exactly one more of A's goes.
    const attempt = { attempted_at: new Date().toISOString(), status: 200, latency_ms: 1, error: "" };
    expect(await store.record(ofA[0]!.delivery_id, ofA[0]!.lease_id, attempt, { kind: "delivered" })).toBe(true);
    expect((await store.lease(100, 60_000, 4, 5)).filter((d) => d.organization_id === a)).toHaveLength(1);
  });
});
