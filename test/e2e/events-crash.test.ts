import { randomBytes } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { verifyWebhook, type EventEnvelope } from "@mandate/client";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { intentDoc, newAgent, newOrgFixture, signBody, submitIntent, type Result, type TestAgent, type Transport } from "../support/agents.js";
import { createTestDatabase, sharedDatabaseUrl, spawnServiceProcess, type TestService } from "../support/service.js";
import { deferred, waitFor } from "../support/wait.js";

/*
 * Issue 21, Done when: "SIGKILL the service while Intents flow; after restart every decision
 * answered 200 has exactly one DecisionCompleted (or HumanReviewRequested) delivered, and no event
 * exists for a decision that was not answered."
 *
 * A webhook subscribed to both events points at a real receiver in this process, which verifies
 * every delivery with the TypeScript client's verifyWebhook and acknowledges it (204). Workers
 * submit Intents over /v1 and gRPC to a service running as its own OS process; once enough were
 * answered it is killed with SIGKILL mid-load, then started again on the same database. Once
 * delivery has settled (every decision in the database acknowledged, no delivery pending):
 *
 * - every decision answered 200 was acknowledged under exactly one distinct webhook-id, with the
 *   event its outcome calls for (at least once: the same webhook-id may arrive twice, as when the
 *   kill lands between a receiver's 2xx and its recording; never two webhook-ids for a decision).
 *   That case is made to happen: from the 100th answer on, the receiver processes deliveries but
 *   holds their 2xx back, and the kill waits for one such delivery; after the restart (once the
 *   dead process's lease lapses) each of them arrives again under its webhook-id;
 * - the receiver never saw a decision the database does not hold (an Intent cut off by the kill
 *   whose transaction rolled back has no event), and every decision the database holds (those
 *   answered, and those committed whose answer the kill cut off) was delivered: the evidence log
 *   is the outbox, so an event exists if and only if its decision committed.
 */

/** How long any wait may take: a watchdog on a loaded machine, never a pacing. */
const WATCHDOG_MS = 90_000;

/** One delivery the receiver verified and acknowledged. */
interface Acknowledged {
  webhookId: string;
  envelope: EventEnvelope;
}

/**
 * A real receiver on an ephemeral port: verifies each delivery (verifyWebhook), processes it
 * and answers 204, or 400 when it does not verify. While `hold()` is on, it processes deliveries
 * but keeps their answers back (as a receiver does whose 2xx is lost on the way): the sender
 * never learns of them, and must send them again under the same webhook-id.
 */
