import http from "node:http";
import http2 from "node:http2";
import { randomUUID } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ReconciliationService } from "../../src/gen/mandate/v1alpha/execution_pb.js";
import { EventService, type Event } from "../../src/gen/mandate/v1alpha/events_pb.js";
import { ErrorDetailSchema } from "../../src/gen/mandate/v1/errors_pb.js";
import { intentDoc, newAgent, newApiKey, newOrgFixture, paymentDoc, publishPaymentsPolicy, signBody, submitIntent, type OrgFixture, type TestAgent } from "../support/agents.js";
import { startService, type TestService } from "../support/service.js";
import { waitFor } from "../support/wait.js";

/*
 * The live event stream (docs/events.md) end to end: real actions through the API produce the
 * taxonomy's events, which arrive in order over gRPC WatchEvents and over Server-Sent Events; a
 * consumer that disconnects resumes with its cursor and sees every event exactly once; filters,
 * refusals (403, 422, 429), a refused Intent that leaves no event, and streams that outlive the
 * request deadlines and end when the service shuts down.
 */

/** The spec's envelope, as both transports deliver it. */
interface Envelope {
  event: string;
  event_id: string;
  occurred_at: string;
  data: Record<string, unknown>;
}

/** How long any wait in this file may take: a watchdog on a loaded machine, never a pacing. */
const WATCHDOG_MS = 30_000;

/** A stream being read: the events so far, and waits on them. */
interface Watch {
  events: Envelope[];
  heartbeats: number;
  /** Resolves once `predicate` holds of the events received (rejects when the stream fails first or the watchdog fires). */
  until(what: string, predicate: (events: Envelope[]) => boolean): Promise<Envelope[]>;
  /** Resolves once the stream listens (its first heartbeat arrived). */
  listening(): Promise<void>;
  /** The stream's end: undefined when it ended cleanly, else its error. */
  ended: Promise<unknown>;
  /** Disconnects. */
  close(): void;
}

function collector(): { watch: Omit<Watch, "ended" | "close">; push(e: Envelope): void; beat(): void; fail(err: unknown): void } {
  const waiters = new Set<() => void>();
  let failure: unknown;
  let failed = false;
  const notify = () => {
    for (const w of [...waiters]) w();
  };
  const watch = {
    events: [] as Envelope[],
    heartbeats: 0,
    until(what: string, predicate: (events: Envelope[]) => boolean): Promise<Envelope[]> {
      return new Promise<Envelope[]>((resolve, reject) => {
        const check = () => {
          if (predicate(watch.events)) done(() => resolve(watch.events));
          else if (failed) done(() => reject(new Error(`stream ended before ${what}: ${String(failure)}; got ${watch.events.map((e) => e.event).join(",")}`)));
        };
        const timer = setTimeout(() => done(() => reject(new Error(`waited ${WATCHDOG_MS} ms for ${what}; got ${watch.events.map((e) => e.event).join(",")}`))), WATCHDOG_MS);
        const done = (settle: () => void) => {
          clearTimeout(timer);
          waiters.delete(check);
          settle();
        };
        waiters.add(check);
        check();
      });
    },
    listening(): Promise<void> {
      return watch.until("the first heartbeat", () => watch.heartbeats > 0).then(() => undefined);
    },
  };
  return {
    watch,
    push: (e) => {
      watch.events.push(e);
      notify();
    },
    beat: () => {
      watch.heartbeats++;
      notify();
    },
    fail: (err) => {
      failed = true;
      failure = err;
      notify();
    },
  };
}

function envelopeOf(e: Event): Envelope {
  return { event: e.event, event_id: e.eventId, occurred_at: timestampDate(e.occurredAt!).toISOString(), data: e.data as Record<string, unknown> };
}

let svc: TestService;

