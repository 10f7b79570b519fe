import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CapabilityService, VerifyCapabilityRequestSchema } from "../../src/gen/mandate/v1/capabilities_pb.js";
import { ErrorDetailSchema } from "../../src/gen/mandate/v1/errors_pb.js";
import { IntentService, SubmitIntentRequestSchema } from "../../src/gen/mandate/v1/intents_pb.js";
import { recordRow, scaled } from "../hostile/report.js";
import { intentDoc, newAgent, newOrgFixture, signBody, type OrgFixture, type TestAgent } from "../support/agents.js";
import { answers, startOwnedPostgres, type OwnedPostgres } from "../support/postgres.js";
import { startService, type TestService } from "../support/service.js";
import { waitFor, within } from "../support/wait.js";
import { allowedCapability, expectConsumed, verify, type Presentation } from "./capabilities-support.js";

/*
 * Postgres unreachable or unresponsive is a 503 `unavailable` with Retry-After, answered within a
 * bounded time, never a 500 and never a hang (docs/architecture.md, Error model): every database
 * wait (connecting, a pooled connection, a statement) is bounded by MANDATE_DATABASE_TIMEOUT_MS.
 * The service runs against a Postgres of this file's own, which is stopped (connections refused)
 * and frozen with SIGSTOP (connections accepted, nothing answers); once it is back the service
 * serves again by itself.
 */

const TIMEOUT_MS = 1000;
/** How long an answer may take while Postgres is out: one bounded wait, with room for a loaded machine. */
const BOUND_MS = TIMEOUT_MS + 2000;
/** Concurrent Intents per way in (/v1, the gRPC fast path, connect-node) and verifies per transport during each outage. */
const INTENTS_PER_PATH = scaled(8, 24);
const VERIFIES_PER_TRANSPORT = scaled(4, 12);

/**
 * The hostile suite's row (test/hostile/report.ts; only written under `npm run test:hostile`): every
 * request made while Postgres was out (a failure: anything but 503 `unavailable` with Retry-After,
 * or no answer within the watchdog) and every request after it came back (a failure: not served).
 * Counted before the assertions.
 */
const tally = { probes: 0, failures: 0, slowestMs: 0, outages: 0 };
afterAll(() => {
  recordRow({
    order: 6,
    attack: "Postgres stopped and frozen (tcp and unix socket): Intents, verifies, /readyz",
    probes: tally.probes,
    failures: tally.failures,
    note: `${tally.outages} outages; slowest answer during one ${tally.slowestMs} ms (bound ${BOUND_MS} ms); served again after each`,
  });
});