async function startReceiver() {
  let secret = "";
  let holding = false;
  const acknowledged: Acknowledged[] = [];
  const refused: string[] = [];
  const held: { webhookId: string; res: http.ServerResponse }[] = [];
  const firstHeld = deferred();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      try {
        const envelope = verifyWebhook(Buffer.concat(chunks), req.headers, secret);
        const webhookId = String(req.headers["webhook-id"]);
        acknowledged.push({ webhookId, envelope });
        if (holding) {
          held.push({ webhookId, res });
          firstHeld.resolve();
          return;
        }
        res.writeHead(204).end();
      } catch (err) {
        refused.push(String(err));
        res.writeHead(400).end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/events`,
    acknowledged,
    refused,
    useSecret: (s: string) => void (secret = s),
    held,
    /** Resolves once a delivery's answer is held back. */
    firstHeld: firstHeld.promise,
    hold: () => void (holding = true),
    /** Answers normally again; the held answers are dropped with their connections. */
    release() {
      holding = false;
      for (const h of held) h.res.destroy();
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe("crash: SIGKILL while Intents flow, with a webhook subscribed", () => {
  const running: TestService[] = [];
  let receiver: Awaited<ReturnType<typeof startReceiver>> | undefined;
  let databaseUrl: string | undefined;
  afterAll(async () => {
    for (const s of running) await s.close().catch(() => undefined);
    await receiver?.close();
    if (databaseUrl) {
      const admin = new pg.Client({ connectionString: sharedDatabaseUrl() });
      await admin.connect();
      await admin.query(`DROP DATABASE IF EXISTS ${new URL(databaseUrl).pathname.slice(1)} WITH (FORCE)`).catch(() => undefined);
      await admin.end();
    }
  });

  it("every decision answered 200 is delivered exactly once (one webhook-id), and no event names a decision the database lacks", async () => {
    databaseUrl = await createTestDatabase("events_crash");
    receiver = await startReceiver();
    const env = {
      DATABASE_URL: databaseUrl,
      MANDATE_OPERATOR_KEY: `op_${randomBytes(18).toString("base64url")}`,
      // Retries within seconds instead of hours, a lapsed lease soon after a death, and a sweep
      // that finds what a lost notification would have announced.
      MANDATE_WEBHOOK_RETRY_SCALE: "0.0001",
      MANDATE_WEBHOOK_TIMEOUT_MS: "2000",
      MANDATE_WEBHOOK_SWEEP_MS: "500",
      MANDATE_WEBHOOKS_ALLOW_PRIVATE: "1",
    };
    const first = await spawnServiceProcess(env);
    running.push(first.svc);
    const org = await newOrgFixture(first.svc);
    const hook = await first.svc.v1("POST", "/v1alpha/webhooks", { bearer: org.apiKey, body: { url: receiver.url, events: ["DecisionCompleted", "HumanReviewRequested"] } });
    expect(hook.status, JSON.stringify(hook.body)).toBe(200);
    receiver.useSecret(hook.body.secret);
    const WORKERS = 8;
    const ANSWERED_BEFORE_KILL = 120;
    // From this answer on, the receiver processes deliveries but holds their 2xx back.
    const HOLD_FROM = 100;
    const agents: TestAgent[] = await Promise.all(Array.from({ length: WORKERS / 2 }, () => newAgent(first.svc, org)));

    // Load: every third Intent an action no policy covers (HUMAN_REVIEW), the others allowed.
    type Sent = { transport: Transport; result?: Result; failure?: string };
    const sent: Sent[] = [];
    let killed = false;
    let answered = 0;
    let fatal: unknown;
    const enoughAnswered = deferred();
    const worker = async (w: number) => {
      for (let i = 0; !killed; i++) {
        const agent = agents[(w + i) % agents.length]!;
        const doc = intentDoc(agent.agentId, i % 3 === 2 ? { action: "open_account" } : {});
        const entry: Sent = { transport: w % 2 === 0 ? "v1" : "grpc" };
        sent.push(entry);
        try {
          entry.result = await submitIntent(first.svc, entry.transport, signBody(agent, doc));
          if (entry.result.status === 200) {
            if (++answered === HOLD_FROM) receiver!.hold();
            if (answered === ANSWERED_BEFORE_KILL) enoughAnswered.resolve();
          } else if (!killed) {
            throw new Error(`unexpected ${entry.result.status} ${JSON.stringify(entry.result.body)}`);
          }
        } catch (err) {
          if (!killed) {
            fatal ??= err;
            enoughAnswered.reject(err);
            return;
          }
          entry.failure = String(err);
        }
      }
    };
    const workers = Promise.all(Array.from({ length: WORKERS }, (_, w) => worker(w)));
    // The kill follows two events: enough answers, and a delivery processed whose answer is held.
    await Promise.all([enoughAnswered.promise, receiver.firstHeld]).catch((err: unknown) => {
      killed = true; // the other workers stop too
      throw err;
    });
    const exited = new Promise((r) => first.child.once("exit", r));
    // From here on a failed request is the point, not a fault: set before the kill.
    killed = true;
    const acknowledgedBeforeKill = receiver.acknowledged.length;
    first.child.kill("SIGKILL");
    await exited;
    const heldAtKill = receiver.held.map((h) => h.webhookId);
    receiver.release();
    await workers;
    expect(fatal).toBeUndefined();
    running.splice(running.indexOf(first.svc), 1);

    const ok = sent.filter((s) => s.result?.status === 200).map((s) => s.result!.body as { decision_id: string; outcome: string });
    const cutOff = sent.filter((s) => s.result?.status !== 200);
    expect(ok.length).toBeGreaterThanOrEqual(ANSWERED_BEFORE_KILL);
    expect(cutOff.length).toBeGreaterThan(0);

    // Restart on the same database; its deliverer picks up where the dead one stopped.
    const second = await spawnServiceProcess(env);
    running.push(second.svc);
    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    let stored: Map<string, string>;
    try {
      const rows = (await db.query<{ decision_id: string; outcome: string }>("SELECT decision_id, outcome FROM decisions WHERE organization_id = $1", [org.organizationId])).rows;
      stored = new Map(rows.map((r) => [r.decision_id, r.outcome]));
    } finally {
      await db.end();
    }

    // Settled: every stored decision acknowledged, and the webhook has no delivery left pending.
    const listDeliveries = async () => {
      const all: any[] = [];
      for (let token = ""; ; ) {
        const res = await second.svc.v1("GET", `/v1alpha/webhooks/${hook.body.webhook_id}/deliveries?page_size=100${token ? `&page_token=${token}` : ""}`, { bearer: org.apiKey });
        if (res.status !== 200) throw new Error(`listing deliveries failed: ${res.status} ${JSON.stringify(res.body)}`);
        all.push(...res.body.deliveries);
        token = res.body.next_page_token ?? "";
        if (!token) return all;
      }
    };
    const deliveries = await waitFor(
      "every stored decision acknowledged and nothing pending",
      async () => {
        const seen = new Set(receiver!.acknowledged.map((a) => a.envelope.data.decision_id as string));
        if ([...stored.keys()].some((id) => !seen.has(id))) return undefined;
        const listed = await listDeliveries();
        return listed.length === stored.size && listed.every((d) => d.state === "delivered") && listed;
      },
      { timeoutMs: WATCHDOG_MS, intervalMs: 200 },
    );

    // Per decision: the distinct webhook-ids and events the receiver acknowledged.
    const byDecision = new Map<string, { webhookIds: Set<string>; events: Set<string>; eventIds: Set<string> }>();
    for (const { webhookId, envelope } of receiver.acknowledged) {
      const id = envelope.data.decision_id as string;
      const entry = byDecision.get(id) ?? { webhookIds: new Set(), events: new Set(), eventIds: new Set() };
      entry.webhookIds.add(webhookId);
      entry.events.add(envelope.event);
      entry.eventIds.add(envelope.event_id);
      byDecision.set(id, entry);
    }
    const duplicates = receiver.acknowledged.length - new Set(receiver.acknowledged.map((a) => a.webhookId)).size;
    console.log(
      `[events-crash] ${ok.length} answered 200 before the kill (${acknowledgedBeforeKill} of them acknowledged by then), ${cutOff.length} cut off, ${stored.size} decisions stored ` +
        `(${stored.size - ok.length} committed but unanswered), ${receiver.acknowledged.length} deliveries acknowledged (${duplicates} repeats of a webhook-id; ${heldAtKill.length} answers held at the kill), ${receiver.refused.length} refused`,
    );

    expect(receiver.refused).toEqual([]);
    // At least once: every delivery whose 2xx the dead service never got came again, same webhook-id.
    expect(heldAtKill.length).toBeGreaterThan(0);
    for (const id of heldAtKill) expect(receiver.acknowledged.filter((a) => a.webhookId === id).length, id).toBeGreaterThanOrEqual(2);
    // 1. Every decision answered 200: exactly one delivery (one webhook-id, one event id), of the event its outcome calls for.
    for (const answer of ok) {
      const got = byDecision.get(answer.decision_id);
      expect(got, answer.decision_id).toBeDefined();
      expect([...got!.webhookIds], answer.decision_id).toHaveLength(1);
      expect([...got!.eventIds], answer.decision_id).toHaveLength(1);
      expect([...got!.events]).toEqual([answer.outcome === "HUMAN_REVIEW" ? "HumanReviewRequested" : "DecisionCompleted"]);
    }
    // 2. No event names a decision the database does not hold, and each matches the stored outcome.
    for (const [id, got] of byDecision) {
      expect(stored.has(id), `the receiver saw ${id}, which the database does not hold`).toBe(true);
      expect([...got.webhookIds], id).toHaveLength(1);
      expect([...got.events]).toEqual([stored.get(id) === "HUMAN_REVIEW" ? "HumanReviewRequested" : "DecisionCompleted"]);
    }
    // 3. And every stored decision was delivered: one delivery each, recorded as delivered.
    expect(new Set(byDecision.keys())).toEqual(new Set(stored.keys()));
    expect(deliveries).toHaveLength(stored.size);
    expect(new Set(deliveries.map((d: any) => d.delivery_id))).toEqual(new Set(receiver.acknowledged.map((a) => a.webhookId)));

    const stopped = await (async () => {
      const exited2 = new Promise<number | null>((r) => second.child.once("exit", (code) => r(code)));
      second.child.kill("SIGTERM");
      return exited2;
    })();
    running.splice(running.indexOf(second.svc), 1);
    expect(stopped).toBe(0);
  }, 240_000);
});
