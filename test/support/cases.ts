import { randomBytes, randomUUID } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fromJson, ScalarType, type DescMessage, type DescMethod, type DescService, type JsonValue, type Message } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { parse } from "yaml";
import { ErrorDetailSchema } from "../../src/gen/mandate/v1/errors_pb.js";
import { newAgentKey, type AgentKey } from "./agents.js";
import { bindingOf, loadMandateServices, messageFromWireJson, messageToWireJson, NotExpressible, WIRE_TIMESTAMP, wireFormProblems } from "./api.js";
import { createTestDatabase, startService, uniqueEmail, type TestService } from "./service.js";

/*
 * Contract cases as data: each case in test/cases/*.yaml
 * is run once over /v1 JSON and once over a gRPC client (and over the Connect
 * protocol), against the same expectation. See test/cases/README.md for the format.
 */

/** The transports a case runs over. */
export type TransportName = "v1" | "grpc" | "connect";
export const ALL_TRANSPORTS: readonly TransportName[] = ["v1", "grpc", "connect"];

/** Which service a case talks to. */
export interface ServerSpec {
  /** false: start without MANDATE_OPERATOR_KEY. */
  operator_key?: boolean;
  /** true: a dedicated, empty database (for global counts such as sandbox limits); one per case run. */
  fresh_database?: boolean;
  /** Extra environment for the service. */
  env?: Record<string, string>;
}

/** What a step must answer. */
export interface Expectation {
  status: number;
  /** gRPC status code name, e.g. OK, UNAUTHENTICATED, INVALID_ARGUMENT. */
  grpc: string;
  detail?: string;
  /** Field errors that must be among the answer's `errors` (each matched partially). */
  errors?: Record<string, unknown>[];
  /** The answer body (/v1) or the response in its /v1 JSON form (gRPC); see `matches`. */
  body?: unknown;
  /** Strings that must not occur anywhere in the answer (isolation: another org's ids). */
  excludes?: string[];
}

/**
 * A body signed as an agent signs it (`signed_intent:`, `signed_heartbeat:`):
 * JSON-serialised, signed with Ed25519 by the agent's key over the exact bytes,
 * sent as the /v1 body (and as the request's bytes field on gRPC/Connect) with
 * `X-Service-Key-Id: <certificate_id>` and `X-Service-Signature: <base64>`.
 */
export interface SignedSpec {
  /** The agent (named by an `agent:` step) whose certificate and key sign. */
  agent: string;
  /** Members over the defaults (Intent: agent_id, action reference_noop, requested_at now, a fresh nonce; heartbeat: agent_id, sent_at, nonce); a member given as `$absent` is left out. */
  body?: Record<string, unknown>;
  /** The exact text to sign and send instead of a JSON body. */
  raw?: string;
  /** Text appended to the serialised body before signing (different bytes, same document). */
  suffix?: string;
  /** Pads the document (through `context.pad`) to exactly this many bytes. */
  pad_to?: number;
  /** Sign with this agent's key instead (`fresh`: a key nobody registered; `key:<name>`: `${key.<name>…}`), still under `agent`'s certificate. */
  signed_by?: string;
  /** The X-Service-Key-Id to send instead of the agent's certificate ("" sends none). */
  key_id?: string;
  /** The X-Service-Signature to send instead of the real one ("" sends none). */
  signature?: string;
  /** Send the real signature in the base64url alphabet without padding. */
  signature_base64url?: boolean;
  /** Change the bytes after signing: append text, or replace the first occurrence of `[from, to]`. */
  after_signing?: { append?: string; replace?: [string, string] };
}

/** Agent states an `agent:` step can leave its agent in. */
export type AgentState = "registered" | "active" | "suspended" | "revoked" | "retired";

