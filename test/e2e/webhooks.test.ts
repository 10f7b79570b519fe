import http from "node:http";
import type { AddressInfo } from "node:net";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isInternalAddress } from "../../src/domain/webhook-targets.js";
import { retryDelayMs, RETRY_SCHEDULE_MS } from "../../src/domain/webhook-delivery.js";
import { WebhookService } from "../../src/gen/mandate/v1alpha/events_pb.js";
import { ReconciliationService } from "../../src/gen/mandate/v1alpha/execution_pb.js";
import {
  call,
  expectResult,
  newAgent,
  newAgentKey,
  newApiKey,
  newOrgFixture,
  paymentDoc,
  publishPaymentsPolicy,
  signBody,
  submitIntent,
  TRANSPORTS,
  type OrgFixture,
  type Transport,
} from "../support/agents.js";
import { freePort, spawnService, type ServiceProcess } from "../support/process.js";
import { createTestDatabase, createV1Client, startService, type TestService } from "../support/service.js";
import { waitFor } from "../support/wait.js";

/*
 * Issue 21, webhooks: subscriptions over /v1alpha and gRPC, and deliveries to a real HTTP
 * receiver on an ephemeral port, signed as Standard Webhooks and checked with the
 * `standardwebhooks` package's own verify. Every wait is on a condition with a deadline; the
 * retry schedule is scaled down (MANDATE_WEBHOOK_RETRY_SCALE) so eight attempts take about a
 * second.
 */

const W = WebhookService.method;

/** A request the receiver got. */
interface Received {
  path: string;
  headers: Record<string, string>;
  body: string;
  /** What the receiver answered (0: it never answered). */
  status: number;
}

/** How the receiver answers the n-th (0-based) request to a path: a status, or "hang" (never answers). */
type Behaviour = (n: number) => number | "hang";

