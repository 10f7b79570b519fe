import { spawn, type ChildProcess } from "node:child_process";
import { createClient as createRedisClient } from "redis";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { expect } from "vitest";
import { CapabilityService } from "../../src/gen/mandate/v1/capabilities_pb.js";
import { call, expectResult, intentDoc, signBody, submitIntent, type Result, type TestAgent, type Transport } from "../support/agents.js";
import { freePort } from "../support/global-setup.js";
import { createV1Client, type TestService } from "../support/service.js";

/*
 * Shared by the capabilities*.test.ts files: a dedicated redis-server that a
 * test may flush, kill and restart without disturbing other suites, and the
 * decision → capability → verify steps in one call each.
 */

/** A redis-server owned by one test file (no persistence: a restart comes back empty). */
export interface OwnedRedis {
  port: number;
  url: string;
  /** Runs one command on a short-lived connection. */
  command(...args: string[]): Promise<unknown>;
  /** Kills it (SIGKILL by default) and waits for the exit. */
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** Starts it again on the same port, empty. */
  start(): Promise<void>;
  /** Freezes it (SIGSTOP): connections stay open, nothing answers. */
  freeze(): void;
  /** Lets a frozen server run again (SIGCONT). */
  thaw(): void;
  running(): boolean;
}

function spawnRedis(port: number): Promise<ChildProcess> {
  const child = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no"], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`redis-server :${port} did not start within 15 s:\n${output}`)), 15_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes("Ready to accept connections")) {
        clearTimeout(timer);
        child.stdout!.resume();
        child.stderr!.resume();
        resolve(child);
      }
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    child.once("error", (err) => (clearTimeout(timer), reject(err)));
    child.once("exit", (code) => (clearTimeout(timer), reject(new Error(`redis-server :${port} exited with ${code}:\n${output}`))));
  });
}

/** Starts a dedicated redis-server on a free port. */
export async function startOwnedRedis(): Promise<OwnedRedis> {
  const port = await freePort();
  let child: ChildProcess | undefined = await spawnRedis(port);
  const url = `redis://127.0.0.1:${port}`;
  return {
    port,
    url,
    async command(...args) {
      const client = createRedisClient({ url, socket: { reconnectStrategy: false } });
      client.on("error", () => undefined);
      await client.connect();
      try {
        return await client.sendCommand(args);
      } finally {
        await client.quit().catch(() => client.disconnect());
      }
    },
    async stop(signal = "SIGKILL") {
      const c = child;
      child = undefined;
      if (!c || c.exitCode !== null || c.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => c.once("exit", () => resolve()));
      c.kill(signal);
      await exited;
    },
    async start() {
      if (child) throw new Error("redis-server is already running");
      child = await spawnRedis(port);
    },
    running: () => child !== undefined,
    freeze: () => void child?.kill("SIGSTOP"),
    thaw: () => void child?.kill("SIGCONT"),
  };
}

/** A Mandate instance the tests talk to: in-process (TestService) or a spawned process, through /v1 and gRPC. */
export type Instance = Pick<TestService, "v1" | "grpc">;

/** An Instance for a service listening at `baseUrl` (e.g. a spawned process). */
export function instanceAt(baseUrl: string): Instance {
  const transport = createGrpcTransport({ baseUrl });
  return { v1: createV1Client(baseUrl), grpc: (service) => createClient(service, transport) };
}

/** What a verifier presents. */
export interface Presentation {
  token: string;
  audience: string;
  action: string;
  resource: string;
  constraints: Record<string, string>;
}

/** Submits a fresh signed Intent (reference_noop unless `fields` say otherwise) over /v1 and returns its decision. */
export async function decide(svc: Instance, agent: TestAgent, fields: Record<string, unknown> = {}): Promise<{ decision_id: string; outcome: string; reason: string }> {
  const res = await submitIntent(svc as TestService, "v1", signBody(agent, intentDoc(agent.agentId, fields)));
  if (res.status !== 200) throw new Error(`submitting an Intent failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

/** POST /v1/decisions/{id}/capability-token (or /from-review) as `apiKey`. */
export function issue(svc: Instance, apiKey: string, decisionId: string, body: Record<string, unknown> = {}, fromReview = false) {
  return svc.v1("POST", `/v1/decisions/${decisionId}/capability-token${fromReview ? "/from-review" : ""}`, {
    bearer: apiKey,
    body: { audience: "erp-gateway", issued_by: "payables-bot", ...body },
  });
}

/** Issues and expects a 200; returns the token and its id. */
export async function issueOk(svc: Instance, apiKey: string, decisionId: string, body: Record<string, unknown> = {}, fromReview = false): Promise<{ token: string; capability_id: string; expires_at: string }> {
  const res = await issue(svc, apiKey, decisionId, body, fromReview);
  if (res.status !== 200) throw new Error(`issuing a capability failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

/** A fresh ALLOW decision of the agent (reference_noop with `fields`) and its capability, with the presentation that consumes it. */
export async function allowedCapability(
  svc: Instance,
  agent: TestAgent,
  fields: Record<string, unknown> = { amount: 125.5, currency: "EUR", counterparty: "ACME Corp", resource: "invoice:INV-1" },
  issueBody: Record<string, unknown> = {},
): Promise<{ decisionId: string; capabilityId: string; presentation: Presentation }> {
  const d = await decide(svc, agent, fields);
  if (d.outcome !== "ALLOW") throw new Error(`expected an ALLOW decision, got ${JSON.stringify(d)}`);
  const cap = await issueOk(svc, agent.org.apiKey, d.decision_id, issueBody);
  const constraints: Record<string, string> = {};
  for (const k of ["amount", "currency", "counterparty"]) if (fields[k] !== undefined) constraints[k] = String(fields[k]);
  return {
    decisionId: d.decision_id,
    capabilityId: cap.capability_id,
    presentation: {
      token: cap.token,
      audience: (issueBody.audience as string | undefined) ?? "erp-gateway",
      action: (fields.action as string | undefined) ?? "reference_noop",
      resource: (fields.resource as string | undefined) ?? "",
      constraints,
    },
  };
}

/** VerifyCapability over `transport` as `apiKey`. */
export function verify(svc: Instance, transport: Transport, apiKey: string, p: Presentation): Promise<Result> {
  return call(svc as TestService, transport, CapabilityService.method.verifyCapability, { ...p }, { bearer: apiKey });
}

/** GET /v1/capabilities/{id}: the capability's state. */
export async function capabilityState(svc: Instance, apiKey: string, capabilityId: string): Promise<string> {
  const res = await svc.v1("GET", `/v1/capabilities/${capabilityId}`, { bearer: apiKey });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.state;
}

/** Asserts a successful verify and its response body. */
export function expectConsumed(res: Result, c: { decisionId: string; capabilityId: string; presentation: Presentation }): void {
  expectResult(res, 200);
  expect(res.body).toEqual({ capability_id: c.capabilityId, decision_id: c.decisionId, resource: c.presentation.resource, constraints: c.presentation.constraints });
}