/** WatchEvents over gRPC (HTTP/2), as `apiKey`'s bearer, or with `headers` instead (the operator's). */
function grpcWatch(s: TestService, apiKey: string, request: { types?: string[]; after?: string } = {}, headers: Record<string, string> = { authorization: `Bearer ${apiKey}` }): Watch {
  const c = collector();
  const aborted = new AbortController();
  const ended = (async () => {
    try {
      for await (const e of s.grpc(EventService).watchEvents({ types: request.types ?? [], after: request.after ?? "" }, { headers, signal: aborted.signal })) {
        if (e.heartbeatAt) c.beat();
        else c.push(envelopeOf(e));
      }
      c.fail("ended");
      return undefined;
    } catch (err) {
      c.fail(err);
      return err;
    }
  })();
  return { ...c.watch, ended, close: () => aborted.abort() };
}

/** An SSE answer refused before streaming. */
interface Refusal {
  status: number;
  body: { detail: string; errors?: { field: string; code: string }[] };
}

/** GET /v1alpha/events:watch as Server-Sent Events; `refused` resolves with a non-200 answer instead. */
function sseWatch(s: TestService, apiKey: string, query = "", headers: Record<string, string> = {}): Watch & { refused: Promise<Refusal>; contentType: Promise<string> } {
  const c = collector();
  let refuse!: (r: Refusal) => void;
  const refused = new Promise<Refusal>((r) => (refuse = r));
  let type!: (t: string) => void;
  const contentType = new Promise<string>((r) => (type = r));
  let req!: http.ClientRequest;
  const ended = new Promise<unknown>((resolve) => {
    req = http.get({ host: "127.0.0.1", port: s.port, path: `/v1alpha/events:watch${query}`, headers: { authorization: `Bearer ${apiKey}`, ...headers } }, (res) => {
      type(String(res.headers["content-type"]));
      let text = "";
      res.setEncoding("utf8");
      if (res.statusCode !== 200) {
        res.on("data", (chunk: string) => (text += chunk));
        res.on("end", () => {
          refuse({ status: res.statusCode!, body: JSON.parse(text) });
          c.fail(`status ${res.statusCode}`);
          resolve(new Error(`status ${res.statusCode}`));
        });
        return;
      }
      res.on("data", (chunk: string) => {
        text += chunk;
        for (let end = text.indexOf("\n\n"); end >= 0; end = text.indexOf("\n\n")) {
          const block = text.slice(0, end);
          text = text.slice(end + 2);
          if (block.startsWith(": heartbeat ")) {
            c.beat();
            continue;
          }
          const fields = Object.fromEntries(block.split("\n").map((line) => [line.slice(0, line.indexOf(":")), line.slice(line.indexOf(":") + 2)]));
          const envelope = JSON.parse(fields.data!) as Envelope;
          // The SSE id and event name are the envelope's own.
          expect(fields.id).toBe(envelope.event_id);
          expect(fields.event).toBe(envelope.event);
          c.push(envelope);
        }
      });
      res.on("end", () => {
        c.fail("ended");
        resolve(undefined);
      });
      res.on("error", (err) => {
        c.fail(err);
        resolve(err);
      });
    });
    req.on("error", (err) => {
      c.fail(err);
      resolve(err);
    });
  });
  return { ...c.watch, ended, refused, contentType, close: () => req.destroy() };
}

/** The ConnectError a refused gRPC stream ended with, and its detail code. */
async function refusal(w: Watch): Promise<{ code: Code; detail: string | undefined; fields: string[] }> {
  const err = ConnectError.from(await w.ended);
  const [d] = err.findDetails(ErrorDetailSchema);
  return { code: err.code, detail: d?.detail, fields: d?.errors.map((e) => e.field) ?? [] };
}

beforeAll(async () => {
  svc = await startService();
});

afterAll(async () => {
  await svc?.close();
});

/** Sends a signed Intent over /v1 and returns its decision. */
async function intent(agent: TestAgent, doc: Record<string, unknown>): Promise<{ status: number; body: any }> {
  const res = await submitIntent(svc, "v1", signBody(agent, doc));
  return { status: res.status, body: res.body };
}