/** A local receiver: records every request and answers per path (200 unless told otherwise). */
async function startReceiver() {
  const received: Received[] = [];
  const behaviours = new Map<string, Behaviour>();
  const counts = new Map<string, number>();
  const hanging: http.ServerResponse[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const path = req.url ?? "/";
      const n = counts.get(path) ?? 0;
      counts.set(path, n + 1);
      const answer = (behaviours.get(path) ?? (() => 200))(n);
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers[k] = v;
      received.push({ path, headers, body: Buffer.concat(chunks).toString("utf8"), status: answer === "hang" ? 0 : answer });
      if (answer === "hang") {
        hanging.push(res);
        return;
      }
      res.writeHead(answer, { "content-type": "text/plain" }).end(answer < 300 ? "ok" : "no");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    received,
    url: (path: string) => `http://127.0.0.1:${port}${path}`,
    on: (path: string, b: Behaviour) => behaviours.set(path, b),
    at: (path: string) => received.filter((r) => r.path === path),
    async close() {
      for (const r of hanging) r.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

type Receiver = Awaited<ReturnType<typeof startReceiver>>;

const SHORT_SCHEDULE = {
  MANDATE_WEBHOOK_RETRY_SCALE: "0.00001",
  MANDATE_WEBHOOK_TIMEOUT_MS: "500",
  MANDATE_WEBHOOKS_ALLOW_PRIVATE: "1",
};

let svc: TestService;
let receiver: Receiver;
let databaseUrl: string;

beforeAll(async () => {
  // A database of its own: the deliveries queue is shared by every service on a database, and
  // these tests count what the receiver gets.
  databaseUrl = await createTestDatabase("webhooks");
  receiver = await startReceiver();
  // One in flight per webhook: first attempts then arrive in the order the events were recorded.
  svc = await startService({ DATABASE_URL: databaseUrl, MANDATE_MIGRATION_DATABASE_URL: databaseUrl, MANDATE_WEBHOOK_MAX_IN_FLIGHT: "1", MANDATE_WEBHOOK_SWEEP_MS: "1000", ...SHORT_SCHEDULE });
});

afterAll(async () => {
  await svc?.close();
  await receiver?.close();
});

async function createWebhook(org: { apiKey: string }, path: string, events: string[] = [], description = ""): Promise<{ webhook_id: string; secret: string }> {
  const res = await svc.v1("POST", "/v1alpha/webhooks", { bearer: org.apiKey, body: { url: receiver.url(path), events, description } });
  if (res.status !== 200) throw new Error(`creating a webhook failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

async function deliveries(org: { apiKey: string }, webhookId: string): Promise<any[]> {
  const res = await svc.v1("GET", `/v1alpha/webhooks/${webhookId}/deliveries?page_size=100`, { bearer: org.apiKey });
  if (res.status !== 200) throw new Error(`listing deliveries failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.deliveries;
}

/** Registers (and activates) an agent: AgentStateChanged events. */
const someEvents = (org: OrgFixture, state: "registered" | "active" = "registered") => newAgent(svc, org, state);

describe("the retry schedule", () => {
  it("is Standard Webhooks': immediately, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h, jittered by at most 20 %, then nothing", () => {
    expect(RETRY_SCHEDULE_MS).toEqual([0, 5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000]);
    expect(retryDelayMs(1, 1, () => 0.5)).toBe(5_000);
    expect(retryDelayMs(1, 1, () => 0)).toBe(4_000);
    expect(retryDelayMs(7, 1, () => 1)).toBe(43_200_000);
    expect(retryDelayMs(2, 0.001, () => 0.5)).toBe(300);
    expect(retryDelayMs(8, 1)).toBeNull();
  });
});

describe("internal targets", () => {
  it("are loopback, private, link-local, CGNAT, multicast and reserved ranges, IPv4 and IPv6 (mapped addresses included)", () => {
    for (const a of ["127.0.0.1", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0", "224.0.0.1", "255.255.255.255", "::1", "::", "fe80::1", "fc00::1", "fd12:3456::1", "ff02::1", "::ffff:127.0.0.1", "::ffff:7f00:1", "::ffff:10.0.0.1", "64:ff9b::10.0.0.1"]) {
      expect(isInternalAddress(a), a).toBe(true);
    }
    for (const a of ["8.8.8.8", "1.1.1.1", "172.32.0.1", "100.128.0.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"]) {
      expect(isInternalAddress(a), a).toBe(false);
    }
  });

  it("are refused in production (422 on url) unless MANDATE_WEBHOOKS_ALLOW_PRIVATE=1", async () => {
    // Databases of their own: every service on a database delivers its queue, with its own settings.
    const own = await createTestDatabase("webhooks_prod");
    const prod = await startService({ DATABASE_URL: own, MANDATE_MIGRATION_DATABASE_URL: own, NODE_ENV: "production" });
    try {
      const org = await prod.newOrg();
      for (const url of [receiver.url("/x"), "http://localhost:9/x", "http://[::1]:9/x", "http://169.254.169.254/latest/meta-data", "https://10.0.0.8/hook", "http://[::ffff:127.0.0.1]:9/x", "https://no-such-host.invalid/hook"]) {
        const res = await prod.v1("POST", "/v1alpha/webhooks", { bearer: org.apiKey, body: { url, events: [] } });
        expect(res.status, `${url}: ${JSON.stringify(res.body)}`).toBe(422);
        expect(res.body.detail).toBe("validation_failed");
        expect(res.body.errors.map((e: any) => e.field)).toEqual(["url"]);
      }
    } finally {
      await prod.close();
    }
    const allowed = await startService({ DATABASE_URL: own, MANDATE_MIGRATION_DATABASE_URL: own, NODE_ENV: "production", MANDATE_WEBHOOKS_ALLOW_PRIVATE: "1" });
    try {
      const org = await allowed.newOrg();
      const res = await allowed.v1("POST", "/v1alpha/webhooks", { bearer: org.apiKey, body: { url: receiver.url("/allowed"), events: ["AgentStateChanged"] } });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
    } finally {
      await allowed.close();
    }
  });
});

describe.each(TRANSPORTS)("webhook subscriptions over %s", (transport: Transport) => {
  let org: OrgFixture;
  beforeAll(async () => {
    org = await newOrgFixture(svc);
  });
  const as = (key: { apiKey: string } = org) => ({ bearer: key.apiKey });

  it("create shows the secret once; list and get never; rotate shows a new one once; delete makes it 404", async () => {
    const created = await call(svc, transport, W.createWebhook, { url: receiver.url(`/crud-${transport}`), events: ["DecisionCompleted", "HumanReviewRequested"], description: "ERP" }, as());
    expectResult(created, 200);
    const hook = created.body;
    expect(hook.webhook_id).toMatch(/^whk_[0-9a-z]{26}$/);
    expect(hook.secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(Buffer.from(hook.secret.slice(6), "base64").length).toBeGreaterThanOrEqual(24);
    expect(hook).toMatchObject({ url: receiver.url(`/crud-${transport}`), events: ["DecisionCompleted", "HumanReviewRequested"], description: "ERP", state: "active" });
    expect(hook.created_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);

    const listed = await call(svc, transport, W.listWebhooks, {}, as());
    expectResult(listed, 200);
    const mine = listed.body.webhooks.find((w: any) => w.webhook_id === hook.webhook_id);
    expect(mine).toMatchObject({ url: hook.url, state: "active" });
    expect(mine.secret ?? "").toBe("");
    const got = await call(svc, transport, W.getWebhook, { webhook_id: hook.webhook_id }, as());
    expectResult(got, 200);
    expect(got.body.secret ?? "").toBe("");
    expect(JSON.stringify(got.body)).not.toContain(hook.secret.slice(6));

    const rotated = await call(svc, transport, W.rotateWebhookSecret, { webhook_id: hook.webhook_id }, as());
    expectResult(rotated, 200);
    expect(rotated.body.secret).toMatch(/^whsec_/);
    expect(rotated.body.secret).not.toBe(hook.secret);
    expect((await call(svc, transport, W.getWebhook, { webhook_id: hook.webhook_id }, as())).body.secret ?? "").toBe("");

    expectResult(await call(svc, transport, W.deleteWebhook, { webhook_id: hook.webhook_id }, as()), 200);
    expectResult(await call(svc, transport, W.getWebhook, { webhook_id: hook.webhook_id }, as()), 404, "not_found");
    expectResult(await call(svc, transport, W.deleteWebhook, { webhook_id: hook.webhook_id }, as()), 404, "not_found");
    expectResult(await call(svc, transport, W.listWebhookDeliveries, { webhook_id: hook.webhook_id }, as()), 404, "not_found");
  });

  it("refuses a URL that is not http(s), an unknown event name and an over-long description, naming each field", async () => {
    // The last one is under 2,048 characters as given, and over once percent-encoded as stored.
    for (const url of ["ftp://example.com/x", "file:///etc/passwd", "not a url", "", "http://user:pw@example.com/x", "javascript:alert(1)", `http://example.com/${"é".repeat(1000)}`]) {
      const res = await call(svc, transport, W.createWebhook, { url, events: [] }, as());
      expectResult(res, 422, "validation_failed");
      expect(res.body.errors.map((e: any) => e.field), url).toEqual(["url"]);
    }
    const bad = await call(svc, transport, W.createWebhook, { url: receiver.url("/v"), events: ["DecisionCompleted", "DecisionMade"], description: "x".repeat(501) }, as());
    expectResult(bad, 422, "validation_failed");
    expect(bad.body.errors.map((e: any) => e.field)).toEqual(["events[1]", "description"]);
  });

  it("needs ORG_ADMIN (403 permission_denied otherwise) and hides other organizations' webhooks (404)", async () => {
    const reader = await newApiKey(svc, org.apiKey, ["DECISION_READ", "EVIDENCE_READ", "AGENT_ADMIN"]);
    const hook = await createWebhook(org, `/perm-${transport}`);
    expectResult(await call(svc, transport, W.createWebhook, { url: receiver.url("/p"), events: [] }, as(reader)), 403, "permission_denied");
    expectResult(await call(svc, transport, W.listWebhooks, {}, as(reader)), 403, "permission_denied");
    expectResult(await call(svc, transport, W.getWebhook, { webhook_id: hook.webhook_id }, as(reader)), 403, "permission_denied");
    expectResult(await call(svc, transport, W.listWebhookDeliveries, { webhook_id: hook.webhook_id }, as(reader)), 403, "permission_denied");
    expectResult(await call(svc, transport, W.rotateWebhookSecret, { webhook_id: hook.webhook_id }, as(reader)), 403, "permission_denied");
    expectResult(await call(svc, transport, W.deleteWebhook, { webhook_id: hook.webhook_id }, as(reader)), 403, "permission_denied");
    const other = await svc.newOrg();
    expectResult(await call(svc, transport, W.getWebhook, { webhook_id: hook.webhook_id }, as(other)), 404, "not_found");
    expectResult(await call(svc, transport, W.deleteWebhook, { webhook_id: hook.webhook_id }, as(other)), 404, "not_found");
    expect((await call(svc, transport, W.listWebhooks, {}, as(other))).body.webhooks ?? []).toEqual([]);
  });
});

describe("the webhook limit", () => {
  it("refuses an organization's webhook past MANDATE_WEBHOOKS_PER_ORGANIZATION (422 on url); deleting one makes room", async () => {
    const own = await createTestDatabase("webhooks_limit");
    const limited = await startService({ DATABASE_URL: own, MANDATE_MIGRATION_DATABASE_URL: own, MANDATE_WEBHOOKS_PER_ORGANIZATION: "2" });
    try {
      const org = await limited.newOrg();
      const make = () => limited.v1("POST", "/v1alpha/webhooks", { bearer: org.apiKey, body: { url: receiver.url("/limit"), events: ["PolicyPublished"] } });
      const [a, b] = await Promise.all([make(), make()]);
      expect([a.status, b.status]).toEqual([200, 200]);
      const third = await make();
      expect(third.status).toBe(422);
      expect(third.body.errors[0]).toMatchObject({ field: "url", code: "limit_reached" });
      expect((await limited.v1("DELETE", `/v1alpha/webhooks/${a.body.webhook_id}`, { bearer: org.apiKey })).status).toBe(200);
      expect((await make()).status).toBe(200);
    } finally {
      await limited.close();
    }
  });
});

describe("deliveries", () => {
  it("brings every kind of event of real actions to the receiver, signed (standardwebhooks verify), in the order recorded", async () => {
    const org = await newOrgFixture(svc);
    const hook = await createWebhook(org, "/all");
    const agent = await someEvents(org, "active");
    await publishPaymentsPolicy(svc, org);
    const allow = await submitIntent(svc, "v1", signBody(agent, paymentDoc(agent.agentId, 500)));
    expect(allow.body.outcome, JSON.stringify(allow.body)).toBe("ALLOW");
    const review = await submitIntent(svc, "v1", signBody(agent, paymentDoc(agent.agentId, 2_000)));
    expect(review.body.outcome, JSON.stringify(review.body)).toBe("HUMAN_REVIEW");
    const resolved = await svc.v1("POST", `/v1/decisions/${review.body.decision_id}/review`, { bearer: org.apiKey, body: { resolution: "approved", reason: "invoice matches" } });
    expect(resolved.status, JSON.stringify(resolved.body)).toBe(200);
    // Reconciling the ALLOW (no capability was issued for it: INDETERMINATE), as the platform does.
    const reconciled = await svc.grpc(ReconciliationService).reconcile({ decisionId: allow.body.decision_id }, { headers: { "x-service-operator-key": svc.operatorKey!, "x-service-organization-id": org.organizationId } });
    expect(reconciled.status).toBeGreaterThan(0);

    // With WebhookFailing (below), every event type of docs/events.md.
    const wanted = ["AgentStateChanged", "PolicyPublished", "AuthorityGraphUpdated", "IntentReceived", "DecisionCompleted", "ReceiptIssued", "HumanReviewRequested", "HumanReviewResolved", "ExecutionReconciled"];
    const got = await waitFor("every kind of event at the receiver", () => {
      const seen = receiver.at("/all");
      const names = new Set(seen.map((r) => JSON.parse(r.body).event));
      return wanted.every((n) => names.has(n)) && seen;
    });
    const verifier = new Webhook(hook.secret);
    const envelopes = got.map((r) => {
      // Throws unless the signature is the secret's over webhook-id, webhook-timestamp and these exact bytes.
      const payload = verifier.verify(r.body, r.headers) as any;
      expect(r.headers["webhook-id"]).toMatch(/^msg_[0-9a-z]{26}$/);
      expect(r.headers["content-type"]).toBe("application/json");
      expect(Object.keys(payload).sort()).toEqual(["data", "event", "event_id", "occurred_at"]);
      expect(payload.occurred_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
      return payload;
    });
    // With one in flight per webhook, first attempts arrive in the order the events were recorded.
    const ids = envelopes.map((e) => e.event_id);
    expect(ids).toEqual([...ids].sort());
    expect(new Set(ids).size).toBe(ids.length);
    const completed = envelopes.find((e) => e.event === "DecisionCompleted");
    expect(completed.data).toMatchObject({ decision_id: allow.body.decision_id, outcome: "ALLOW", agent_id: agent.agentId, evidence_id: allow.body.evidence_id });
    expect(envelopes.find((e) => e.event === "HumanReviewRequested").data).toMatchObject({ decision_id: review.body.decision_id, agent_id: agent.agentId, reason: review.body.reason });
    expect(envelopes.find((e) => e.event === "HumanReviewResolved").data).toMatchObject({ decision_id: review.body.decision_id, resolution: "approved" });
    expect(envelopes.find((e) => e.event === "ExecutionReconciled").data).toMatchObject({ decision_id: allow.body.decision_id, reconciliation_status: "INDETERMINATE", receipt_id: null });
    expect(envelopes.find((e) => e.event === "ReceiptIssued").data).toMatchObject({ decision_id: allow.body.decision_id, evidence_id: allow.body.evidence_id });
    // A wrong secret does not verify.
    expect(() => new Webhook(`whsec_${Buffer.alloc(32, 7).toString("base64")}`).verify(got[0]!.body, got[0]!.headers)).toThrow();

    // Every delivery is listed as delivered with its one attempt.
    const listed = await waitFor("deliveries recorded", async () => {
      const ds = await deliveries(org, hook.webhook_id);
      return ds.length === got.length && ds.every((d) => d.state === "delivered") && ds;
    });
    expect(listed.map((d: any) => d.event_id)).toEqual([...ids].reverse());
    for (const d of listed) {
      expect(d.attempts).toHaveLength(1);
      expect(d.attempts[0]).toMatchObject({ status: 200 });
      expect(d.attempts[0].latency_ms).toBeGreaterThanOrEqual(0);
      expect(d.next_attempt_at).toBeUndefined();
    }
  });

  it("only the subscribed events reach a webhook subscribed to some", async () => {
    const org = await newOrgFixture(svc);
    await createWebhook(org, "/only-policy", ["PolicyPublished"]);
    const everything = await createWebhook(org, "/only-policy-all");
    await someEvents(org, "active");
    await publishPaymentsPolicy(svc, org);
    await waitFor("the policy publication", () => receiver.at("/only-policy").length >= 1);
    // Everything recorded before the publication reached the catch-all webhook first (one in flight, in order).
    await waitFor("the catch-all's PolicyPublished", () => receiver.at("/only-policy-all").some((r) => JSON.parse(r.body).event === "PolicyPublished"));
    expect(receiver.at("/only-policy").map((r) => JSON.parse(r.body).event)).toEqual(["PolicyPublished"]);
    expect(new Set(receiver.at("/only-policy-all").map((r) => JSON.parse(r.body).event))).toContain("AgentStateChanged");
    expect(everything.webhook_id).toMatch(/^whk_/);
  });

  it("a receiver answering 500 three times then 200 acknowledges the event once, with one webhook-id over four attempts; redelivery sends it again", async () => {
    const org = await newOrgFixture(svc);
    receiver.on("/flaky", (n) => (n < 3 ? 500 : 200));
    const hook = await createWebhook(org, "/flaky", ["AgentStateChanged"]);
    await someEvents(org);
    const acknowledged = await waitFor("the fourth attempt", () => receiver.at("/flaky").length >= 4 && receiver.at("/flaky"));
    expect(acknowledged.map((r) => r.status)).toEqual([500, 500, 500, 200]);
    expect(new Set(acknowledged.map((r) => r.headers["webhook-id"])).size).toBe(1);
    expect(new Set(acknowledged.map((r) => r.body)).size).toBe(1);
    const [delivery] = await waitFor("the delivery recorded as delivered", async () => {
      const ds = await deliveries(org, hook.webhook_id);
      return ds[0]?.state === "delivered" && ds;
    });
    expect(delivery.delivery_id).toBe(acknowledged[0]!.headers["webhook-id"]);
    expect(delivery.event).toBe("AgentStateChanged");
    expect(delivery.attempts.map((a: any) => a.status)).toEqual([500, 500, 500, 200]);
    expect(delivery.attempts.map((a: any) => a.error)).toEqual(["HTTP 500", "HTTP 500", "HTTP 500", ""]);

    // Redelivery: one more attempt now, with the same webhook-id.
    const again = await svc.v1("POST", `/v1alpha/webhooks/${hook.webhook_id}/deliveries/${delivery.delivery_id}:redeliver`, { bearer: org.apiKey, body: {} });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(again.body).toMatchObject({ delivery_id: delivery.delivery_id, state: "pending" });
    await waitFor("the redelivery", () => receiver.at("/flaky").length === 5);
    expect(receiver.at("/flaky")[4]!.headers["webhook-id"]).toBe(delivery.delivery_id);
    const after = await waitFor("the redelivery recorded", async () => {
      const ds = await deliveries(org, hook.webhook_id);
      return ds[0]?.attempts.length === 5 && ds[0];
    });
    expect(after.state).toBe("delivered");
    // Exactly one acknowledgement per send: the four scheduled attempts and the redelivery.
    expect(receiver.at("/flaky").filter((r) => r.status === 200)).toHaveLength(2);
    const missing = await svc.v1("POST", `/v1alpha/webhooks/${hook.webhook_id}/deliveries/msg_00000000000000000000000000:redeliver`, { bearer: org.apiKey, body: {} });
    expect(missing.status).toBe(404);

    // The attempts show in /metrics (this process has made at least these).
    const metrics = String((await svc.v1("GET", "/metrics")).body);
    const count = (outcome: string) => Number(new RegExp(`^mandate_webhook_attempts_total\\{outcome="${outcome}"\\} (\\d+)$`, "m").exec(metrics)?.[1] ?? -1);
    expect(count("retry")).toBeGreaterThanOrEqual(3);
    expect(count("delivered")).toBeGreaterThanOrEqual(2);
    expect(metrics).toMatch(/^mandate_webhook_attempts_in_flight \d+$/m);
  });

  it("a receiver that does not answer times out (status 0, the timeout as the error) and is retried", async () => {
    const org = await newOrgFixture(svc);
    receiver.on("/slow", (n) => (n === 0 ? "hang" : 204));
    const hook = await createWebhook(org, "/slow", ["AgentStateChanged"]);
    await someEvents(org);
    const [d] = await waitFor("the delivery after a timeout", async () => {
      const ds = await deliveries(org, hook.webhook_id);
      return ds[0]?.state === "delivered" && ds;
    });
    expect(d.attempts.map((a: any) => [a.status, a.error])).toEqual([[0, "timeout after 500 ms"], [204, ""]]);
  });

  it("after the last retry the delivery is failed, the webhook failing, and a WebhookFailing event tells the organization; rotating the secret clears failing", async () => {
    const org = await newOrgFixture(svc);
    receiver.on("/down", () => 503);
    const down = await createWebhook(org, "/down", ["AgentStateChanged"]);
    const watcher = await createWebhook(org, "/watcher", ["WebhookFailing"]);
    await someEvents(org);
    const failing = await waitFor("the WebhookFailing event", () => receiver.at("/watcher")[0], { timeoutMs: 30_000 });
    const event = new Webhook(watcher.secret).verify(failing.body, failing.headers) as any;
    expect(event.event).toBe("WebhookFailing");
    expect(event.data).toMatchObject({ webhook_id: down.webhook_id, attempts: 8 });
    expect(receiver.at("/down")).toHaveLength(8);
    expect(new Set(receiver.at("/down").map((r) => r.headers["webhook-id"])).size).toBe(1);
    const [d] = await deliveries(org, down.webhook_id);
    expect(d.state).toBe("failed");
    expect(d.attempts).toHaveLength(8);
    expect(d.attempts.every((a: any) => a.status === 503)).toBe(true);
    expect(d.event_id).toBe(event.data.event_id);
    expect((await svc.v1("GET", `/v1alpha/webhooks/${down.webhook_id}`, { bearer: org.apiKey })).body.state).toBe("failing");
    // The evidence record behind the event.
    const evidence = await svc.v1("GET", `/v1/evidence/${event.data.evidence_id}`, { bearer: org.apiKey });
    expect(evidence.status).toBe(200);
    expect(evidence.body).toMatchObject({ kind: "webhook.failing", subject_id: down.webhook_id });

    const rotated = await svc.v1("POST", `/v1alpha/webhooks/${down.webhook_id}:rotate-secret`, { bearer: org.apiKey, body: {} });
    expect(rotated.status).toBe(200);
    expect(rotated.body.state).toBe("active");
    expect(rotated.body.secret).toMatch(/^whsec_/);
  });

  it("pages the deliveries listing, newest first", async () => {
    const org = await newOrgFixture(svc);
    const hook = await createWebhook(org, "/paged", ["AgentStateChanged"]);
    for (let i = 0; i < 3; i++) await someEvents(org);
    await waitFor("three deliveries", async () => (await deliveries(org, hook.webhook_id)).filter((d) => d.state === "delivered").length === 3);
    const first = await svc.v1("GET", `/v1alpha/webhooks/${hook.webhook_id}/deliveries?page_size=2`, { bearer: org.apiKey });
    expect(first.body.deliveries).toHaveLength(2);
    expect(first.body.next_page_token).toBeTruthy();
    const second = await svc.v1("GET", `/v1alpha/webhooks/${hook.webhook_id}/deliveries?page_size=2&page_token=${first.body.next_page_token}`, { bearer: org.apiKey });
    expect(second.body.deliveries).toHaveLength(1);
    expect(second.body.next_page_token ?? "").toBe("");
    const ids = [...first.body.deliveries, ...second.body.deliveries].map((d: any) => d.event_id);
    expect(ids).toEqual([...ids].sort().reverse());
    const bad = await svc.v1("GET", `/v1alpha/webhooks/${hook.webhook_id}/deliveries?page_size=101`, { bearer: org.apiKey });
    expect(bad.status).toBe(422);
  });
});

describe("two replicas on one database", () => {
  const replicas: ServiceProcess[] = [];
  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.stop("SIGKILL")));
  });

  it("deliver each event exactly once between them", async () => {
    const shared = await createTestDatabase("webhook_replicas");
    const operatorKey = "op_webhook_replicas";
    const env = (port: number) => ({ PORT: String(port), DATABASE_URL: shared, MANDATE_OPERATOR_KEY: operatorKey, MANDATE_WEBHOOK_SWEEP_MS: "200", ...SHORT_SCHEDULE });
    const [pa, pb] = [await freePort(), await freePort()];
    const [a, b] = await Promise.all([spawnService(env(pa)), spawnService(env(pb))]);
    replicas.push(a, b);
    const [va, vb] = [createV1Client(a.baseUrl), createV1Client(b.baseUrl)];
    const made = await va("POST", "/v1/organizations", { body: { name: "replicas" }, headers: { "x-service-operator-key": operatorKey } });
    const apiKey = made.body.api_key;
    const principal = await va("POST", "/v1/principals", { bearer: apiKey, body: { display_name: "P", kind: "person", external_ref: "p-1" } });
    const hook = await va("POST", "/v1alpha/webhooks", { bearer: apiKey, body: { url: receiver.url("/replicas"), events: ["AgentStateChanged"] } });
    expect(hook.status, JSON.stringify(hook.body)).toBe(200);
    // Both replicas record changes; both are woken by every commit.
    const agents = 20;
    await Promise.all(
      Array.from({ length: agents }, async (_, i) => {
        const v = i % 2 === 0 ? va : vb;
        const res = await v("POST", "/v1/agents", { bearer: apiKey, body: { name: `agent-${i}`, acting_for_principal_id: principal.body.principal_id, public_key: newAgentKey().publicKey } });
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        const act = await v("POST", `/v1/agents/${res.body.agent_id}/activate`, { bearer: apiKey, body: {} });
        expect(act.status).toBe(200);
      }),
    );
    const expected = agents * 2;
    await waitFor(`${expected} deliveries`, () => receiver.at("/replicas").length >= expected, { timeoutMs: 30_000 });
    // Every delivery recorded as delivered, then nothing more arrives: count once all are recorded.
    await waitFor("every delivery recorded", async () => {
      const res = await va("GET", `/v1alpha/webhooks/${hook.body.webhook_id}/deliveries?page_size=100`, { bearer: apiKey });
      return res.body.deliveries.length === expected && res.body.deliveries.every((d: any) => d.state === "delivered");
    });
    const got = receiver.at("/replicas");
    const eventIds = got.map((r) => JSON.parse(r.body).event_id);
    expect(new Set(eventIds).size).toBe(expected);
    expect(got).toHaveLength(expected);
    expect(new Set(got.map((r) => r.headers["webhook-id"])).size).toBe(expected);
    const stopped = await Promise.all([a.stop(), b.stop()]);
    expect(stopped).toEqual([{ code: 0, signal: null }, { code: 0, signal: null }]);
  });
});

// A crash while Intents flow (SIGKILL, restart, every answered decision delivered under exactly one
// webhook-id, a delivery cut by the crash sent again under the same one): test/e2e/events-crash.test.ts.
