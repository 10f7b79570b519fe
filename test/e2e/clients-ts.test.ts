import { createPrivateKey, createPublicKey } from "node:crypto";
import net from "node:net";
import { chmod, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import { inspect } from "node:util";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  AgentKey,
  agentIdentity,
  AuthenticationError,
  boundConstraints,
  ConflictError,
  MandateClient,
  MandateError,
  NotFoundError,
  PermissionDeniedError,
  RateLimitedError,
  ResolutionTimeoutError,
  ServerError,
  TransportError,
  ValidationError,
  verifyWebhook,
  WebhookVerificationError,
  type AgentIdentity,
  type EventEnvelope,
  type MandateClientOptions,
} from "@mandate/client";
import { loadKey, loadOrCreateKey, saveKey } from "@mandate/client/node";
import { Webhook } from "standardwebhooks";
import { freePort } from "../support/global-setup.js";
import { startService, uniqueEmail, type TestService } from "../support/service.js";
import { deferred, waitFor, within } from "../support/wait.js";

/*
 * Issue 8: the TypeScript client (`@mandate/client`) against a live service,
 * the same scenario suite as the Python client's (clients/python/tests):
 * sandbox → register twice → activate → ALLOW → capability → verify → replay;
 * HUMAN_REVIEW → poll while a reviewer approves → from-review capability; a
 * tampered signature is a typed error sent once; and retries observed against
 * a stub server that answers 503 twice, then 200.
 */

let svc: TestService;
let dir: string;