/** One request of a case. */
export interface Step {
  /** Optional: what this step shows, for failure messages. */
  name?: string;
  /** `Service.Method`; omitted only for /v1-only requests that match no RPC (unknown routes). */
  rpc?: string;
  /** `METHOD /v1/path`, checked against the RPC's google.api.http annotation (given by the runner for signed steps). */
  http?: string;
  headers?: Record<string, string>;
  /** The /v1 JSON body; converted to the request message for gRPC. */
  body?: unknown;
  /** Sent verbatim on /v1 (malformed JSON…); such a step needs `grpc_body` or a /v1-only case. */
  raw_body?: string;
  /** The request in protobuf-es JSON form, for gRPC/Connect when `body` has no protobuf equivalent. */
  grpc_body?: unknown;
  /** Send the same request this many times, each expecting `expect`. */
  repeat?: number;
  /** An agent-signed SubmitIntent (POST /v1/intents); replaces rpc, http and body. */
  signed_intent?: SignedSpec;
  /** An agent-signed Heartbeat (POST /v1/agents/{agent_id}/heartbeat); replaces rpc, http and body. */
  signed_heartbeat?: SignedSpec;
  /**
   * Set-up, not a request under test: registers an agent named so with a fresh
   * Ed25519 key (or the named `key`) under `org`'s principal over /v1 and moves
   * it to `state` (default active); `${<name>.agent_id}`, `.certificate_id`,
   * `.public_key` name it afterwards. No `expect`.
   */
  agent?: string;
  /** Of an `agent:` step: the fixture organization (`org`, default, or `other`). */
  org?: string;
  /** Of an `agent:` step: the state to leave it in. */
  state?: AgentState;
  /** Of an `agent:` step: register `${key.<name>.public_key}` instead of a fresh key. */
  key?: string;
  expect: Expectation;
  /** Variables for later steps: name → dotted path into the answer. */
  capture?: Record<string, string>;
}

/** One contract case. */
export interface Case extends Partial<Omit<Step, "name">> {
  name: string;
  server?: ServerSpec;
  transports?: TransportName[];
  steps?: Step[];
}

/** A step as sent: signed steps carry the exact signed bytes. */
type SendableStep = Step & { signed_bytes?: Uint8Array };

/** An agent registered by an `agent:` step. */
interface CaseAgent {
  agentId: string;
  certificateId: string;
  key: AgentKey;
}

/** Loads every case of every YAML file in `dir`, by file. */
export function loadCases(dir: string): { file: string; cases: Case[] }[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith(".yaml"))
    .sort()
    .map((file) => {
      const doc = parse(readFileSync(path.join(dir, file), "utf8")) as { cases: Case[] };
      if (!Array.isArray(doc?.cases)) throw new Error(`${file}: expected a top-level "cases" list`);
      return { file, cases: doc.cases };
    });
}

/** The steps of a case (a one-step case may inline its step). */
export function stepsOf(c: Case): Step[] {
  if (c.steps) return c.steps;
  return [c as Step];
}

// --- matching -------------------------------------------------------------

/**
 * Whether `actual` matches `expected`; returns the mismatches. Strings in the
 * expectation may be matchers: `$timestamp` (the wire timestamp form),
 * `$string` (a non-empty string), `$any` (present), `$absent` (as an object
 * value: the key must be missing), `~regex`. Objects match exactly (no extra
 * keys) unless they contain `$partial: true`; arrays match element by element.
 */
export function matches(expected: unknown, actual: unknown, at = "$"): string[] {
  if (typeof expected === "string") {
    if (expected === "$any") return actual === undefined ? [`${at}: missing`] : [];
    if (expected === "$string") return typeof actual === "string" && actual.length > 0 ? [] : [`${at}: expected a non-empty string, got ${JSON.stringify(actual)}`];
    if (expected === "$timestamp") return typeof actual === "string" && WIRE_TIMESTAMP.test(actual) ? [] : [`${at}: expected a wire timestamp, got ${JSON.stringify(actual)}`];
    if (expected.startsWith("~")) {
      return typeof actual === "string" && new RegExp(expected.slice(1)).test(actual) ? [] : [`${at}: expected /${expected.slice(1)}/, got ${JSON.stringify(actual)}`];
    }
  }
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual)) return [`${at}: expected an array, got ${JSON.stringify(actual)}`];
    if (actual.length !== expected.length) return [`${at}: expected ${expected.length} items, got ${actual.length}: ${JSON.stringify(actual)}`];
    return expected.flatMap((e, i) => matches(e, actual[i], `${at}[${i}]`));
  }
  if (typeof expected === "object" && expected !== null) {
    if (typeof actual !== "object" || actual === null || Array.isArray(actual)) return [`${at}: expected an object, got ${JSON.stringify(actual)}`];
    const exp = expected as Record<string, unknown>;
    const act = actual as Record<string, unknown>;
    const problems: string[] = [];
    for (const [k, v] of Object.entries(exp)) {
      if (k === "$partial") continue;
      if (v === "$absent") {
        if (k in act) problems.push(`${at}.${k}: expected absent, got ${JSON.stringify(act[k])}`);
      } else if (!(k in act)) problems.push(`${at}.${k}: missing`);
      else problems.push(...matches(v, act[k], `${at}.${k}`));
    }
    if (exp.$partial !== true) {
      for (const k of Object.keys(act)) if (!(k in exp)) problems.push(`${at}.${k}: unexpected field (value ${JSON.stringify(act[k])})`);
    }
    return problems;
  }
  return Object.is(expected, actual) ? [] : [`${at}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`];
}

