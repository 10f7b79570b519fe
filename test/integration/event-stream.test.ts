import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { OrgCaller } from "../../src/base/caller.js";
import { MandateError } from "../../src/base/errors.js";
import { DEFAULT_EVENT_STREAM_LIMITS, EventStreams, type EventStreamLimits, type StreamItem } from "../../src/domain/event-stream.js";
import { eventId, type EventEnvelope } from "../../src/domain/events.js";
import { EvidenceLog } from "../../src/domain/evidence-log.js";
import type { EventNotifications } from "../../src/storage/events.js";
import { createDatabase, type Database } from "../../src/storage/postgres/database.js";
import { EvidenceChain } from "../../src/storage/postgres/evidence-chain.js";
import { PostgresEvidenceStore } from "../../src/storage/postgres/evidence.js";
import { PostgresEventLogStore } from "../../src/storage/postgres/events.js";
import { PostgresEventNotifications } from "../../src/storage/postgres/event-notifications.js";
import { intentDoc, newAgent, newOrgFixture, signBody, submitIntent } from "../support/agents.js";
import { sharedDatabaseUrl, startService, type TestService } from "../support/service.js";

/*
 * EventStreams (src/domain/event-stream.ts) on the real log store, with the limits turned down so
 * that what the e2e suite cannot wait for shows here: a stream whose wake-ups are all lost still
 * delivers (its own polling), a silent stream sends heartbeats, pages follow one another, a cursor
 * past the retention window is refused, and close() ends every stream.
 */

let svc: TestService;
let db: Database;
let chain: EvidenceChain;
let store: PostgresEventLogStore;

/** Notifications that never arrive: every NOTIFY lost. */
const silent: EventNotifications = { announce: () => undefined, subscribe: () => () => undefined, subscribeAll: () => () => undefined, close: async () => undefined };

beforeAll(async () => {
  svc = await startService();
  db = createDatabase(sharedDatabaseUrl(), 4);
  const log = await EvidenceLog.open(new PostgresEvidenceStore(db));
  chain = new EvidenceChain(db, () => log.keys);
  store = new PostgresEventLogStore(db);
});

afterAll(async () => {
  await db?.close();
  await svc?.close();
});

const callerOf = (organizationId: string): OrgCaller => ({ kind: "key", organizationId, identity: "key_test", permissions: new Set(["EVENTS_READ"]), clientAddress: "" });

/** A record of `kind` that projects to one event (AgentStateChanged) unless it is a decision (three). */
async function append(organizationId: string, kinds: string[], at = new Date()) {
  const payload = (kind: string) => (kind === "decision" ? { decision_id: "dec_x", agent_id: "agt_x", outcome: "ALLOW", reason: "r", intent: { action: "a" } } : { agent_id: "agt_x", from: "active", reason: "" });
  return db.transaction((tx) => chain.append(tx, kinds.map((kind, i) => ({ organizationId, kind, subjectId: `s${i}`, payload: payload(kind) })), at));
}

/** Reads a stream into arrays in the background. */
function read(stream: AsyncGenerator<StreamItem>) {
  const events: EventEnvelope[] = [];
  let heartbeats = 0;
  const ended = (async () => {
    for await (const item of stream) {
      if ("event" in item) events.push(item.event);
      else heartbeats++;
    }
  })().then(
    () => undefined,
    (err: unknown) => err,
  );
  return { events, heartbeats: () => heartbeats, ended };
}