describe.each(["tcp", "unix socket"] as const)("Postgres stopped or frozen (over %s) → 503 unavailable with Retry-After, in bounded time", (over) => {
  let postgres: OwnedPostgres;
  let svc: TestService;
  let org: OrgFixture;
  let agent: TestAgent;

  beforeAll(async () => {
    postgres = await startOwnedPostgres();
    svc = await startService({ DATABASE_URL: over === "tcp" ? postgres.url : postgres.socketUrl, REDIS_URL: undefined, MANDATE_DATABASE_TIMEOUT_MS: String(TIMEOUT_MS) });
    org = await newOrgFixture(svc);
    agent = await newAgent(svc, org);
  });
  afterAll(async () => {
    await svc?.close();
    await postgres?.destroy();
  });

  interface Outcome {
    what: string;
    ms: number;
    status: number;
    detail: string | undefined;
    retryAfter: string | null;
  }

  /** Runs `attempt`, timing it; one not answered within three times the bound is reported as such (a watchdog). */
  async function timed(what: string, attempt: () => Promise<Omit<Outcome, "what" | "ms">>): Promise<Outcome> {
    const started = performance.now();
    const outcome = await within(what, attempt(), 3 * BOUND_MS).catch((err: Error) => ({ status: 0, detail: err.message, retryAfter: null }));
    return { what, ms: Math.round(performance.now() - started), ...outcome };
  }

  /** A gRPC call's failure as an outcome; the retry hint is read from the trailers. */
  function grpcOutcome(err: unknown): Omit<Outcome, "what" | "ms"> {
    const e = ConnectError.from(err);
    const [d] = e.findDetails(ErrorDetailSchema);
    return { status: e.code === Code.Unavailable ? 503 : -e.code, detail: d?.detail, retryAfter: e.metadata.get("retry-after") };
  }

  async function v1Intent(): Promise<Omit<Outcome, "what" | "ms">> {
    const signed = signBody(agent, intentDoc(agent.agentId));
    const res = await svc.v1("POST", "/v1/intents", { body: signed.bytes, headers: { "x-service-key-id": signed.keyId, "x-service-signature": signed.signature } });
    return { status: res.status, detail: res.body?.detail, retryAfter: res.headers.get("retry-after") };
  }

  /** SubmitIntent over gRPC: uncompressed the unary fast path answers, compressed connect-node. */
  async function grpcIntent(viaConnectNode: boolean): Promise<Omit<Outcome, "what" | "ms">> {
    const signed = signBody(agent, intentDoc(agent.agentId));
    try {
      await (viaConnectNode ? svc.grpcViaConnectNode(IntentService) : svc.grpc(IntentService)).submitIntent(create(SubmitIntentRequestSchema, { intent: signed.bytes }), {
        headers: { "x-service-key-id": signed.keyId, "x-service-signature": signed.signature },
      });
      return { status: 200, detail: undefined, retryAfter: null };
    } catch (err) {
      return grpcOutcome(err);
    }
  }

  async function v1Verify(p: Presentation): Promise<Omit<Outcome, "what" | "ms">> {
    const res = await svc.v1("POST", "/v1/capability-tokens/verify", { bearer: org.apiKey, body: p });
    return { status: res.status, detail: res.body?.detail, retryAfter: res.headers.get("retry-after") };
  }

  async function grpcVerify(p: Presentation): Promise<Omit<Outcome, "what" | "ms">> {
    try {
      await svc.grpc(CapabilityService).verifyCapability(create(VerifyCapabilityRequestSchema, { ...p }), { headers: { authorization: `Bearer ${org.apiKey}` } });
      return { status: 200, detail: undefined, retryAfter: null };
    } catch (err) {
      return grpcOutcome(err);
    }
  }

  async function readyz(): Promise<Omit<Outcome, "what" | "ms">> {
    const res = await svc.v1("GET", "/readyz");
    return { status: res.status, detail: res.body?.detail, retryAfter: res.headers.get("retry-after") };
  }

  /**
   * While Postgres is out: Intents over /v1, the gRPC fast path and connect-node, verifies over
   * /v1 and gRPC, and /readyz, all at once (so that pooled connections, new connections and the
   * wait for a pooled connection are all exercised), each answer 503 `unavailable` with a
   * Retry-After, within the bound.
   */
  async function expectUnavailable(presentation: Presentation): Promise<void> {
    const attempts: Promise<Outcome>[] = [];
    for (let i = 0; i < INTENTS_PER_PATH; i++) {
      attempts.push(timed("v1 intent", v1Intent), timed("grpc intent (fast path)", () => grpcIntent(false)), timed("grpc intent (connect-node)", () => grpcIntent(true)));
    }
    for (let i = 0; i < VERIFIES_PER_TRANSPORT; i++) attempts.push(timed("v1 verify", () => v1Verify(presentation)), timed("grpc verify", () => grpcVerify(presentation)));
    attempts.push(timed("readyz", readyz));
    const outcomes = await Promise.all(attempts);
    const slowest = Math.max(...outcomes.map((o) => o.ms));
    console.log(`[postgres-outage] slowest answer ${slowest} ms (bound ${BOUND_MS} ms)`);
    tally.outages++;
    tally.slowestMs = Math.max(tally.slowestMs, slowest);
    tally.probes += outcomes.length;
    tally.failures += outcomes.filter((o) => o.status !== 503 || o.detail !== "unavailable" || !/^[1-9]\d*$/.test(o.retryAfter ?? "")).length;
    for (const o of outcomes) {
      const seen = JSON.stringify(o);
      expect([o.status, o.detail], seen).toEqual([503, "unavailable"]);
      expect(o.retryAfter, seen).toMatch(/^[1-9]\d*$/);
      // A hang is what the watchdog in timed() catches (status 0 above); the duration itself is
      // printed, not asserted: tests do not race the machine's load.
    }
  }

  /** Once Postgres is back: ready again, and Intents and verifies succeed, without a restart of the service. */
  async function expectRecovered(): Promise<void> {
    await waitFor("Postgres to answer again", () => answers(postgres.url), { timeoutMs: 20_000, intervalMs: 100 });
    try {
      await waitFor("/readyz to answer 200 again", async () => (await readyz()).status === 200, { timeoutMs: 20_000, intervalMs: 100 });
    } catch (err) {
      tally.probes++;
      tally.failures++;
      throw err;
    }
    const statuses: number[] = [];
    for (const intent of [v1Intent, () => grpcIntent(false), () => grpcIntent(true)]) statuses.push((await intent()).status);
    tally.probes += statuses.length;
    tally.failures += statuses.filter((s) => s !== 200).length;
    for (const status of statuses) expect(status).toBe(200);
    const c = await allowedCapability(svc, agent);
    const verified = await verify(svc, "grpc", org.apiKey, c.presentation);
    tally.probes++;
    if (verified.status !== 200) tally.failures++;
    expectConsumed(verified, c);
  }

  /** No request was ever answered with a 500 (/metrics counts outcomes by code). */
  async function expectNoInternalErrors(): Promise<void> {
    const metrics = (await svc.v1("GET", "/metrics")).body as string;
    const internal = metrics.split("\n").filter((l) => l.startsWith("mandate_requests_total") && /detail="(internal|500)"/.test(l));
    expect(internal).toEqual([]);
  }

  it("stopped: connections refused → 503 unavailable with Retry-After; serves again once it is back", async () => {
    const c = await allowedCapability(svc, agent);
    await postgres.stop();
    try {
      await expectUnavailable(c.presentation);
    } finally {
      await postgres.start();
    }
    await expectRecovered();
    await expectNoInternalErrors();
  });

  it("frozen (SIGSTOP): nothing answers → 503 unavailable with Retry-After within the bound, never a hang; serves again after SIGCONT", async () => {
    const c = await allowedCapability(svc, agent);
    postgres.freeze();
    try {
      await expectUnavailable(c.presentation);
      // Again, now that the connections that were pooled before the freeze have timed out.
      await expectUnavailable(c.presentation);
    } finally {
      postgres.thaw();
    }
    await expectRecovered();
    await expectNoInternalErrors();
  });
});