/** gRPC code name (UNAUTHENTICATED) of a connect Code. */
export function grpcCodeName(code: Code): string {
  return Code[code].replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
}

// --- running --------------------------------------------------------------

/** An organization with keys of every kind the cases name. */
interface FixtureOrg {
  id: string;
  key: string;
  key_id: string;
  spare_key: string;
  spare_key_id: string;
  reader_key: string;
  revoked_key: string;
  revoked_key_id: string;
}

/** What a step answered, in one shape for every transport. */
interface Answer {
  ok: boolean;
  status?: number;
  grpc?: string;
  detail?: string;
  requestId?: string;
  errors?: Record<string, unknown>[];
  /** The answer in /v1 JSON form (error body on /v1 errors). */
  body: unknown;
  problems: string[];
}

/** Runs cases; owns the services they need and closes them. */
export class CaseRunner {
  private readonly servers = new Map<string, Promise<TestService>>();
  private services: Map<string, { service: DescService; methods: Map<string, DescMethod> }> | undefined;

  private async methodOf(rpc: string): Promise<{ service: DescService; method: DescMethod }> {
    if (!this.services) {
      this.services = new Map(
        (await loadMandateServices()).map(({ service }) => [service.name, { service, methods: new Map(service.methods.map((m) => [m.name, m])) }]),
      );
    }
    const [serviceName, methodName] = rpc.split(".");
    const entry = this.services.get(serviceName!);
    const method = entry?.methods.get(methodName!);
    if (!entry || !method) throw new Error(`unknown rpc ${rpc}`);
    return { service: entry.service, method };
  }

  /** The shared service for a spec (started once), or a fresh one for fresh_database specs. */
  private async serverFor(spec: ServerSpec = {}): Promise<{ svc: TestService; dispose: () => Promise<void> }> {
    const env: Record<string, string | undefined> = { ...spec.env };
    if (spec.operator_key === false) env.MANDATE_OPERATOR_KEY = undefined;
    if (spec.fresh_database) {
      const svc = await startService({ ...env, DATABASE_URL: await createTestDatabase("contract") });
      return { svc, dispose: () => svc.close() };
    }
    const key = JSON.stringify(env, Object.keys(env).sort());
    let svc = this.servers.get(key);
    if (!svc) this.servers.set(key, (svc = startService(env)));
    return { svc: await svc, dispose: async () => undefined };
  }

  /** Closes every shared service. */
  async close(): Promise<void> {
    const all = await Promise.allSettled(this.servers.values());
    await Promise.all(all.map((s) => (s.status === "fulfilled" ? s.value.close() : undefined)));
  }

  /** Runs one case over one transport; throws with every mismatch. */
  async run(c: Case, transport: TransportName): Promise<void> {
    const { svc, dispose } = await this.serverFor(c.server);
    try {
      // Fixture organizations live in the same database, made through a service holding an operator key.
      if (!svc.operatorKey && c.server?.fresh_database) throw new Error("a fresh_database server needs its operator key to make fixtures");
      const fixtureSvc = svc.operatorKey ? svc : (await this.serverFor({})).svc;
      const vars = new Vars(svc, fixtureSvc);
      for (const [i, step] of stepsOf(c).entries()) {
        if (step.agent !== undefined) {
          await vars.newAgent((await vars.resolve(step)) as Step);
          continue;
        }
        for (let n = 0; n < (step.repeat ?? 1); n++) {
          const what = step.signed_intent ? "signed_intent" : step.signed_heartbeat ? "signed_heartbeat" : (step.rpc ?? step.http);
          const where = `step ${i + 1}${step.repeat ? ` (request ${n + 1} of ${step.repeat})` : ""} ${what}${step.name && step !== (c as Step) ? ` (${step.name})` : ""}`;
          const resolved = vars.signed((await vars.resolve(step)) as Step);
          const answer = await this.send(svc, transport, resolved);
          const problems = [...answer.problems, ...this.check(resolved.expect, answer, transport)];
          if (problems.length) {
            throw new Error(`${where} over ${transport}:\n  ${problems.join("\n  ")}\nanswer: ${JSON.stringify(answer.body)}`);
          }
          for (const [name, p] of Object.entries(step.capture ?? {})) {
            const value = p.split(".").reduce<unknown>((o, k) => (o as Record<string, unknown> | undefined)?.[k], answer.body);
            if (value === undefined) throw new Error(`${where}: nothing at ${p} to capture as ${name}`);
            vars.set(name, value);
          }
        }
      }
    } finally {
      await dispose();
    }
  }