/** Polls `probe` until true; a watchdog, not a pacing. */
async function until(what: string, probe: () => boolean): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`waited 30 s for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

function streams(limits: Partial<EventStreamLimits>, notifications: EventNotifications = silent) {
  return new EventStreams(store, notifications, { ...DEFAULT_EVENT_STREAM_LIMITS, ...limits });
}

describe("EventStreams", () => {
  it("delivers without any wake-up (every NOTIFY lost), page after page, in order", async () => {
    const { organizationId } = await svc.newOrg();
    const s = streams({ pollMs: 20, pageSize: 2 });
    const aborted = new AbortController();
    const r = read(s.watch(callerOf(organizationId), { types: [], after: "" }, aborted.signal));
    await until("the first heartbeat", () => r.heartbeats() > 0);
    const sealed = await append(organizationId, ["agent.suspended", "agent.reactivated", "decision", "agent.suspended", "agent.reactivated"]);
    await until("seven events", () => r.events.length >= 7);
    expect(r.events.map((e) => e.event_id)).toEqual([
      eventId(sealed[0]!.seq, 0, sealed[0]!.evidence_id),
      eventId(sealed[1]!.seq, 0, sealed[1]!.evidence_id),
      ...[0, 1, 2].map((i) => eventId(sealed[2]!.seq, i, sealed[2]!.evidence_id)),
      eventId(sealed[3]!.seq, 0, sealed[3]!.evidence_id),
      eventId(sealed[4]!.seq, 0, sealed[4]!.evidence_id),
    ]);
    aborted.abort();
    expect(await r.ended).toBeUndefined();
    expect(s.openStreams(organizationId)).toBe(0);
  });

  it("sends a heartbeat after each silence", async () => {
    const { organizationId } = await svc.newOrg();
    const s = streams({ heartbeatMs: 50, pollMs: 20 });
    const aborted = new AbortController();
    const r = read(s.watch(callerOf(organizationId), { types: [], after: "" }, aborted.signal));
    await until("three heartbeats", () => r.heartbeats() >= 3);
    aborted.abort();
    await r.ended;
  });

  it("resumes mid-record, and refuses a cursor past the retention window while the evidence stays", async () => {
    const { organizationId } = await svc.newOrg();
    const [old] = await append(organizationId, ["decision"], new Date(Date.now() - 8 * 86_400_000));
    const [fresh] = await append(organizationId, ["agent.suspended"]);
    const cursor = eventId(old!.seq, 1, old!.evidence_id);
    const week = streams({ retentionDays: 7 });
    const refused = await read(week.watch(callerOf(organizationId), { types: [], after: cursor }, new AbortController().signal)).ended;
    expect(refused).toBeInstanceOf(MandateError);
    expect((refused as MandateError).fieldErrors).toEqual([expect.objectContaining({ field: "after", code: "cursor_expired" })]);
    expect(week.openStreams(organizationId)).toBe(0);
    // With a longer window the same cursor is good: the old record's last event, then the rest.
    const aborted = new AbortController();
    const r = read(streams({ retentionDays: 30 }).watch(callerOf(organizationId), { types: [], after: cursor }, aborted.signal));
    await until("two events", () => r.events.length >= 2);
    expect(r.events.map((e) => e.event_id)).toEqual([eventId(old!.seq, 2, old!.evidence_id), eventId(fresh!.seq, 0, fresh!.evidence_id)]);
    aborted.abort();
    await r.ended;
  });

  it("is woken by the service's commits (ledger statements and transactions alike), polling aside", async () => {
    // Another "replica": its own listening connection, and a poll too slow to explain delivery
    // within the watchdog, so what arrives came by a wake-up announced after the service's commits.
    const replica = new PostgresEventNotifications(sharedDatabaseUrl(), { connectTimeoutMs: 3000 });
    try {
      const org = await newOrgFixture(svc);
      const s = streams({ pollMs: 600_000, heartbeatMs: 600_000 }, replica);
      const aborted = new AbortController();
      const r = read(s.watch(callerOf(org.organizationId), { types: [], after: "" }, aborted.signal));
      await until("the first heartbeat", () => r.heartbeats() > 0);
      await until("the listening connection", () => replica.listening);
      // Registration and activation commit in transactions (the chain's append).
      const agent = await newAgent(svc, org);
      await until("two AgentStateChanged", () => r.events.length >= 2);
      // A decision commits in the ledger's autocommit statement (the chain's settle).
      const decision = await submitIntent(svc, "v1", signBody(agent, intentDoc(agent.agentId)));
      expect(decision.status).toBe(200);
      await until("the decision's events", () => r.events.length >= 5);
      expect(r.events.map((e) => e.event)).toEqual(["AgentStateChanged", "AgentStateChanged", "IntentReceived", "DecisionCompleted", "ReceiptIssued"]);
      aborted.abort();
      await r.ended;
    } finally {
      await replica.close();
    }
  });

  it("ends every stream with 503 unavailable on close(), and opens none after", async () => {
    const { organizationId } = await svc.newOrg();
    const s = streams({});
    const r = read(s.watch(callerOf(organizationId), { types: [], after: "" }, new AbortController().signal));
    await until("the first heartbeat", () => r.heartbeats() > 0);
    s.close();
    const ended = await r.ended;
    expect(ended).toBeInstanceOf(MandateError);
    expect((ended as MandateError).code).toBe("unavailable");
    const late = await read(s.watch(callerOf(organizationId), { types: [], after: "" }, new AbortController().signal)).ended;
    expect((late as MandateError).code).toBe("unavailable");
    expect(s.openStreams(organizationId)).toBe(0);
  });
});