beforeAll(async () => {
  svc = await startService();
  dir = await mkdtemp(path.join(os.tmpdir(), "mandate-client-ts-"));
});
afterAll(async () => {
  await svc?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** A fetch that counts the requests it sends (method and path). */
function countingFetch(): { fetch: typeof fetch; calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    fetch: (input, init) => {
      calls.push(`${init?.method ?? "GET"} ${new URL(String(input)).pathname}`);
      return fetch(input, init);
    },
  };
}

/** An organization (sandbox), its client, a principal and an active agent with its identity. */
async function sandboxAgent(options: Partial<MandateClientOptions> = {}) {
  const anonymous = new MandateClient({ base_url: svc.baseUrl, ...options });
  const sandbox = await anonymous.createSandbox(uniqueEmail("ts-client"));
  const client = anonymous.withApiKey(sandbox.api_key);
  const principal = await client.createPrincipal({ display_name: "Accounts Payable", kind: "role" });
  const key = await AgentKey.generate();
  const agent = await client.registerAgent({ name: "ts-agent", principal_id: principal.principal_id, key });
  await client.activate(agent);
  return { sandbox, client, principal, key, agent, identity: agentIdentity(agent, key) };
}

describe("the scenario: sandbox → register twice → activate → ALLOW → capability → verify → replay", () => {
  it("runs end to end with one identity per private key", async () => {
    const client = new MandateClient({ base_url: svc.baseUrl });
    const sandbox = await client.createSandbox(uniqueEmail("ts-scenario"));
    expect(sandbox.starter_policy_key).toBe("starter");
    expect(sandbox.organization_id).toMatch(/\S/);
    const org = client.withApiKey(sandbox.api_key);
    const principal = await org.createPrincipal({ display_name: "Pat Payables", kind: "person", external_ref: "pat" });

    // The key is generated locally and kept in a 0600 file; only the public key is uploaded.
    const keyFile = path.join(dir, "scenario.pem");
    const key = await loadOrCreateKey(keyFile);
    expect((await stat(keyFile)).mode & 0o777).toBe(0o600);
    const first = await org.registerAgent({ name: "payables-bot", principal_id: principal.principal_id, key, environment: "sandbox" });
    expect(first.state).toBe("registered");
    expect(first.public_key).toBe(key.public_key);
    expect(first.environment).toBe("sandbox");

    // Registering again with the same private key (read back from its file) is the same identity.
    const again = await org.registerAgent({ name: "payables-bot", principal_id: principal.principal_id, key: await loadOrCreateKey(keyFile) });
    expect(again.agent_id).toBe(first.agent_id);
    expect(again.certificate_id).toBe(first.certificate_id);

    const active = await org.activate(first, "go live");
    expect(active.state).toBe("active");
    const agent: AgentIdentity = agentIdentity(first, key);

    const intent = { action: "reference_noop", amount: 12.5, currency: "EUR", counterparty: "ACME Corp" };
    const decision = await org.submitIntent(agent, intent);
    expect(decision).toMatchObject({ outcome: "ALLOW", reason: "starter_reference_action" });
    expect(Object.keys(decision).sort()).toEqual(["decision_id", "evaluated_at", "evidence_id", "outcome", "reason"]);
    expect(decision.evaluated_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);

    const capability = await org.issueCapability(decision.decision_id, { audience: "erp-gateway", issued_by: "payables-bot", ttl_seconds: 120 });
    expect(capability.token.split(".")).toHaveLength(3);
    expect(Date.parse(capability.expires_at) - Date.now()).toBeLessThanOrEqual(121_000);

    const constraints = boundConstraints(intent);
    expect(constraints).toEqual({ amount: "12.5", currency: "EUR", counterparty: "ACME Corp" });
    const verifyArgs = { token: capability.token, audience: "erp-gateway", action: "reference_noop", resource: "", constraints };

    // A changed bound constraint is a 409 that leaves the token unconsumed…
    const mismatch = await org.verifyCapability({ ...verifyArgs, constraints: { ...constraints, amount: "125" } }).catch((e: unknown) => e);
    expect(mismatch).toBeInstanceOf(ConflictError);
    expect((mismatch as ConflictError).detail).toBe("capability_constraint_mismatch");

    // …so the right one still verifies, exactly once.
    const verified = await org.verifyCapability(verifyArgs);
    expect(verified).toEqual({ capability_id: capability.capability_id, decision_id: decision.decision_id, resource: "", constraints });
    const replay = await org.verifyCapability(verifyArgs).catch((e: unknown) => e);
    expect(replay).toBeInstanceOf(ConflictError);
    expect(replay).toMatchObject({ status: 409, detail: "capability_consumed" });
    expect((replay as ConflictError).request_id).toMatch(/\S/);

    // The Capability as stored: consumed, with the lifetime it was issued with; never its token.
    const stored = await org.getCapability(capability.capability_id);
    expect(stored).toMatchObject({
      capability_id: capability.capability_id,
      decision_id: decision.decision_id,
      agent_id: first.agent_id,
      state: "consumed",
      audience: "erp-gateway",
      issued_by: "payables-bot",
      constraints,
      expires_at: capability.expires_at,
      ttl_seconds: 120,
    });
    expect(Date.parse(stored.expires_at) - Date.parse(stored.issued_at)).toBe(120_000);
    expect(JSON.stringify(stored)).not.toContain(capability.token);

    // The same nonce and bytes answer the same decision (what makes a retried Intent safe).
    const nonce = crypto.randomUUID();
    const requestedAt = new Date().toISOString();
    const once = await org.submitIntent(agent, { action: "reference_noop", nonce, requested_at: requestedAt });
    const twice = await org.submitIntent(agent, { action: "reference_noop", nonce, requested_at: requestedAt });
    expect(twice.decision_id).toBe(once.decision_id);
  });
});

describe("the scenario: HUMAN_REVIEW → poll → approve → from-review capability", () => {
  it("polls as the agent while a reviewer approves, then issues from the review", async () => {
    // The reviewer approves only once the poller has read the decision twice (both PENDING, as
    // nothing was approved yet): an explicit order instead of a timer racing the poll interval.
    let polls = 0;
    let pollsBeforeReview = -1;
    const pollingSeen = deferred();
    const watching: typeof fetch = async (input, init) => {
      const res = await fetch(input, init);
      if ((init?.method ?? "GET") === "GET" && /^\/v1\/decisions\/[^/]+$/.test(new URL(String(input)).pathname) && ++polls === 2) pollingSeen.resolve();
      return res;
    };
    const { client, identity } = await sandboxAgent({ fetch: watching });
    const decision = await client.submitIntent(identity, { action: "wire_transfer", resource: "account:DE89-3704", context: { ticket: "FIN-7" } });
    expect(decision).toMatchObject({ outcome: "HUMAN_REVIEW", reason: "unrecognized_action", status: "PENDING" });

    const [resolved] = await Promise.all([
      // stream: false keeps this the polling path; the stream's is tested under "events" below.
      client.waitForResolution(decision.decision_id, { agent: identity, interval_ms: 20, timeout_ms: 20_000, stream: false }),
      pollingSeen.promise.then(() => {
        pollsBeforeReview = polls;
        return client.reviewDecision(decision.decision_id, "approved", "Checked with treasury.");
      }),
    ]);
    // It kept polling through PENDING and returned only after a read that saw the approval.
    expect(pollsBeforeReview).toBeGreaterThanOrEqual(2);
    expect(polls).toBeGreaterThan(pollsBeforeReview);
    expect(resolved.outcome).toBe("HUMAN_REVIEW"); // never rewritten to ALLOW
    expect(resolved.status).toBe("RESOLVED");
    expect(resolved.resolution).toMatchObject({ resolution: "approved", reason: "Checked with treasury." });

    const direct = await client.issueCapability(decision.decision_id, { audience: "bank", issued_by: "ops" }).catch((e: unknown) => e);
    expect(direct).toBeInstanceOf(ConflictError);
    const capability = await client.issueCapabilityFromReview(decision.decision_id, { audience: "bank", issued_by: "ops" });
    const verified = await client.verifyCapability({ token: capability.token, audience: "bank", action: "wire_transfer", resource: "account:DE89-3704", constraints: {} });
    expect(verified.decision_id).toBe(decision.decision_id);
    expect(verified.resource).toBe("account:DE89-3704");
  });

  it("gives up with ResolutionTimeoutError while the review stays pending", async () => {
    const { client, identity } = await sandboxAgent();
    const decision = await client.submitIntent(identity, { action: "open_account" });
    for (const stream of [false, true]) {
      const err = await client.waitForResolution(decision.decision_id, { timeout_ms: 300, interval_ms: 50, stream }).catch((e: unknown) => e);
      expect(err, `stream: ${stream}`).toBeInstanceOf(ResolutionTimeoutError);
      expect(err).toBeInstanceOf(MandateError);
      expect((err as ResolutionTimeoutError).detail).toBe("resolution_timeout");
    }
  });
});

describe("typed errors, never retried for a 4xx", () => {
  it("a tampered signature is an AuthenticationError sent exactly once", async () => {
    const counter = countingFetch();
    const { client, agent } = await sandboxAgent({ fetch: counter.fetch, max_retries: 6, backoff_base_ms: 1 });
    const impostor: AgentIdentity = agentIdentity(agent, await AgentKey.generate());
    counter.calls.length = 0;
    const err = await client.submitIntent(impostor, { action: "reference_noop" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AuthenticationError);
    expect(err).toMatchObject({ status: 401, detail: "signature_invalid" });
    expect((err as AuthenticationError).request_id).toMatch(/\S/);
    expect((err as AuthenticationError).message).toMatch(/\S/);
    expect(counter.calls).toEqual(["POST /v1/intents"]);

    counter.calls.length = 0;
    const unknown = await client.submitIntent({ ...impostor, certificate_id: "crt_unknown" }, { action: "reference_noop" }).catch((e: unknown) => e);
    expect(unknown).toMatchObject({ status: 401, detail: "unknown_key" });
    expect(counter.calls).toHaveLength(1);
  });

  it("maps 403, 404, 409 and 422 to their classes, each after one request", async () => {
    const counter = countingFetch();
    const { client, principal, identity } = await sandboxAgent({ fetch: counter.fetch, max_retries: 6, backoff_base_ms: 1 });
    const cases: [() => Promise<unknown>, abstract new (...args: never[]) => MandateError, number, string][] = [
      [() => new MandateClient({ base_url: svc.baseUrl, fetch: counter.fetch }).createPrincipal({ display_name: "x", kind: "person" }), AuthenticationError, 401, "missing_credentials"],
      [() => client.getDecision("dec_missing"), NotFoundError, 404, "not_found"],
      [() => client.activate(identity), ConflictError, 409, "invalid_transition"],
      [() => client.createPrincipal({ display_name: "x", kind: "robot" as never }), ValidationError, 422, "validation_failed"],
      [
        async () => {
          const key = await AgentKey.generate();
          const fresh = await client.registerAgent({ name: "idle", principal_id: principal.principal_id, key });
          return client.submitIntent(agentIdentity(fresh, key), { action: "reference_noop" });
        },
        PermissionDeniedError,
        403,
        "agent_not_active",
      ],
    ];
    for (const [run, Class, status, detail] of cases) {
      counter.calls.length = 0;
      const err = await run().catch((e: unknown) => e);
      expect(err, detail).toBeInstanceOf(Class);
      expect(err).toMatchObject({ status, detail });
      expect(counter.calls.filter((c) => c !== "POST /v1/agents"), detail).toHaveLength(1);
    }
    const invalid = (await client.createPrincipal({ display_name: "x", kind: "robot" as never }).catch((e: unknown) => e)) as ValidationError;
    expect(invalid.errors.map((e) => e.field)).toContain("kind");
  });
});

describe("lifecycle", () => {
  it("heartbeat, suspend, reactivate, rotate-key, revoke and retire", async () => {
    const { client, principal, agent, identity } = await sandboxAgent();
    const beat = await client.heartbeat(identity);
    expect(beat).toMatchObject({ agent_id: agent.agent_id, state: "active" });

    expect((await client.suspend(agent, "investigating")).state).toBe("suspended");
    const held = await client.submitIntent(identity, { action: "reference_noop" });
    expect(held).toMatchObject({ outcome: "HUMAN_REVIEW", reason: "agent_suspended", status: "PENDING" });
    expect((await client.reactivate(agent)).state).toBe("active");

    const newKey = await AgentKey.generate();
    const rotated = await client.rotateKey(agent, newKey);
    expect(rotated.certificate_id).not.toBe(agent.certificate_id);
    expect(rotated.public_key).toBe(newKey.public_key);
    await expect(client.submitIntent(identity, { action: "reference_noop" })).rejects.toMatchObject({ status: 401, detail: "unknown_key" });
    const current = agentIdentity(rotated, newKey);
    const decision = await client.submitIntent(current, { action: "reference_noop" });
    expect(decision.outcome).toBe("ALLOW");
    // The agent reads its own decision with a signed GET.
    expect((await client.getDecision(decision.decision_id, { agent: current })).decision_id).toBe(decision.decision_id);

    expect((await client.revoke(agent, "key leaked")).state).toBe("revoked");
    await expect(client.submitIntent(current, { action: "reference_noop" })).rejects.toMatchObject({ status: 403, detail: "agent_revoked" });

    const otherKey = await AgentKey.generate();
    const other = await client.registerAgent({ name: "old", principal_id: principal.principal_id, key: otherKey });
    expect((await client.retire(other)).state).toBe("retired");
    await expect(client.activate(other)).rejects.toBeInstanceOf(ConflictError);
  });
});

describe("governance", () => {
  it("documents parsed at upload, named and deletable; a graph version approved by a second key, published and readable", async () => {
    const { client } = await sandboxAgent();
    const refused = await client
      .uploadGovernanceDocument("matrix.csv", "approval_matrix", "csv", "action,currency,up_to_amount,approvals_required\nvendor_payment,USD,lots,0\n")
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ValidationError);
    expect((refused as ValidationError).errors).toEqual([expect.objectContaining({ field: "content[line 2].up_to_amount", line: 2, column: 3 })]);
    const doc = await client.uploadGovernanceDocument("schedule.csv", "signing_schedule", "csv", "principal,role,reports_to\n,clerk,controller\n,controller,\n");
    expect(doc).toMatchObject({ name: "schedule.csv", kind: "signing_schedule", rows: 2 });
    await expect(client.uploadGovernanceDocument("schedule.csv", "signing_schedule", "csv", "principal,role,reports_to\n,clerk,\n")).rejects.toBeInstanceOf(ConflictError);
    expect((await client.listGovernanceDocuments()).map((d) => d.document_id)).toEqual([doc.document_id]);

    const draft = await client.generateGraphVersion();
    expect(draft).toEqual({ version: 1, state: "draft", warnings: [] });
    await expect(client.approveGraphVersion(draft.version)).rejects.toBeInstanceOf(PermissionDeniedError);
    const approver = client.withApiKey((await client.createApiKey("approver", ["POLICY_APPROVER"])).api_key);
    expect((await approver.approveGraphVersion(draft.version)).state).toBe("approved");
    expect((await approver.publishGraphVersion(draft.version)).state).toBe("active");

    await client.deleteGovernanceDocument(doc.document_id);
    expect(await client.listGovernanceDocuments()).toEqual([]);
    const [listed, ...rest] = await client.listGraphVersions();
    expect(rest).toEqual([]);
    expect(listed).toMatchObject({ version: 1, state: "active", published_at: expect.any(String) });
    expect(listed!.graph).toBeUndefined();
    const read = await client.getGraphVersion(1);
    expect(read.approver).not.toBe(read.author);
    expect((read.graph!.roles as { role: string }[]).map((r) => r.role)).toEqual(["clerk", "controller"]);
    await expect(client.getGraphVersion(2)).rejects.toBeInstanceOf(NotFoundError);
  });
});

describe("the operator key", () => {
  it("acts for the organization it names, and for none without one", async () => {
    const { sandbox, client } = await sandboxAgent();
    const operator = new MandateClient({ base_url: svc.baseUrl, operator_key: svc.operatorKey, organization_id: sandbox.organization_id });
    const principal = await operator.createPrincipal({ display_name: "Ops", kind: "service" });
    const key = await AgentKey.generate();
    const agent = await operator.registerAgent({ name: "ops-bot", principal_id: principal.principal_id, key });
    expect((await operator.activate(agent)).state).toBe("active");
    expect((await client.getAgent(agent.agent_id)).acting_for_principal_id).toBe(principal.principal_id);
    const unnamed = new MandateClient({ base_url: svc.baseUrl, operator_key: svc.operatorKey });
    await expect(unnamed.createPrincipal({ display_name: "x", kind: "person" })).rejects.toMatchObject({ status: 401, detail: "missing_credentials" });
  });
});

describe("keys", () => {
  it("loadOrCreateKey started many times at once gives every caller the same key, never a half-written file", async () => {
    for (let round = 0; round < 10; round++) {
      const file = path.join(dir, `race-${round}.pem`);
      const keys = await Promise.all(Array.from({ length: 12 }, () => loadOrCreateKey(file)));
      expect(new Set(keys.map((k) => k.public_key)).size, `round ${round}`).toBe(1);
      expect((await stat(file)).mode & 0o777).toBe(0o600);
    }
    // A reader racing the writer finds no file or the whole key, never a part of it.
    for (let round = 0; round < 50; round++) {
      const file = path.join(dir, `read-race-${round}.pem`);
      const key = await AgentKey.generate();
      const reads = Array.from({ length: 20 }, () => loadKey(file).then((k) => k.public_key, (err: NodeJS.ErrnoException) => (err.code === "ENOENT" ? null : `${err.message}`)));
      const [, ...seen] = await Promise.all([saveKey(key, file), ...reads]);
      for (const s of seen) expect([null, key.public_key], `round ${round}`).toContain(s);
    }
    // Nothing is left beside the key files.
    expect((await readdir(dir)).filter((f) => f.startsWith("."))).toEqual([]);
  });

  it("an overwritten key file is owner-only from the first byte, whatever mode the old one had", async () => {
    const file = path.join(dir, "wide.pem");
    await writeFile(file, "old", { mode: 0o644 });
    await chmod(file, 0o644);
    const key = await AgentKey.generate();
    await saveKey(key, file, { overwrite: true });
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect((await loadKey(file)).public_key).toBe(key.public_key);
  });

  it("never show their secret, nor a client its API key, when logged or serialized", async () => {
    const key = await AgentKey.generate();
    const identity = { agent_id: "agt_1", certificate_id: "crt_1", key };
    const client = new MandateClient({ base_url: "http://127.0.0.1:1", api_key: "mk_secret_value" });
    const seed = Buffer.from(createPrivateKey(key.toPem()).export({ format: "jwk" }).d!, "base64url");
    for (const shown of [JSON.stringify(identity), JSON.stringify(client), inspect(identity, { depth: 5 }), inspect(client, { depth: 5 })]) {
      expect(shown).not.toContain("mk_secret_value");
      expect(shown).not.toContain("seed");
      expect(shown).not.toContain(seed.toString("base64"));
      expect(shown).not.toContain(`${seed[0]},${seed[1]},${seed[2]}`);
    }
    expect(Object.keys(key)).toEqual(["public_key_bytes"]);
  });

  it("are standard PKCS#8 PEM files, owner-only, never overwritten by accident", async () => {
    const file = path.join(dir, "key.pem");
    const key = await AgentKey.generate();
    await saveKey(key, file);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    await expect(saveKey(key, file)).rejects.toMatchObject({ code: "EEXIST" });
    const pem = await readFile(file, "utf8");
    // OpenSSL (via node:crypto) reads it and derives the same public key.
    const raw = Buffer.from(createPublicKey(createPrivateKey(pem)).export({ format: "jwk" }).x!, "base64url");
    expect(key.public_key).toBe(`ed25519:base64:${raw.toString("base64")}`);
    expect((await loadKey(file)).public_key).toBe(key.public_key);
    expect(await (await loadKey(file)).sign("hello")).toBe(await key.sign("hello"));
    expect((await AgentKey.fromPem(pem)).public_key).toBe(key.public_key);
    await expect(AgentKey.fromPem("-----BEGIN PRIVATE KEY-----\n%%%\n-----END PRIVATE KEY-----\n")).rejects.toThrow("not base64");
  });
});

/** A stub /v1 server: `answer(n, req, body)` decides the n-th (from 1) response. */
async function stubServer(answer: (n: number, req: http.IncomingMessage, body: Buffer) => { status: number; body?: unknown; headers?: Record<string, string> } | null) {
  const seen: { method: string; url: string; body: Buffer; headers: http.IncomingHttpHeaders; at: number }[] = [];
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    seen.push({ method: req.method!, url: req.url!, body, headers: req.headers, at: performance.now() });
    const a = answer(seen.length, req, body);
    if (a === null) return; // never answer: the client must time out
    res.writeHead(a.status, { "content-type": "application/json", "x-request-id": `stub-${seen.length}`, ...a.headers });
    res.end(JSON.stringify(a.body ?? {}));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, seen, close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }) };
}