  private check(expect: Expectation, a: Answer, transport: TransportName): string[] {
    const problems: string[] = [];
    if (transport === "v1" ? a.status !== expect.status : a.grpc !== expect.grpc) {
      problems.push(`expected ${transport === "v1" ? expect.status : expect.grpc}, got ${transport === "v1" ? a.status : a.grpc} (${a.detail ?? "no detail"})`);
    }
    if (expect.status >= 200 && expect.status < 300) {
      if (expect.body !== undefined) problems.push(...matches(expect.body, a.body));
    } else {
      if (expect.detail !== undefined && a.detail !== expect.detail) problems.push(`expected detail ${expect.detail}, got ${a.detail}`);
      if (!a.requestId) problems.push("no request id");
      if (expect.body !== undefined && transport === "v1") problems.push(...matches(expect.body, a.body));
      for (const e of expect.errors ?? []) {
        if (!(a.errors ?? []).some((actual) => matches({ ...e, $partial: true }, actual).length === 0)) {
          problems.push(`no field error like ${JSON.stringify(e)} in ${JSON.stringify(a.errors)}`);
        }
      }
    }
    const text = JSON.stringify(a.body) ?? "";
    for (const s of expect.excludes ?? []) if (text.includes(s)) problems.push(`the answer contains ${JSON.stringify(s)}`);
    return problems;
  }

  private async send(svc: TestService, transport: TransportName, step: SendableStep): Promise<Answer> {
    if (!step.http) throw new Error(`a step needs http (or signed_intent / signed_heartbeat / agent)`);
    const [verb, p] = step.http.split(" ") as [string, string];
    const target = step.rpc ? await this.methodOf(step.rpc) : undefined;
    let pathVars: Record<string, string> = {};
    if (target) {
      const binding = bindingOf(target.method);
      const vars = binding?.verb === verb ? binding.match(p.split("?")[0]!) : null;
      if (!binding || !vars) throw new Error(`${step.http} is not the google.api.http binding of ${step.rpc} (${binding?.verb} ${binding?.template})`);
      // A GET's query parameters are request fields too, as the transcoder reads them: gRPC gets them in the message.
      pathVars = { ...Object.fromEntries(new URLSearchParams(p.split("?")[1] ?? "")), ...vars };
    }
    if (transport === "v1") return this.sendV1(svc, verb, p, step, target?.method);
    if (!target) throw new Error(`${step.http}: a step without rpc is /v1-only; set transports: [v1]`);
    return this.sendRpc(svc, transport, target, pathVars, step);
  }

  private async sendV1(svc: TestService, verb: string, p: string, step: SendableStep, method: DescMethod | undefined): Promise<Answer> {
    const res = await svc.v1(verb, p, { headers: step.headers, body: step.signed_bytes ?? step.raw_body ?? step.body });
    const problems: string[] = [];
    const body = res.body as Record<string, unknown> | undefined;
    if (!res.headers.get("content-type")?.startsWith("application/json")) problems.push(`content-type ${res.headers.get("content-type")}`);
    if (res.status >= 200 && res.status < 300) {
      if (method) problems.push(...wireFormProblems(method.output, body));
      return { ok: true, status: res.status, body, problems };
    }
    // docs/architecture.md, Error model: every non-2xx /v1 answer is {detail, message, request_id, errors?}.
    if (typeof body !== "object" || body === null) problems.push("error body is not a JSON object");
    else {
      if (typeof body.detail !== "string") problems.push("error body has no detail");
      if (typeof body.message !== "string") problems.push("error body has no message");
      if (res.headers.get("x-request-id") !== body.request_id) problems.push("x-request-id header differs from request_id");
      for (const k of Object.keys(body)) if (!["detail", "message", "request_id", "errors"].includes(k)) problems.push(`error body has ${k}`);
      // Field errors are always present on validation_failed; other 422 codes (request_expired…) may have none.
      if (body.detail === "validation_failed" && !Array.isArray(body.errors)) problems.push("validation_failed without errors[]");
    }
    return {
      ok: false,
      status: res.status,
      detail: body?.detail as string,
      requestId: body?.request_id as string,
      errors: body?.errors as Record<string, unknown>[],
      body,
      problems,
    };
  }