describe("WatchEvents: every event of the taxonomy the API can trigger", () => {
  let org: OrgFixture;
  const grpcStreams: Watch[] = [];

  beforeAll(async () => {
    org = await newOrgFixture(svc);
  });

  afterAll(() => {
    for (const w of grpcStreams) w.close();
  });

  it("arrives over gRPC and over SSE, in order, the same envelopes, and nothing for a refused Intent", async () => {
    const grpc = grpcWatch(svc, org.apiKey);
    grpcStreams.push(grpc);
    const sse = sseWatch(svc, org.apiKey);
    await Promise.all([grpc.listening(), sse.listening()]);
    expect(await sse.contentType).toBe("text/event-stream; charset=utf-8");

    await publishPaymentsPolicy(svc, org); // PolicyPublished, AuthorityGraphUpdated
    const agent = await newAgent(svc, org); // AgentStateChanged ×2 (register, activate)
    // Another organization's changes are never in this organization's stream.
    const stranger = await newOrgFixture(svc);
    const strangerAgent = await newAgent(svc, stranger);
    expect((await intent(strangerAgent, intentDoc(strangerAgent.agentId))).status).toBe(200);
    const allowDoc = paymentDoc(agent.agentId, 500);
    const allow = await intent(agent, allowDoc);
    const deny = await intent(agent, paymentDoc(agent.agentId, 60_000));
    const review = await intent(agent, paymentDoc(agent.agentId, 2_000));
    expect([allow.body.outcome, deny.body.outcome, review.body.outcome]).toEqual(["ALLOW", "DENY", "HUMAN_REVIEW"]);
    // Refused and replayed Intents record nothing new: the same nonce with another body rolls
    // back (409), the same bytes again answer the original decision.
    expect((await intent(agent, { ...allowDoc, amount: 501 })).status).toBe(409);
    const replay = await submitIntent(svc, "v1", signBody(agent, allowDoc));
    expect(replay.body.decision_id).toBe(allow.body.decision_id);
    const resolved = await svc.v1("POST", `/v1/decisions/${review.body.decision_id}/review`, { bearer: org.apiKey, body: { resolution: "approved", reason: "checked the invoice" } });
    expect(resolved.status).toBe(200);
    for (const op of ["suspend", "reactivate"]) expect((await svc.v1("POST", `/v1/agents/${agent.agentId}/${op}`, { bearer: org.apiKey, body: { reason: `test ${op}` } })).status).toBe(200);
    const reconciled = await svc.grpc(ReconciliationService).reconcile({ decisionId: deny.body.decision_id }, { headers: { "x-service-operator-key": svc.operatorKey!, "x-service-organization-id": org.organizationId } });
    expect(reconciled.status).toBeGreaterThan(0);

    const expected = [
      "PolicyPublished",
      "AuthorityGraphUpdated",
      "AgentStateChanged",
      "AgentStateChanged",
      "IntentReceived",
      "DecisionCompleted",
      "ReceiptIssued",
      "IntentReceived",
      "DecisionCompleted",
      "ReceiptIssued",
      "IntentReceived",
      "HumanReviewRequested",
      "ReceiptIssued",
      "HumanReviewResolved",
      "AgentStateChanged",
      "AgentStateChanged",
      "ExecutionReconciled",
    ];
    const enough = (events: Envelope[]) => events.some((e) => e.event === "ExecutionReconciled");
    const [viaGrpc, viaSse] = await Promise.all([grpc.until("ExecutionReconciled over gRPC", enough), sse.until("ExecutionReconciled over SSE", enough)]);
    expect(viaGrpc.map((e) => e.event)).toEqual(expected);
    expect(viaSse).toEqual(viaGrpc);
    const ids = viaGrpc.map((e) => e.event_id);
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(ids);
    for (const e of viaGrpc) {
      expect(Object.keys(e).sort()).toEqual(["data", "event", "event_id", "occurred_at"]);
      expect(e.occurred_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
      expect(JSON.stringify(e.data)).not.toContain("ACME Corp");
    }
    const of = (name: string) => viaGrpc.filter((e) => e.event === name).map((e) => e.data);
    expect(of("PolicyPublished")).toEqual([expect.objectContaining({ policy_key: "payments", change: "published", version: 1 })]);
    expect(of("AuthorityGraphUpdated")).toEqual([expect.objectContaining({ version: 1 })]);
    expect(of("AgentStateChanged").map((d) => [d.agent_id, d.operation, d.from, d.to])).toEqual([
      [agent.agentId, "register", null, "registered"],
      [agent.agentId, "activate", "registered", "active"],
      [agent.agentId, "suspend", "active", "suspended"],
      [agent.agentId, "reactivate", "suspended", "active"],
    ]);
    expect(of("IntentReceived").map((d) => d.decision_id)).toEqual([allow.body.decision_id, deny.body.decision_id, review.body.decision_id]);
    expect(of("DecisionCompleted")).toEqual([
      expect.objectContaining({ decision_id: allow.body.decision_id, outcome: "ALLOW", agent_id: agent.agentId, evidence_id: allow.body.evidence_id }),
      expect.objectContaining({ decision_id: deny.body.decision_id, outcome: "DENY", agent_id: agent.agentId, evidence_id: deny.body.evidence_id }),
    ]);
    expect(of("HumanReviewRequested")).toEqual([expect.objectContaining({ decision_id: review.body.decision_id, agent_id: agent.agentId, reason: "requires_approval" })]);
    expect(of("ReceiptIssued").map((d) => d.evidence_id)).toEqual([allow.body.evidence_id, deny.body.evidence_id, review.body.evidence_id]);
    expect(of("HumanReviewResolved")).toEqual([expect.objectContaining({ decision_id: review.body.decision_id, resolution: "approved" })]);
    expect(of("ExecutionReconciled")).toEqual([expect.objectContaining({ decision_id: deny.body.decision_id, reconciliation_status: "INDETERMINATE", receipt_id: null })]);
    // ReceiptIssued names a record that verifies as evidence.
    const record = await svc.v1("GET", `/v1/evidence/${allow.body.evidence_id}`, { bearer: org.apiKey });
    expect(of("ReceiptIssued")[0]).toMatchObject({ digest: record.body.digest, seq: Number(record.body.seq) });
    sse.close();
  });
});

describe("WatchEvents: resuming, filtering, refusing", () => {
  let org: OrgFixture;
  let agent: TestAgent;

  beforeAll(async () => {
    org = await newOrgFixture(svc);
    agent = await newAgent(svc, org);
  });

  /** Three decisions: nine events (IntentReceived, DecisionCompleted, ReceiptIssued each). */
  async function decisions(n: number): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const d = await intent(agent, { agent_id: agent.agentId, action: "reference_noop", requested_at: new Date().toISOString(), nonce: randomUUID() });
      expect(d.status).toBe(200);
      ids.push(d.body.decision_id);
    }
    return ids;
  }

  for (const transport of ["grpc", "sse"] as const) {
    it(`a consumer disconnected mid-stream resumes with its cursor and sees every event exactly once (${transport})`, async () => {
      const watch = (after?: string, headers: Record<string, string> = {}) =>
        transport === "grpc" ? grpcWatch(svc, org.apiKey, { after }) : sseWatch(svc, org.apiKey, after ? `?after=${after}` : "", headers);
      // An uninterrupted consumer sees the whole sequence.
      const control = watch();
      const consumer = watch();
      await Promise.all([control.listening(), consumer.listening()]);
      await decisions(3);
      // Four events in: the cursor sits in the middle of the second decision's record.
      const seen = (await consumer.until("four events", (e) => e.length >= 4)).slice(0, 4);
      consumer.close();
      await consumer.ended;
      await decisions(2);
      const all = await control.until("fifteen events", (e) => e.length >= 15);
      // Resumes from the fourth event (SSE: the Last-Event-ID header EventSource sends, which wins
      // over the `after` of the URL it first opened: a reconnection would otherwise replay from there).
      const resumed = transport === "grpc" ? watch(seen[3]!.event_id) : watch(seen[0]!.event_id, { "last-event-id": seen[3]!.event_id });
      const rest = await resumed.until("the rest", (e) => e.length >= 11);
      await decisions(1);
      await control.until("eighteen events", (e) => e.length >= 18);
      await resumed.until("the new decision's events", (e) => e.length >= 14);
      expect([...seen, ...rest].map((e) => e.event_id)).toEqual(control.events.map((e) => e.event_id));
      expect(all.length).toBe(18);
      control.close();
      resumed.close();
    });
  }

  it("filters by type, and a filtered stream resumes from its own cursor", async () => {
    const filtered = grpcWatch(svc, org.apiKey, { types: ["DecisionCompleted", "AgentStateChanged"] });
    const sse = sseWatch(svc, org.apiKey, "?types=DecisionCompleted,AgentStateChanged");
    await Promise.all([filtered.listening(), sse.listening()]);
    const [first] = await decisions(1);
    expect((await svc.v1("POST", `/v1/agents/${agent.agentId}/suspend`, { bearer: org.apiKey, body: {} })).status).toBe(200);
    expect((await svc.v1("POST", `/v1/agents/${agent.agentId}/reactivate`, { bearer: org.apiKey, body: {} })).status).toBe(200);
    const [second] = await decisions(1);
    const three = (e: Envelope[]) => e.length >= 4;
    const [events, viaSse] = await Promise.all([filtered.until("four events", three), sse.until("four events over SSE", three)]);
    expect(events.map((e) => [e.event, e.data.decision_id ?? e.data.operation])).toEqual([
      ["DecisionCompleted", first],
      ["AgentStateChanged", "suspend"],
      ["AgentStateChanged", "reactivate"],
      ["DecisionCompleted", second],
    ]);
    expect(viaSse).toEqual(events.slice(0, viaSse.length));
    filtered.close();
    sse.close();
    const resumed = grpcWatch(svc, org.apiKey, { types: ["DecisionCompleted"], after: events[0]!.event_id });
    expect((await resumed.until("the second decision", (e) => e.length >= 1)).map((e) => e.data.decision_id)).toEqual([second]);
    resumed.close();
  });

  it("streams over Connect and gRPC-Web (HTTP/1.1) as well", async () => {
    for (const client of [svc.connect(EventService), svc.grpcWeb(EventService)]) {
      const aborted = new AbortController();
      const stream = client.watchEvents({ types: ["DecisionCompleted"] }, { headers: { authorization: `Bearer ${org.apiKey}` }, signal: aborted.signal })[Symbol.asyncIterator]();
      expect((await stream.next()).value?.heartbeatAt).toBeDefined();
      const [decisionId] = await decisions(1);
      const next = await stream.next();
      expect(envelopeOf(next.value as Event)).toMatchObject({ event: "DecisionCompleted", data: { decision_id: decisionId, outcome: "ALLOW" } });
      aborted.abort();
      await stream.return?.();
    }
  });

  it("refuses a key without EVENTS_READ (403)", async () => {
    const reader = await newApiKey(svc, org.apiKey, ["DECISION_READ", "EVIDENCE_READ"]);
    expect(await refusal(grpcWatch(svc, reader.apiKey))).toMatchObject({ code: Code.PermissionDenied, detail: "permission_denied" });
    const r = await sseWatch(svc, reader.apiKey).refused;
    expect(r).toMatchObject({ status: 403, body: { detail: "permission_denied" } });
    const allowed = await newApiKey(svc, org.apiKey, ["EVENTS_READ"]);
    const ok = grpcWatch(svc, allowed.apiKey);
    await ok.listening();
    ok.close();
  });

  it("an open stream sends nothing after its key is revoked (401) or its organization suspended (403); the operator's stream goes on", async () => {
    const o = await newOrgFixture(svc);
    const a = await newAgent(svc, o, "registered");
    const operatorHeaders = { "x-service-operator-key": svc.operatorKey!, "x-service-organization-id": o.organizationId };
    const change = async (operation: string) => expect((await svc.v1("POST", `/v1/agents/${a.agentId}/${operation}`, { bearer: o.apiKey, body: {} })).status).toBe(200);
    const revoked = await newApiKey(svc, o.apiKey, ["EVENTS_READ"]);
    const suspendedOrgKey = await newApiKey(svc, o.apiKey, ["EVENTS_READ"]);
    const watches = { revokedGrpc: grpcWatch(svc, revoked.apiKey), revokedSse: sseWatch(svc, revoked.apiKey), suspendedGrpc: grpcWatch(svc, suspendedOrgKey.apiKey) };
    const operator = grpcWatch(svc, "", {}, operatorHeaders);
    await Promise.all([...Object.values(watches), operator].map((w) => w.listening()));
    await change("activate");
    for (const w of [...Object.values(watches), operator]) await w.until("the activation", (e) => e.length >= 1);

    expect((await svc.v1("POST", `/v1/organization/api-keys/${revoked.keyId}/revoke`, { bearer: o.apiKey, body: {} })).status).toBe(200);
    await change("suspend");
    expect(await refusal(watches.revokedGrpc)).toMatchObject({ code: Code.Unauthenticated, detail: "unknown_key" });
    // SSE has no status once streaming: the response ends, and a reconnect is refused.
    await watches.revokedSse.ended;
    expect((await sseWatch(svc, revoked.apiKey).refused).status).toBe(401);
    for (const w of [watches.revokedGrpc, watches.revokedSse]) expect(w.events.map((e) => e.data.operation)).toEqual(["activate"]);
    await watches.suspendedGrpc.until("the suspension", (e) => e.length >= 2);

    expect((await svc.v1("POST", `/v1/organizations/${o.organizationId}/suspend`, { headers: { "x-service-operator-key": svc.operatorKey! }, body: {} })).status).toBe(200);
    expect((await svc.v1("POST", `/v1/agents/${a.agentId}/reactivate`, { headers: operatorHeaders, body: {} })).status).toBe(200);
    expect(await refusal(watches.suspendedGrpc)).toMatchObject({ code: Code.PermissionDenied, detail: "organization_suspended" });
    expect(watches.suspendedGrpc.events.map((e) => e.data.operation)).toEqual(["activate", "suspend"]);
    expect((await operator.until("the reactivation", (e) => e.length >= 3)).map((e) => e.data.operation)).toEqual(["activate", "suspend", "reactivate"]);
    operator.close();
  });

  it("refuses a malformed, unknown or foreign cursor and an unknown event name (422)", async () => {
    const other = await newOrgFixture(svc);
    const otherWatch = grpcWatch(svc, other.apiKey);
    await otherWatch.listening();
    await newAgent(svc, other, "registered");
    const [foreign] = await otherWatch.until("the other organization's event", (e) => e.length >= 1);
    otherWatch.close();
    const cursors = ["nope", "evt_0000000000000001_0_0123456789abcdefghjkmnpqrs", foreign!.event_id];
    for (const after of cursors) {
      expect(await refusal(grpcWatch(svc, org.apiKey, { after }))).toEqual({ code: Code.InvalidArgument, detail: "validation_failed", fields: ["after"] });
      const r = await sseWatch(svc, org.apiKey, `?after=${encodeURIComponent(after)}`).refused;
      expect(r.status).toBe(422);
      expect(r.body.errors?.map((e) => e.field)).toEqual(["after"]);
    }
    expect(await refusal(grpcWatch(svc, org.apiKey, { types: ["DecisionCompleted", "Nope"] }))).toEqual({ code: Code.InvalidArgument, detail: "validation_failed", fields: ["types[1]"] });
    expect((await sseWatch(svc, org.apiKey, "?types=Nope").refused).body.errors?.map((e) => e.field)).toEqual(["types[0]"]);
    expect((await sseWatch(svc, org.apiKey, "?since=1").refused).status).toBe(422);
  });

  it("caps open streams per organization (429 rate_limited) and frees a slot when a consumer leaves", async () => {
    const capped = await newOrgFixture(svc);
    const open = Array.from({ length: 16 }, () => grpcWatch(svc, capped.apiKey));
    await Promise.all(open.map((w) => w.listening()));
    expect(await refusal(grpcWatch(svc, capped.apiKey))).toMatchObject({ code: Code.ResourceExhausted, detail: "rate_limited" });
    expect((await sseWatch(svc, capped.apiKey).refused).status).toBe(429);
    open[0]!.close();
    // The slot is freed when the server notices the consumer left: retried until it is.
    const again = await waitFor(
      "a freed slot",
      async () => {
        const w = grpcWatch(svc, capped.apiKey);
        const outcome = await w.listening().then(() => "open", () => "refused");
        if (outcome === "open") return w;
        return undefined;
      },
      { timeoutMs: WATCHDOG_MS, intervalMs: 100 },
    );
    again.close();
    for (const w of open) w.close();
  });
});