const UNAVAILABLE = { detail: "unavailable", message: "Temporarily unavailable.", request_id: "stub" };

describe("retries (against a stub server)", () => {
  it("retries 503 twice then succeeds, resending the same signed bytes", async () => {
    const decision = { decision_id: "dec_1", outcome: "ALLOW", reason: "starter_reference_action", evidence_id: "evd_1", evaluated_at: new Date().toISOString() };
    const stub = await stubServer((n) => (n <= 2 ? { status: 503, body: UNAVAILABLE } : { status: 200, body: decision }));
    try {
      const client = new MandateClient({ base_url: stub.url, max_retries: 4, backoff_base_ms: 10, backoff_cap_ms: 50 });
      const key = await AgentKey.generate();
      const result = await client.submitIntent({ agent_id: "agt_1", certificate_id: "crt_1", key }, { action: "reference_noop", amount: 5 });
      expect(result).toEqual(decision);
      expect(stub.seen).toHaveLength(3);
      expect(new Set(stub.seen.map((s) => s.body.toString("hex"))).size).toBe(1);
      expect(new Set(stub.seen.map((s) => s.headers["x-service-signature"])).size).toBe(1);
      expect(stub.seen[0]!.headers["x-service-key-id"]).toBe("crt_1");
      expect(stub.seen[0]!.headers.authorization).toBeUndefined();
      expect(JSON.parse(stub.seen[0]!.body.toString())).toMatchObject({ agent_id: "agt_1", action: "reference_noop", amount: 5 });
    } finally {
      await stub.close();
    }
  });

  it("stops after max_retries with a ServerError carrying the last answer", async () => {
    const stub = await stubServer(() => ({ status: 503, body: UNAVAILABLE }));
    try {
      const client = new MandateClient({ base_url: stub.url, api_key: "k", max_retries: 3, backoff_base_ms: 1, backoff_cap_ms: 5 });
      const err = await client.getDecision("dec_1").catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ServerError);
      expect(err).toMatchObject({ status: 503, detail: "unavailable", request_id: "stub" });
      expect(stub.seen).toHaveLength(4);
      expect(stub.seen[0]!.headers.authorization).toBe("Bearer k");
    } finally {
      await stub.close();
    }
  });

  it("waits at least the service's Retry-After before retrying a 503, however short its own backoff", async () => {
    const stub = await stubServer((n) => (n === 1 ? { status: 503, body: UNAVAILABLE, headers: { "retry-after": "1" } } : { status: 200, body: { agent_id: "agt_1" } }));
    try {
      const client = new MandateClient({ base_url: stub.url, api_key: "k", max_retries: 2, backoff_base_ms: 1, backoff_cap_ms: 5 });
      await client.getAgent("agt_1");
      expect(stub.seen).toHaveLength(2);
      // The wait the service asked for is a floor, not a measurement: a sleep never ends early (a timer may fire a ms before its mark).
      expect(stub.seen[1]!.at - stub.seen[0]!.at).toBeGreaterThanOrEqual(990);
    } finally {
      await stub.close();
    }
  });

  it("waitForResolution gives up at its timeout even while a read hangs: the read is cut there, never retried past it", async () => {
    const pending = { decision_id: "dec_1", outcome: "HUMAN_REVIEW", reason: "requires_approval", evidence_id: "evd_1", evaluated_at: new Date().toISOString(), status: "PENDING" };
    const stub = await stubServer((n) => (n === 1 ? { status: 200, body: pending } : null));
    try {
      const client = new MandateClient({ base_url: stub.url, api_key: "k", timeout_ms: 30_000, max_retries: 3, backoff_base_ms: 1 });
      const err = await client.waitForResolution("dec_1", { timeout_ms: 1_000, interval_ms: 10, stream: false }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ResolutionTimeoutError);
      expect(err).toMatchObject({ detail: "resolution_timeout" });
      // The PENDING read, and the one the deadline cut: no retry after it.
      expect(stub.seen).toHaveLength(2);
    } finally {
      await stub.close();
    }
  });

  it("refuses a max_retries or timeout_ms that is not a finite number (NaN would retry forever)", () => {
    expect(() => new MandateClient({ base_url: "http://127.0.0.1:1", max_retries: Number(undefined) })).toThrow(/max_retries must be a finite number/);
    expect(() => new MandateClient({ base_url: "http://127.0.0.1:1", timeout_ms: Number.POSITIVE_INFINITY })).toThrow(/timeout_ms must be a finite number/);
  });

  it("never retries a 4xx (429 included)", async () => {
    const stub = await stubServer(() => ({ status: 429, body: { detail: "rate_limited", message: "slow down", request_id: "r" } }));
    try {
      const client = new MandateClient({ base_url: stub.url, max_retries: 5, backoff_base_ms: 1 });
      await expect(client.createSandbox("a@example.com")).rejects.toBeInstanceOf(RateLimitedError);
      expect(stub.seen).toHaveLength(1);
    } finally {
      await stub.close();
    }
  });

  it("retries timeouts and refused connections, then raises TransportError", async () => {
    const stub = await stubServer((n) => (n === 1 ? null : { status: 200, body: { agent_id: "agt_1" } }));
    try {
      const client = new MandateClient({ base_url: stub.url, api_key: "k", timeout_ms: 200, max_retries: 2, backoff_base_ms: 1 });
      expect(await client.getAgent("agt_1")).toEqual({ agent_id: "agt_1" });
      expect(stub.seen).toHaveLength(2);
      const never = await stubServer(() => null);
      try {
        const err = await new MandateClient({ base_url: never.url, timeout_ms: 150, max_retries: 1, backoff_base_ms: 1 }).getAgent("a").catch((e: unknown) => e);
        expect(err).toBeInstanceOf(TransportError);
        expect(err).toMatchObject({ status: 0, detail: "timeout" });
        expect(never.seen).toHaveLength(2);
      } finally {
        await never.close();
      }
    } finally {
      await stub.close();
    }
    const closed = await freePort();
    const counter = countingFetch();
    const client = new MandateClient({ base_url: `http://127.0.0.1:${closed}`, fetch: counter.fetch, max_retries: 3, backoff_base_ms: 1 });
    const err = await client.getAgent("agt_1").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransportError);
    expect(err).toMatchObject({ status: 0, detail: "connection_failed" });
    expect((err as TransportError).message).toMatch(/ECONNREFUSED/);
    expect(counter.calls).toHaveLength(4);
  });
});