  private transports = new Map<string, Transport>();

  private async sendRpc(
    svc: TestService,
    transport: "grpc" | "connect",
    { service, method }: { service: DescService; method: DescMethod },
    rawPathVars: Record<string, string>,
    step: SendableStep,
  ): Promise<Answer> {
    // Path variables are text; a numeric field (a version number) takes them as numbers.
    const pathVars: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(rawPathVars)) {
      const f = method.input.fields.find((x) => x.name === k);
      const numeric = f?.fieldKind === "scalar" && [ScalarType.INT32, ScalarType.UINT32, ScalarType.SINT32, ScalarType.FIXED32, ScalarType.SFIXED32].includes(f.scalar);
      pathVars[k] = numeric && /^-?\d+$/.test(v) ? Number(v) : v;
    }
    let request: Message;
    if (step.signed_bytes !== undefined) {
      // The signed bytes travel in the binding's body field (SubmitIntentRequest.intent, HeartbeatRequest.signed_body), exactly as signed.
      const field = method.input.fields.find((f) => f.name === bindingOf(method)?.body);
      if (!field) throw new Error(`${method.name}: no bytes body field for signed bytes`);
      request = messageFromWireJson(method.input, pathVars);
      (request as unknown as Record<string, unknown>)[field.localName] = step.signed_bytes;
    } else if (step.grpc_body !== undefined) {
      request = fromJson(method.input, step.grpc_body as JsonValue);
      for (const [k, v] of Object.entries(pathVars)) (request as unknown as Record<string, unknown>)[method.input.fields.find((f) => f.name === k)!.localName] = v;
    } else if (step.raw_body !== undefined) {
      throw new Error("a raw_body step has no gRPC form: give grpc_body or make the case /v1-only (transports: [v1])");
    } else {
      try {
        request = messageFromWireJson(method.input, { ...((step.body as object) ?? {}), ...pathVars });
      } catch (err) {
        if (err instanceof NotExpressible) throw new Error(`the /v1 body has no protobuf form (${err.message}): give grpc_body or make the case /v1-only`, { cause: err });
        throw err;
      }
    }
    const key = `${transport} ${svc.baseUrl}`;
    let t = this.transports.get(key);
    if (!t) {
      t = transport === "grpc" ? createGrpcTransport({ baseUrl: svc.baseUrl }) : createConnectTransport({ baseUrl: svc.baseUrl, httpVersion: "1.1" });
      this.transports.set(key, t);
    }
    const client = createClient(service, t) as unknown as Record<string, (req: Message, opts: object) => Promise<Message>>;
    const headers = Object.fromEntries(Object.entries(step.headers ?? {}).filter(([k]) => !/^content-(type|length)$/i.test(k)));
    try {
      const res = await client[method.localName]!(request, { headers, timeoutMs: 30_000 });
      return { ok: true, grpc: "OK", body: messageToWireJson(method.output as DescMessage, res), problems: [] };
    } catch (err) {
      const e = ConnectError.from(err);
      const [detail] = e.findDetails(ErrorDetailSchema);
      const problems = detail ? [] : [`no mandate.v1.ErrorDetail attached to ${grpcCodeName(e.code)} "${e.rawMessage}"`];
      // line and column are 0 when unset in the ErrorDetail; on /v1 they are then absent.
      const errors = detail?.errors.map((fe) => ({ field: fe.field, code: fe.code, message: fe.message, ...(fe.line && { line: fe.line }), ...(fe.column && { column: fe.column }) }));
      return {
        ok: false,
        grpc: grpcCodeName(e.code),
        detail: detail?.detail,
        requestId: detail?.requestId,
        errors,
        body: { code: grpcCodeName(e.code), message: e.rawMessage, detail: detail?.detail, errors },
        problems,
      };
    }
  }
}