describe("WatchEvents: long-lived streams", () => {
  it("outlive the request deadlines, and end when the service shuts down", async () => {
    // Deadlines of a second: a stream open far longer must not be cut by them.
    const short = await startService({ MANDATE_REQUEST_TIMEOUT_MS: "1000", MANDATE_HEADERS_TIMEOUT_MS: "500" });
    try {
      const org = await newOrgFixture(short);
      const grpc = grpcWatch(short, org.apiKey);
      const sse = sseWatch(short, org.apiKey);
      // Connect's server streaming is a POST over HTTP/1.1 whose body arrived whole at once.
      const connect = short.connect(EventService).watchEvents({}, { headers: { authorization: `Bearer ${org.apiKey}` } })[Symbol.asyncIterator]();
      expect((await connect.next()).value?.heartbeatAt).toBeDefined();
      // Server-Sent Events over HTTP/2 (h2c): a GET whose HEADERS end the request.
      const session = http2.connect(short.baseUrl);
      const h2 = session.request({ ":method": "GET", ":path": "/v1alpha/events:watch", authorization: `Bearer ${org.apiKey}` });
      h2.setEncoding("utf8");
      let h2Text = "";
      h2.on("data", (chunk: string) => (h2Text += chunk));
      const h2Ended = new Promise<void>((resolve) => h2.on("close", () => resolve()));
      await Promise.all([grpc.listening(), sse.listening(), waitFor("the HTTP/2 stream's first heartbeat", () => h2Text.startsWith(": heartbeat "), { timeoutMs: WATCHDOG_MS })]);
      const opened = Date.now();
      // A condition on the clock, polled: three deadlines have passed since the streams opened.
      await waitFor("three request deadlines to pass", () => Date.now() - opened > 3000, { timeoutMs: WATCHDOG_MS, intervalMs: 100 });
      await newAgent(short, org, "registered");
      const one = (e: Envelope[]) => e.some((x) => x.event === "AgentStateChanged");
      await Promise.all([grpc.until("the late event over gRPC", one), sse.until("the late event over SSE", one)]);
      await waitFor("the late event over HTTP/2 SSE", () => h2Text.includes("event: AgentStateChanged\n"), { timeoutMs: WATCHDOG_MS });
      let late = (await connect.next()).value as Event | undefined;
      while (late?.heartbeatAt) late = (await connect.next()).value as Event | undefined;
      expect(late?.event).toBe("AgentStateChanged");
      await short.close();
      expect(await refusal(grpc)).toMatchObject({ code: Code.Unavailable, detail: "unavailable" });
      expect(await sse.ended).toBeUndefined();
      await expect(connect.next()).rejects.toSatisfy((err) => ConnectError.from(err).code === Code.Unavailable);
      await h2Ended;
      session.close();
    } finally {
      await short.close();
    }
  });
});