/* ------------------------------------------------------------------------------------------ */
/* Events (early access): watchEvents over SSE, waitForResolution on the stream, webhooks.      */

/** Collects what an iterator yields, in the background, until it ends or fails. */
function collect(events: AsyncIterable<EventEnvelope>) {
  const got: EventEnvelope[] = [];
  const done = (async () => {
    for await (const e of events) got.push(e);
  })();
  done.catch(() => undefined);
  return { got, done };
}

/**
 * A TCP proxy in front of the service whose open connections the test can cut: a real dropped
 * connection, as a client sees one (the stream's socket closes mid-read). Records the request
 * line each connection carried.
 */
async function cuttableProxy(target: number) {
  const sockets = new Set<net.Socket>();
  const requests: string[] = [];
  const server = net.createServer((client) => {
    const upstream = net.connect(target, "127.0.0.1");
    sockets.add(client).add(upstream);
    let first = true;
    client.on("data", (chunk: Buffer) => {
      if (first) requests.push(chunk.toString("latin1").split("\r\n")[0]!);
      first = false;
    });
    client.pipe(upstream).pipe(client);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on("error", drop).on("close", drop);
    upstream.on("error", drop).on("close", drop);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    cut: () => {
      for (const s of sockets) s.destroy();
    },
    close: () => new Promise<void>((r) => {
      for (const s of sockets) s.destroy();
      server.close(() => r());
    }),
  };
}

const WATCHDOG_MS = 30_000;

describe("events: watchEvents over Server-Sent Events", () => {
  it("yields every event once, in order, across a connection cut mid-stream, resuming with the last event_id", async () => {
    const { sandbox, client, identity } = await sandboxAgent();
    const proxy = await cuttableProxy(svc.port);
    const listening = { direct: deferred(), cut: deferred() };
    const stop = new AbortController();
    try {
      // The same organization watched twice: directly (the reference) and through the proxy (cut).
      const direct = collect(client.watchEvents({ signal: stop.signal, on_listening: () => listening.direct.resolve() }));
      const viaProxy = new MandateClient({ base_url: proxy.url, api_key: sandbox.api_key, backoff_base_ms: 10, backoff_cap_ms: 100 });
      let connections = 0;
      const cut = collect(viaProxy.watchEvents({ signal: stop.signal, on_listening: () => void (++connections === 1 && listening.cut.resolve()) }));
      await within("both streams listening", Promise.all([listening.direct.promise, listening.cut.promise]), WATCHDOG_MS);

      for (let i = 0; i < 4; i++) await client.submitIntent(identity, { action: "reference_noop" });
      await waitFor("the cut stream's first events", () => cut.got.length >= 6, { timeoutMs: WATCHDOG_MS });
      const before = cut.got.length;
      const cursor = cut.got.at(-1)!.event_id;
      proxy.cut();
      for (let i = 0; i < 4; i++) await client.submitIntent(identity, { action: "reference_noop" });
      // Four Intents, three events each (IntentReceived, DecisionCompleted, ReceiptIssued), twice.
      await waitFor("24 events on both streams", () => direct.got.length >= 24 && cut.got.length >= 24, { timeoutMs: WATCHDOG_MS });

      expect(direct.got.map((e) => e.event).slice(0, 3)).toEqual(["IntentReceived", "DecisionCompleted", "ReceiptIssued"]);
      expect(cut.got.map((e) => e.event_id)).toEqual(direct.got.map((e) => e.event_id));
      expect(new Set(cut.got.map((e) => e.event_id)).size).toBe(cut.got.length);
      expect(cut.got).toEqual(direct.got);
      // It reconnected after the cut, with the last event it had yielded as the cursor.
      expect(connections).toBeGreaterThanOrEqual(2);
      expect(proxy.requests[0]).toBe("GET /v1alpha/events:watch HTTP/1.1");
      expect(proxy.requests).toContain(`GET /v1alpha/events:watch?after=${cursor} HTTP/1.1`);
      expect(before).toBeGreaterThanOrEqual(6);
      for (const e of direct.got) {
        expect(Object.keys(e).sort()).toEqual(["data", "event", "event_id", "occurred_at"]);
        expect(e.occurred_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
      }
    } finally {
      stop.abort();
      await proxy.close();
    }
  });

  it("filters by type and resumes from a given cursor; ends quietly when aborted", async () => {
    const { client, identity } = await sandboxAgent();
    const stop = new AbortController();
    const ready = deferred();
    const all = collect(client.watchEvents({ signal: stop.signal, on_listening: () => ready.resolve() }));
    await within("listening", ready.promise, WATCHDOG_MS);
    const review = await client.submitIntent(identity, { action: "open_account" });
    const allow = await client.submitIntent(identity, { action: "reference_noop" });
    await waitFor("six events", () => all.got.length >= 6, { timeoutMs: WATCHDOG_MS });
    stop.abort();
    await within("the aborted iterator's end", all.done, WATCHDOG_MS);

    // From the first event on, only the two outcomes: resumed from a cursor, filtered.
    const again = new AbortController();
    const outcomes: EventEnvelope[] = [];
    for await (const e of client.watchEvents({ after: all.got[0]!.event_id, types: ["DecisionCompleted", "HumanReviewRequested"], signal: again.signal })) {
      outcomes.push(e);
      if (outcomes.length === 2) break;
    }
    expect(outcomes.map((e) => [e.event, e.data.decision_id])).toEqual([
      ["HumanReviewRequested", review.decision_id],
      ["DecisionCompleted", allow.decision_id],
    ]);
  });

  it("never retries a refusal: 403 without EVENTS_READ, 422 for an unknown type or cursor", async () => {
    const counter = countingFetch();
    const { client } = await sandboxAgent({ fetch: counter.fetch, max_retries: 6, backoff_base_ms: 1 });
    const reader = client.withApiKey((await client.createApiKey("reader", ["DECISION_READ"])).api_key);
    const cases: [AsyncGenerator<EventEnvelope>, abstract new (...args: never[]) => MandateError, number, string][] = [
      [reader.watchEvents(), PermissionDeniedError, 403, "permission_denied"],
      [client.watchEvents({ types: ["NoSuchEvent" as never] }), ValidationError, 422, "validation_failed"],
      [client.watchEvents({ after: "evt_0000000000000001_0_nope" }), ValidationError, 422, "validation_failed"],
    ];
    for (const [stream, Class, status, detail] of cases) {
      counter.calls.length = 0;
      const err = await stream.next().catch((e: unknown) => e);
      expect(err, detail).toBeInstanceOf(Class);
      expect(err).toMatchObject({ status, detail });
      expect(counter.calls).toEqual(["GET /v1alpha/events:watch"]);
    }
  });

  it("throws TransportError once the reconnections in a row are spent", async () => {
    const closed = await freePort();
    const counter = countingFetch();
    const client = new MandateClient({ base_url: `http://127.0.0.1:${closed}`, api_key: "k", fetch: counter.fetch, backoff_base_ms: 1, backoff_cap_ms: 5 });
    const err = await client.watchEvents({ max_reconnects: 2 }).next().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransportError);
    expect(err).toMatchObject({ status: 0, detail: "connection_failed" });
    expect(counter.calls).toHaveLength(3);
  });
});

describe("events: watchEvents reconnection (against a stub SSE server)", () => {
  it("resumes after a stream the server ended, a 503 and a silent connection, always from the last event yielded", async () => {
    const envelope = (n: number) => ({ event: "AgentStateChanged", event_id: `evt_${n}`, occurred_at: "2026-11-26T21:00:00.000Z", data: { n } });
    const frame = (n: number) => `id: evt_${n}\nevent: AgentStateChanged\ndata: ${JSON.stringify(envelope(n))}\n\n`;
    const urls: string[] = [];
    const open = new Set<http.ServerResponse>();
    // Per connection: what the stub does. CRLF line ends and a message split across writes on the first.
    const script: ((res: http.ServerResponse) => void)[] = [
      (res) => {
        res.write(": heartbeat\r\n\r\n");
        res.write(frame(1).slice(0, 20));
        res.end(frame(1).slice(20) + frame(2));
      },
      (res) => res.writeHead(503, { "content-type": "application/json" }).end(JSON.stringify(UNAVAILABLE)),
      (res) => res.write(`: heartbeat\n\n${frame(3)}`), // then silent: the idle timer drops it
      (res) => res.write(`: heartbeat\n\n${frame(4)}`),
    ];
    const server = http.createServer((req, res) => {
      urls.push(req.url!);
      open.add(res);
      const step = script[urls.length - 1];
      if (!step) return void res.writeHead(500).end();
      if (urls.length !== 2) res.writeHead(200, { "content-type": "text/event-stream" });
      step(res);
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    try {
      const client = new MandateClient({ base_url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, api_key: "k", backoff_base_ms: 1, backoff_cap_ms: 5 });
      const got: EventEnvelope[] = [];
      for await (const e of client.watchEvents({ types: ["AgentStateChanged"], idle_timeout_ms: 300 })) {
        got.push(e);
        if (got.length === 4) break;
      }
      expect(got).toEqual([1, 2, 3, 4].map(envelope));
      expect(urls).toEqual([
        "/v1alpha/events:watch?types=AgentStateChanged",
        "/v1alpha/events:watch?types=AgentStateChanged&after=evt_2",
        "/v1alpha/events:watch?types=AgentStateChanged&after=evt_2",
        "/v1alpha/events:watch?types=AgentStateChanged&after=evt_3",
      ]);
    } finally {
      for (const res of open) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it("lets an error of on_listening through, without reconnecting", async () => {
    const counter = countingFetch();
    const { sandbox } = await sandboxAgent();
    const client = new MandateClient({ base_url: svc.baseUrl, api_key: sandbox.api_key, fetch: counter.fetch });
    const mine = new Error("the caller's own failure");
    const err = await client
      .watchEvents({
        on_listening: () => {
          throw mine;
        },
      })
      .next()
      .catch((e: unknown) => e);
    expect(err).toBe(mine);
    expect(counter.calls).toEqual(["GET /v1alpha/events:watch"]);
  });
});

describe("events: waitForResolution", () => {
  it("waits on the stream: one read when it listens, one after HumanReviewResolved, no polling", async () => {
    let reads = 0;
    const firstRead = deferred();
    const watching: typeof fetch = async (input, init) => {
      const res = await fetch(input, init);
      if (/^\/v1\/decisions\/[^/]+$/.test(new URL(String(input)).pathname) && ++reads === 1) firstRead.resolve();
      return res;
    };
    const { client, identity } = await sandboxAgent({ fetch: watching });
    const decision = await client.submitIntent(identity, { action: "wire_transfer", resource: "account:DE89-3704" });
    expect(decision).toMatchObject({ outcome: "HUMAN_REVIEW", status: "PENDING" });
    // A poll interval so short that polling would read many times while the review is pending.
    const waiting = client.waitForResolution(decision.decision_id, { agent: identity, interval_ms: 1, timeout_ms: WATCHDOG_MS });
    await within("the read at listening", firstRead.promise, WATCHDOG_MS);
    const readsBeforeReview = reads;
    await client.reviewDecision(decision.decision_id, "rejected", "Not this quarter.");
    const resolved = await waiting;
    expect(resolved).toMatchObject({ decision_id: decision.decision_id, outcome: "HUMAN_REVIEW", status: "RESOLVED", resolution: { resolution: "rejected" } });
    expect(readsBeforeReview).toBe(1);
    expect(reads).toBe(2);
    // An ALLOW is final at once: one read.
    const allow = await client.submitIntent(identity, { action: "reference_noop" });
    expect((await client.waitForResolution(allow.decision_id)).outcome).toBe("ALLOW");
  });

  it("falls back to polling when the key may not read events", async () => {
    const counter = countingFetch();
    const { client, identity } = await sandboxAgent();
    const decision = await client.submitIntent(identity, { action: "open_account" });
    const readerKey = (await client.createApiKey("reader", ["DECISION_READ"])).api_key;
    const reader = new MandateClient({ base_url: svc.baseUrl, api_key: readerKey, fetch: counter.fetch });
    const waiting = reader.waitForResolution(decision.decision_id, { interval_ms: 20, timeout_ms: WATCHDOG_MS });
    await waitFor("two polls", () => counter.calls.filter((c) => c.startsWith("GET /v1/decisions/")).length >= 2, { timeoutMs: WATCHDOG_MS });
    await client.reviewDecision(decision.decision_id, "approved", "ok");
    expect((await waiting).status).toBe("RESOLVED");
    expect(counter.calls[0]).toBe("GET /v1alpha/events:watch");
    expect(counter.calls.filter((c) => c === "GET /v1alpha/events:watch")).toHaveLength(1);
  });
});

describe("events: webhooks", () => {
  it("subscribes a real receiver, verifies its signed deliveries, lists, redelivers, rotates and deletes", async () => {
    const { client, identity } = await sandboxAgent();
    const received: { body: string; headers: http.IncomingHttpHeaders }[] = [];
    const receiver = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        received.push({ body: Buffer.concat(chunks).toString("utf8"), headers: req.headers });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
    try {
      const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;
      const hook = await client.createWebhook({ url, events: ["DecisionCompleted"], description: "ts client" });
      expect(hook).toMatchObject({ url, events: ["DecisionCompleted"], description: "ts client", state: "active" });
      expect(hook.secret).toMatch(/^whsec_/);
      expect((await client.listWebhooks()).map((w) => [w.webhook_id, w.secret ?? ""])).toEqual([[hook.webhook_id, ""]]);
      expect((await client.getWebhook(hook.webhook_id)).secret ?? "").toBe("");

      const decision = await client.submitIntent(identity, { action: "reference_noop" });
      await waitFor("the delivery", () => received.length >= 1, { timeoutMs: WATCHDOG_MS });
      const [first] = received;
      const envelope = verifyWebhook(first!.body, first!.headers as Record<string, string>, hook.secret!);
      expect(envelope).toMatchObject({ event: "DecisionCompleted", data: { decision_id: decision.decision_id, outcome: "ALLOW" } });
      // A fetch Headers works as well as Node's headers, and bytes as well as text.
      expect(verifyWebhook(new TextEncoder().encode(first!.body), new Headers(first!.headers as Record<string, string>), hook.secret!)).toEqual(envelope);

      const { deliveries } = await waitFor("the delivery recorded", async () => {
        const page = await client.listWebhookDeliveries(hook.webhook_id);
        return page.deliveries[0]?.state === "delivered" && page;
      });
      expect(deliveries).toHaveLength(1);
      expect(deliveries[0]).toMatchObject({ delivery_id: first!.headers["webhook-id"], event_id: envelope.event_id, event: "DecisionCompleted" });
      expect(deliveries[0]!.attempts[0]!.status).toBe(204);
      await client.redeliverWebhookDelivery(hook.webhook_id, deliveries[0]!.delivery_id);
      await waitFor("the redelivery", () => received.length >= 2, { timeoutMs: WATCHDOG_MS });
      expect(received[1]!.headers["webhook-id"]).toBe(first!.headers["webhook-id"]);

      const rotated = await client.rotateWebhookSecret(hook.webhook_id);
      expect(rotated.secret).toMatch(/^whsec_/);
      expect(rotated.secret).not.toBe(hook.secret);
      // The old secret no longer verifies what the new one signs.
      const signed = new Webhook(rotated.secret!).sign("msg_1", new Date(), received[1]!.body);
      const headers = { "webhook-id": "msg_1", "webhook-timestamp": String(Math.floor(Date.now() / 1000)), "webhook-signature": signed };
      expect(verifyWebhook(received[1]!.body, headers, rotated.secret!).event_id).toBe(envelope.event_id);
      expect(() => verifyWebhook(received[1]!.body, headers, hook.secret!)).toThrow(WebhookVerificationError);

      await client.deleteWebhook(hook.webhook_id);
      await expect(client.getWebhook(hook.webhook_id)).rejects.toBeInstanceOf(NotFoundError);
      await expect(client.createWebhook({ url: "ftp://example.com/x" })).rejects.toBeInstanceOf(ValidationError);
    } finally {
      receiver.closeAllConnections();
      await new Promise<void>((r) => receiver.close(() => r()));
    }
  });

  it("verifyWebhook refuses a bad signature, a stale or future timestamp and missing headers, each with its detail", () => {
    const secret = `whsec_${Buffer.from("0123456789abcdef0123456789abcdef").toString("base64")}`;
    const body = JSON.stringify({ event: "DecisionCompleted", event_id: "evt_1", occurred_at: "2026-11-26T21:00:00.000Z", data: { decision_id: "dec_1" } });
    const headersAt = (seconds: number, payload = body, key = secret) => ({
      "webhook-id": "msg_1",
      "webhook-timestamp": String(seconds),
      "webhook-signature": new Webhook(key).sign("msg_1", new Date(seconds * 1000), payload),
    });
    const now = Math.floor(Date.now() / 1000);
    expect(verifyWebhook(body, headersAt(now), secret)).toEqual(JSON.parse(body));
    const refused = (f: () => unknown) => {
      try {
        f();
      } catch (err) {
        expect(err).toBeInstanceOf(WebhookVerificationError);
        expect(err).toBeInstanceOf(MandateError);
        return (err as WebhookVerificationError).detail;
      }
      return "accepted";
    };
    expect(refused(() => verifyWebhook(body.replace("dec_1", "dec_2"), headersAt(now), secret))).toBe("webhook_signature_invalid");
    expect(refused(() => verifyWebhook(body, headersAt(now, body, `whsec_${Buffer.from("another secret of 32 bytes......").toString("base64")}`), secret))).toBe("webhook_signature_invalid");
    expect(refused(() => verifyWebhook(body, { ...headersAt(now), "webhook-id": "msg_2" }, secret))).toBe("webhook_signature_invalid");
    // Well past the 300 s tolerance either way, from the clock read at each call: 301 from a `now`
    // read earlier went stale by itself when a second boundary passed between the two.
    const nowish = () => Math.floor(Date.now() / 1000);
    expect(refused(() => verifyWebhook(body, headersAt(nowish() - 310), secret))).toBe("webhook_timestamp_stale");
    expect(refused(() => verifyWebhook(body, headersAt(nowish() + 310), secret))).toBe("webhook_timestamp_stale");
    expect(refused(() => verifyWebhook(body, { ...headersAt(now), "webhook-timestamp": "soon" }, secret))).toBe("webhook_timestamp_stale");
    const { "webhook-signature": _dropped, ...unsigned } = headersAt(now);
    expect(refused(() => verifyWebhook(body, unsigned, secret))).toBe("webhook_headers_missing");
    // Header names in any case.
    const upper = Object.fromEntries(Object.entries(headersAt(now)).map(([k, v]) => [k.toUpperCase(), v]));
    expect(verifyWebhook(body, upper, secret).event_id).toBe("evt_1");
  });
});