/** Placeholder values of one case run: `${name}` in any string of a step. */
class Vars {
  private readonly values = new Map<string, unknown>();
  private readonly orgs = new Map<string, Promise<FixtureOrg>>();
  private readonly principals = new Map<string, Promise<{ principal_id: string; principal_ref: string }>>();
  private readonly orgKeys = new Map<string, Promise<string>>();
  private readonly keys = new Map<string, AgentKey>();
  private readonly agents = new Map<string, CaseAgent>();
  private sandbox: Promise<{ id: string; key: string }> | undefined;

  constructor(
    private readonly svc: TestService,
    private readonly fixtureSvc: TestService,
  ) {}

  set(name: string, value: unknown): void {
    this.values.set(name, value);
  }

  /** A copy of `value` with every placeholder replaced (a string that is one placeholder takes the value's type). */
  async resolve(value: unknown): Promise<unknown> {
    if (typeof value === "string") {
      const whole = /^\$\{([^}]+)\}$/.exec(value);
      if (whole) return this.lookup(whole[1]!);
      let out = "";
      let last = 0;
      for (const m of value.matchAll(/\$\{([^}]+)\}/g)) {
        out += value.slice(last, m.index) + String(await this.lookup(m[1]!));
        last = m.index! + m[0].length;
      }
      return out + value.slice(last);
    }
    if (Array.isArray(value)) return Promise.all(value.map((v) => this.resolve(v)));
    if (typeof value === "object" && value !== null) {
      const out: Record<string, unknown> = {};
      // `capture` names paths, not values.
      for (const [k, v] of Object.entries(value)) out[k] = k === "capture" ? v : await this.resolve(v);
      return out;
    }
    return value;
  }

  private async lookup(name: string): Promise<unknown> {
    if (this.values.has(name)) return this.values.get(name);
    const repeat = /^repeat:(.*):(\d+)$/s.exec(name);
    if (repeat) return repeat[1]!.repeat(Number(repeat[2]));
    const now = /^now(?::([+-]\d+))?$/.exec(name);
    const key = /^key\.([a-z0-9_]+)\.(public_key|base64|base64_unpadded)$/.exec(name);
    let value: unknown;
    if (now) value = new Date(Date.now() + Number(now[1] ?? 0) * 1000).toISOString();
    else if (key) {
      const k = this.keyNamed(key[1]!);
      const b64 = k.publicKey.slice("ed25519:base64:".length);
      value = key[2] === "public_key" ? k.publicKey : key[2] === "base64" ? b64 : b64.replace(/=+$/, "");
    } else if (/^email\d*$/.test(name)) value = uniqueEmail("contract");
    else if (name === "uuid") value = randomUUID();
    else if (name === "unknown_org") value = `org_${randomBytes(13).toString("hex").slice(0, 26)}`;
    else if (name === "unknown_key") value = `mk_${randomBytes(32).toString("base64url")}`;
    else if (name === "operator") {
      if (!this.svc.operatorKey) throw new Error("${operator} on a service without an operator key");
      value = this.svc.operatorKey;
    } else if (name.startsWith("sandbox.")) {
      const sb = await (this.sandbox ??= this.newSandbox());
      value = sb[name.slice("sandbox.".length) as "id" | "key"];
    } else {
      const [orgName, field] = name.split(".");
      if (!field || !["org", "other"].includes(orgName!)) throw new Error(`unknown placeholder \${${name}}`);
      const org = await this.fixtureOrg(orgName!);
      if (field === "principal_id" || field === "principal_ref") value = (await this.principalOf(orgName!))[field];
      else if (field.startsWith("key_with:")) value = await this.keyWith(orgName!, field.slice("key_with:".length));
      else value = org[field as keyof FixtureOrg];
      if (value === undefined) throw new Error(`unknown placeholder \${${name}}`);
    }
    this.values.set(name, value);
    return value;
  }

  private fixtureOrg(name: string): Promise<FixtureOrg> {
    let org = this.orgs.get(name);
    if (!org) this.orgs.set(name, (org = this.newFixtureOrg()));
    return org;
  }

  /** The fixture organization's `person` principal (made on first use), that agents act for. */
  private principalOf(orgName: string): Promise<{ principal_id: string; principal_ref: string }> {
    let p = this.principals.get(orgName);
    if (!p) {
      p = (async () => {
        const org = await this.fixtureOrg(orgName);
        const ref = `pat-${randomUUID().slice(0, 8)}`;
        const res = await this.fixtureSvc.v1("POST", "/v1/principals", { bearer: org.key, body: { display_name: "Pat Payables", kind: "person", external_ref: ref } });
        if (res.status !== 200) throw new Error(`fixture principal: ${res.status} ${JSON.stringify(res.body)}`);
        return { principal_id: res.body.principal_id as string, principal_ref: ref };
      })();
      this.principals.set(orgName, p);
    }
    return p;
  }

  /** `${org.key_with:A+B}`: an API key of the fixture organization with exactly permissions A and B (made on first use). */
  private keyWith(orgName: string, spec: string): Promise<string> {
    const id = `${orgName}.${spec}`;
    let k = this.orgKeys.get(id);
    if (!k) {
      k = (async () => {
        const org = await this.fixtureOrg(orgName);
        const res = await this.fixtureSvc.v1("POST", "/v1/organization/api-keys", { bearer: org.key, body: { name: `with ${spec}`, permissions: spec.split("+") } });
        if (res.status !== 200) throw new Error(`fixture key ${spec}: ${res.status} ${JSON.stringify(res.body)}`);
        return res.body.api_key as string;
      })();
      this.orgKeys.set(id, k);
    }
    return k;
  }

  /** `${key.<name>.…}`: an Ed25519 key pair made for this case run. */
  private keyNamed(name: string): AgentKey {
    let k = this.keys.get(name);
    if (!k) this.keys.set(name, (k = newAgentKey()));
    return k;
  }

  /** An `agent:` step: registers (and transitions) an agent over /v1 and names it. */
  async newAgent(step: Step): Promise<void> {
    const name = step.agent!;
    if (!/^[a-z][a-z0-9_]*$/.test(name) || ["org", "other", "key", "sandbox", "now"].includes(name) || this.agents.has(name)) {
      throw new Error(`agent: ${JSON.stringify(name)} is not a fresh agent name`);
    }
    const orgName = step.org ?? "org";
    const org = await this.fixtureOrg(orgName);
    const { principal_id } = await this.principalOf(orgName);
    const key = step.key ? this.keyNamed(step.key) : newAgentKey();
    const res = await this.svc.v1("POST", "/v1/agents", {
      bearer: org.key,
      body: { name: `agent ${name}`, acting_for_principal_id: principal_id, public_key: key.publicKey },
    });
    if (res.status !== 200) throw new Error(`agent ${name}: registering failed: ${res.status} ${JSON.stringify(res.body)}`);
    const agent: CaseAgent = { agentId: res.body.agent_id, certificateId: res.body.certificate_id, key };
    const path: Record<AgentState, string[]> = {
      registered: [],
      active: ["activate"],
      suspended: ["activate", "suspend"],
      revoked: ["revoke"],
      retired: ["retire"],
    };
    const ops = path[step.state ?? "active"];
    if (!ops) throw new Error(`agent ${name}: unknown state ${step.state}`);
    for (const op of ops) {
      const r = await this.svc.v1("POST", `/v1/agents/${agent.agentId}/${op}`, { bearer: org.key, body: {} });
      if (r.status !== 200) throw new Error(`agent ${name}: ${op} failed: ${r.status} ${JSON.stringify(r.body)}`);
    }
    this.agents.set(name, agent);
    this.set(`${name}.agent_id`, agent.agentId);
    this.set(`${name}.certificate_id`, agent.certificateId);
    this.set(`${name}.public_key`, key.publicKey);
  }

  private agentNamed(name: string): CaseAgent {
    const a = this.agents.get(name);
    if (!a) throw new Error(`no agent named ${JSON.stringify(name)}: register it first with an agent: step`);
    return a;
  }

  /**
   * A resolved step with `signed_intent` / `signed_heartbeat` made into the
   * request an agent sends; any other step as it is. Each call signs anew, so
   * every repetition of a step gets a fresh nonce (unless the body fixes one).
   */
  signed(step: Step): SendableStep {
    const spec = step.signed_intent ?? step.signed_heartbeat;
    if (!spec) return step;
    if (step.rpc || step.http || step.body !== undefined || step.raw_body !== undefined || step.grpc_body !== undefined) {
      throw new Error("a signed step takes no rpc, http, body, raw_body or grpc_body: the runner makes them");
    }
    const agent = this.agentNamed(spec.agent);
    const intent = step.signed_intent !== undefined;
    const defaults: Record<string, unknown> = intent
      ? { agent_id: agent.agentId, action: "reference_noop", requested_at: new Date().toISOString(), nonce: randomUUID() }
      : { agent_id: agent.agentId, sent_at: new Date().toISOString(), nonce: randomUUID() };
    const doc: Record<string, unknown> = {};
    for (const [k, v] of Object.entries({ ...defaults, ...spec.body })) if (v !== "$absent") doc[k] = v;
    let text: string;
    if (spec.raw !== undefined) text = spec.raw;
    else if (spec.pad_to !== undefined) {
      doc.context = { ...(doc.context as object), pad: "" };
      const base = Buffer.byteLength(JSON.stringify(doc));
      if (spec.pad_to < base) throw new Error(`pad_to ${spec.pad_to} is below the document's own ${base} bytes`);
      (doc.context as Record<string, string>).pad = "x".repeat(spec.pad_to - base);
      text = JSON.stringify(doc);
    } else text = JSON.stringify(doc);
    text += spec.suffix ?? "";
    let bytes = Buffer.from(text, "utf8");
    const by = spec.signed_by;
    const signer = by === undefined ? agent.key : by === "fresh" ? newAgentKey() : by.startsWith("key:") ? this.keyNamed(by.slice(4)) : this.agentNamed(by).key;
    let signature = signer.sign(bytes);
    if (spec.signature_base64url) signature = Buffer.from(signature, "base64").toString("base64url");
    if (spec.after_signing?.append !== undefined) bytes = Buffer.concat([bytes, Buffer.from(spec.after_signing.append, "utf8")]);
    if (spec.after_signing?.replace) {
      const [from, to] = spec.after_signing.replace;
      if (!text.includes(from)) throw new Error(`after_signing.replace: ${JSON.stringify(from)} is not in the signed body ${text}`);
      bytes = Buffer.from(text.replace(from, to), "utf8");
    }
    const headers: Record<string, string> = { ...step.headers };
    const keyId = spec.key_id ?? agent.certificateId;
    if (keyId !== "") headers["x-service-key-id"] = keyId;
    signature = spec.signature ?? signature;
    if (signature !== "") headers["x-service-signature"] = signature;
    return {
      ...step,
      rpc: intent ? "IntentService.SubmitIntent" : "AgentService.Heartbeat",
      http: intent ? "POST /v1/intents" : `POST /v1/agents/${agent.agentId}/heartbeat`,
      headers,
      signed_bytes: new Uint8Array(bytes),
    };
  }

  private async newSandbox(): Promise<{ id: string; key: string }> {
    const res = await this.fixtureSvc.v1("POST", "/v1/sandbox/organizations", { body: { email: uniqueEmail("fixture") } });
    if (res.status !== 200) throw new Error(`fixture sandbox: ${res.status} ${JSON.stringify(res.body)}`);
    return { id: res.body.organization_id, key: res.body.api_key };
  }

  private async newFixtureOrg(): Promise<FixtureOrg> {
    const { v1 } = this.fixtureSvc;
    const { organizationId, apiKey } = await this.fixtureSvc.newOrg();
    const mustOk = <T>(what: string, res: { status: number; body: T }): T => {
      if (res.status !== 200) throw new Error(`fixture ${what}: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body;
    };
    const mk = async (name: string, permissions: string[]) =>
      mustOk(name, await v1("POST", "/v1/organization/api-keys", { bearer: apiKey, body: { name, permissions } })) as { key_id: string; api_key: string };
    // One after the other: cases rely on the listing order (oldest first).
    const spare = await mk("spare", ["ORG_ADMIN"]);
    const reader = await mk("reader", ["DECISION_READ", "AGENT_ADMIN"]);
    const revoked = await mk("revoked", ["ORG_ADMIN"]);
    const list = await v1("GET", "/v1/organization/api-keys", { bearer: apiKey });
    mustOk("revoke", await v1("POST", `/v1/organization/api-keys/${revoked.key_id}/revoke`, { bearer: apiKey, body: {} }));
    const initial = (mustOk("list", list) as { api_keys: { key_id: string; name: string }[] }).api_keys.find((k) => k.name === "initial");
    if (!initial) throw new Error("fixture: the organization's initial key is not listed");
    return {
      id: organizationId,
      key: apiKey,
      key_id: initial.key_id,
      spare_key: spare.api_key,
      spare_key_id: spare.key_id,
      reader_key: reader.api_key,
      revoked_key: revoked.api_key,
      revoked_key_id: revoked.key_id,
    };
  }
}
