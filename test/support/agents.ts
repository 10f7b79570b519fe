import { createHash, createPublicKey, generateKeyPairSync, randomUUID, sign, verify, type KeyObject } from "node:crypto";
import canonicalizeModule from "canonicalize";
import { ScalarType, toJson, type DescField, type DescMessage, type DescMethod, type Message } from "@bufbuild/protobuf";
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { expect } from "vitest";
import { ErrorDetailSchema } from "../../src/gen/mandate/v1/errors_pb.js";
import { AgentService } from "../../src/gen/mandate/v1/agents_pb.js";
import { DecisionService } from "../../src/gen/mandate/v1/decisions_pb.js";
import { IntentService } from "../../src/gen/mandate/v1/intents_pb.js";
import { bindingOf, messageFromWireJson, wireNameOf } from "./api.js";
import type { TestService } from "./service.js";

/*
 * Agent-side helpers for the e2e suites: Ed25519 keys, signing exactly as an
 * agent does (docs/architecture.md, The Intent path), and one call shape that runs a method over /v1 JSON
 * or over gRPC and answers in one normalised form, so a table of expectations
 * holds both transports to the same contract.
 */

// canonicalize is CommonJS `module.exports = function`; under NodeNext the default import is that function.
const canonicalize = canonicalizeModule as unknown as (value: unknown) => string | undefined;

/** The two transports every table-driven e2e test runs through. */
export type Transport = "v1" | "grpc";
export const TRANSPORTS: readonly Transport[] = ["v1", "grpc"];

/** An agent's key pair, with the public key in the wire form `ed25519:base64:<32 bytes>`. */
export interface AgentKey {
  publicKey: string;
  privateKey: KeyObject;
  /** Standard base64 of the 64-byte Ed25519 signature over `bytes`. */
  sign(bytes: Uint8Array | string): string;
}

/** A fresh Ed25519 key pair, generated locally as the client library does. */
export function newAgentKey(): AgentKey {
  const { publicKey, privateKey } = generateKeyPairSync("ed25519");
  const raw = Buffer.from(publicKey.export({ format: "jwk" }).x!, "base64url");
  return {
    publicKey: `ed25519:base64:${raw.toString("base64")}`,
    privateKey,
    sign: (bytes) => sign(null, typeof bytes === "string" ? Buffer.from(bytes, "utf8") : bytes, privateKey).toString("base64"),
  };
}

/** Who makes a call. */
export type Auth =
  | { bearer: string }
  | { operator: string; organizationId: string }
  | { keyId: string; signature: string; timestamp?: string }
  | { headers: Record<string, string> }
  | undefined;

function authHeaders(auth: Auth): Record<string, string> {
  if (!auth) return {};
  if ("bearer" in auth) return { authorization: `Bearer ${auth.bearer}` };
  if ("operator" in auth) return { "x-service-operator-key": auth.operator, "x-service-organization-id": auth.organizationId };
  if ("keyId" in auth) {
    return {
      "x-service-key-id": auth.keyId,
      "x-service-signature": auth.signature,
      ...(auth.timestamp !== undefined && { "x-service-timestamp": auth.timestamp }),
    };
  }
  return auth.headers;
}

/**
 * One answer in a transport-neutral form. `status` is the HTTP status on /v1
 * and the HTTP status the error model (docs/architecture.md) pairs with the gRPC code on gRPC; `body` is the
 * /v1 JSON (or the gRPC response in its /v1 JSON form; for an error, the
 * ErrorDetail as `{detail, message, request_id, errors}`).
 */
export interface Result {
  transport: Transport;
  status: number;
  /** The error code (`detail`), or undefined on success. */
  detail?: string;
  body: any;
  /** gRPC only: the status code. */
  grpcCode?: Code;
}

/** The HTTP status each gRPC code stands for (docs/architecture.md, Error model; 409 has two gRPC spellings). */
const HTTP_OF_GRPC: Partial<Record<Code, number>> = {
  [Code.Unauthenticated]: 401,
  [Code.PermissionDenied]: 403,
  [Code.NotFound]: 404,
  [Code.FailedPrecondition]: 409,
  [Code.AlreadyExists]: 409,
  [Code.ResourceExhausted]: 413,
  [Code.InvalidArgument]: 422,
  [Code.Unavailable]: 503,
  [Code.Internal]: 500,
};

function isBytesField(method: DescMethod, name: string): boolean {
  const f = method.input.fields.find((x) => x.name === name);
  return f?.fieldKind === "scalar" && f.scalar === ScalarType.BYTES;
}

/** Top-level int64 fields as bigint, so the harness's message builder accepts them. */
function grpcRequest(input: DescMessage, request: Record<string, unknown>) {
  const json: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(request)) {
    const f = input.fields.find((x) => x.name === k);
    json[k] = f?.fieldKind === "scalar" && f.scalar === ScalarType.INT64 && typeof v === "number" ? BigInt(v) : v;
  }
  return messageFromWireJson(input, json);
}

function singularToWire(field: DescField, kind: "scalar" | "enum" | "message", v: unknown): unknown {
  if (kind === "enum") return wireNameOf(field.enum!, v as number) ?? "";
  if (kind === "message") return toWire(field.message!, v as Message);
  if (typeof v === "bigint") return Number(v);
  if (v instanceof Uint8Array) return Buffer.from(v).toString("base64");
  return v;
}

/**
 * A gRPC response in its /v1 JSON form (snake_case names, spec enum spellings,
 * ISO timestamps, int64 as numbers, unset messages and zero enums omitted).
 * Struct fields are plain JSON in protobuf-es; Value fields go through toJson.
 */
export function toWire(desc: DescMessage, message: Message): unknown {
  switch (desc.typeName) {
    case "google.protobuf.Timestamp":
      return timestampDate(message as Timestamp).toISOString();
    case "google.protobuf.Struct":
      return message;
    case "google.protobuf.Value":
    case "google.protobuf.ListValue":
      return toJson(desc, message);
  }
  const out: Record<string, unknown> = {};
  const record = message as unknown as Record<string, unknown>;
  for (const field of desc.fields) {
    const value = record[field.localName];
    if (field.fieldKind === "list") out[field.name] = (value as unknown[]).map((v) => singularToWire(field, field.listKind, v));
    else if (field.fieldKind === "map") out[field.name] = Object.fromEntries(Object.entries(value as object).map(([k, v]) => [k, singularToWire(field, field.mapKind, v)]));
    else if (field.fieldKind === "message") {
      if (value !== undefined) out[field.name] = singularToWire(field, "message", value);
    } else if (field.fieldKind === "enum") {
      if (value !== 0) out[field.name] = singularToWire(field, "enum", value);
    } else if (field.oneof === undefined && (field.presence !== 1 || value !== undefined)) {
      out[field.name] = singularToWire(field, "scalar", value);
    }
  }
  return out;
}

/**
 * Calls `method` with `request` (its /v1 JSON form: path variables, body and
 * query fields together; a bytes body field as a Uint8Array) over `transport`.
 * On /v1 the path comes from the method's `google.api.http` binding.
 */
export async function call(svc: TestService, transport: Transport, method: DescMethod, request: Record<string, unknown>, auth?: Auth): Promise<Result> {
  const headers = authHeaders(auth);
  if (transport === "v1") {
    const binding = bindingOf(method);
    if (!binding) throw new Error(`${method.name} has no /v1 binding`);
    const rest = { ...request };
    const path = binding.template.replace(/\{([a-z_][a-z0-9_]*)(?:=\*)?\}/g, (_, name: string) => {
      const v = rest[name];
      delete rest[name];
      return encodeURIComponent(String(v ?? ""));
    });
    let body: unknown;
    let query = "";
    if (binding.body === "*") body = rest;
    else if (binding.body !== "") {
      body = rest[binding.body];
      if (!isBytesField(method, binding.body)) body = body ?? {};
    } else {
      const params = new URLSearchParams();
      for (const [k, v] of Object.entries(rest)) if (v !== undefined) params.set(k, String(v));
      query = params.size ? `?${params}` : "";
    }
    const res = await svc.v1(binding.verb, path + query, { body, headers });
    return { transport, status: res.status, detail: res.status >= 400 ? res.body?.detail : undefined, body: res.body };
  }
  const client = svc.grpc(method.parent) as unknown as Record<string, (req: unknown, opts: unknown) => Promise<any>>;
  try {
    const res = await client[method.localName]!(grpcRequest(method.input, request), { headers, timeoutMs: 30_000 });
    return { transport, status: 200, body: toWire(method.output, res) };
  } catch (err) {
    const e = ConnectError.from(err);
    const [d] = e.findDetails(ErrorDetailSchema);
    return {
      transport,
      status: HTTP_OF_GRPC[e.code] ?? -e.code,
      detail: d?.detail,
      grpcCode: e.code,
      body: d
        ? { detail: d.detail, message: d.message, request_id: d.requestId, errors: d.errors.map((x) => ({ field: x.field, code: x.code, message: x.message, ...(x.line && { line: x.line }), ...(x.column && { column: x.column }) })) }
        : { detail: undefined, message: e.rawMessage },
    };
  }
}

/** Asserts an answer's status and detail code, with the body in the failure message. */
export function expectResult(res: Result, status: number, detail?: string): void {
  const seen = `${res.transport}: ${res.status} ${JSON.stringify(res.body)}`;
  expect(res.status, seen).toBe(status);
  if (status >= 400) {
    expect(res.detail, seen).toBe(detail);
    expect(typeof res.body.message, seen).toBe("string");
    expect(typeof res.body.request_id, seen).toBe("string");
  }
}

/** An organization with its all-permission key and one principal to register agents under. */
export interface OrgFixture {
  organizationId: string;
  apiKey: string;
  principalId: string;
}

/** A new organization (operator key) with one `person` principal. */
export async function newOrgFixture(svc: TestService): Promise<OrgFixture> {
  const org = await svc.newOrg();
  const p = await svc.v1("POST", "/v1/principals", {
    bearer: org.apiKey,
    body: { display_name: "Pat Payables", kind: "person", external_ref: `pat-${randomUUID().slice(0, 8)}` },
  });
  if (p.status !== 200) throw new Error(`creating a principal failed: ${p.status} ${JSON.stringify(p.body)}`);
  return { organizationId: org.organizationId, apiKey: org.apiKey, principalId: p.body.principal_id };
}

/** A second API key of the organization with the given permissions. */
export async function newApiKey(svc: TestService, apiKey: string, permissions: string[], name = `key-${randomUUID().slice(0, 6)}`): Promise<{ keyId: string; apiKey: string }> {
  const res = await svc.v1("POST", "/v1/organization/api-keys", { bearer: apiKey, body: { name, permissions } });
  if (res.status !== 200) throw new Error(`creating an API key failed: ${res.status} ${JSON.stringify(res.body)}`);
  return { keyId: res.body.key_id, apiKey: res.body.api_key };
}

/** A registered (and, unless told otherwise, activated) agent with its key. */
export interface TestAgent {
  agentId: string;
  certificateId: string;
  key: AgentKey;
  org: OrgFixture;
}

/** Registers an agent over /v1 and activates it unless `state` is `registered`. */
export async function newAgent(svc: TestService, org: OrgFixture, state: "registered" | "active" | "suspended" | "revoked" | "retired" = "active"): Promise<TestAgent> {
  const key = newAgentKey();
  const res = await svc.v1("POST", "/v1/agents", {
    bearer: org.apiKey,
    body: { name: `agent-${randomUUID().slice(0, 8)}`, acting_for_principal_id: org.principalId, public_key: key.publicKey },
  });
  if (res.status !== 200) throw new Error(`registering an agent failed: ${res.status} ${JSON.stringify(res.body)}`);
  const agent: TestAgent = { agentId: res.body.agent_id, certificateId: res.body.certificate_id, key, org };
  const path: Record<typeof state, string[]> = {
    registered: [],
    active: ["activate"],
    suspended: ["activate", "suspend"],
    revoked: ["revoke"],
    retired: ["retire"],
  };
  for (const op of path[state]) {
    const r = await svc.v1("POST", `/v1/agents/${agent.agentId}/${op}`, { bearer: org.apiKey, body: {} });
    if (r.status !== 200) throw new Error(`${op} failed: ${r.status} ${JSON.stringify(r.body)}`);
  }
  return agent;
}

/** An Intent document for `agentId`: the reference action, now, a fresh nonce, plus `fields`. */
export function intentDoc(agentId: string, fields: Record<string, unknown> = {}): Record<string, unknown> {
  return { agent_id: agentId, action: "reference_noop", requested_at: new Date().toISOString(), nonce: randomUUID(), ...fields };
}

/** Signed bytes as an agent sends them. */
export interface SignedBody {
  bytes: Uint8Array;
  keyId: string;
  signature: string;
}

/** Serialises `doc` (or takes the bytes as given) and signs it with the agent's certificate. */
export function signBody(agent: Pick<TestAgent, "certificateId" | "key">, doc: Record<string, unknown> | Uint8Array | string): SignedBody {
  const bytes = doc instanceof Uint8Array ? doc : Buffer.from(typeof doc === "string" ? doc : JSON.stringify(doc), "utf8");
  return { bytes: new Uint8Array(bytes), keyId: agent.certificateId, signature: agent.key.sign(bytes) };
}

/** Submits signed Intent bytes (POST /v1/intents, or SubmitIntent with the bytes in `intent`); empty keyId and signature send no credentials. */
export function submitIntent(svc: TestService, transport: Transport, signed: SignedBody): Promise<Result> {
  const auth = signed.keyId === "" && signed.signature === "" ? undefined : { keyId: signed.keyId, signature: signed.signature };
  return call(svc, transport, IntentService.method.submitIntent, { intent: signed.bytes }, auth);
}

/** Sends an agent-signed heartbeat `{agent_id, sent_at, nonce}`. */
export function heartbeat(svc: TestService, transport: Transport, agent: TestAgent, fields: Record<string, unknown> = {}): Promise<Result> {
  const signed = signBody(agent, { agent_id: agent.agentId, sent_at: new Date().toISOString(), nonce: randomUUID(), ...fields });
  return call(svc, transport, AgentService.method.heartbeat, { agent_id: agent.agentId, signed_body: signed.bytes }, { keyId: signed.keyId, signature: signed.signature });
}

/** The agent reads a decision with an agent-signed GET (`"GET /v1/decisions/<id>\n<timestamp>"`). */
export function agentGetDecision(svc: TestService, transport: Transport, agent: Pick<TestAgent, "certificateId" | "key">, decisionId: string, timestamp = new Date().toISOString()): Promise<Result> {
  const signature = agent.key.sign(`GET /v1/decisions/${decisionId}\n${timestamp}`);
  return call(svc, transport, DecisionService.method.getDecision, { decision_id: decisionId }, { keyId: agent.certificateId, signature, timestamp });
}

/**
 * An export of the caller's organization, as `mandate evidence verify` reads it: every evidence
 * record (GET /v1/evidence, all pages), the published JWKS, and the signed chain head of the
 * last page fetched (where the records end).
 */
export async function exportEvidence(svc: TestService, apiKey: string): Promise<{ records: any[]; jwks: { keys: any[] }; head: any }> {
  const records: any[] = [];
  let after = 0;
  let head: any;
  for (;;) {
    const res = await svc.v1("GET", `/v1/evidence?after_seq=${after}&page_size=1000`, { bearer: apiKey });
    if (res.status !== 200) throw new Error(`exporting evidence failed: ${res.status} ${JSON.stringify(res.body)}`);
    records.push(...res.body.records);
    head = res.body.head;
    if (!res.body.has_more || res.body.records.length === 0) break;
    after = res.body.records[res.body.records.length - 1].seq;
  }
  const jwks = await svc.v1("GET", "/.well-known/jwks.json");
  if (jwks.status !== 200) throw new Error(`reading the JWKS failed: ${jwks.status}`);
  return { records, jwks: jwks.body, head };
}

/**
 * Publishes, in `org`, a `payments` policy for `vendor_payment` (DENY
 * `amount_over_hard_cap` above 1,000,000, else the authority graph) and a graph
 * giving the org's principal a USD limit of 50,000 with bands: up to 1,000 →
 * ALLOW `within_delegated_authority`, up to 5,000 → HUMAN_REVIEW
 * `requires_approval`, up to 20,000 → HUMAN_REVIEW `requires_dual_approval`,
 * above → DENY `exceeds_approval_limit`. Authored by the org key, approved and
 * published by a second key (four eyes).
 */
export async function publishPaymentsPolicy(svc: TestService, org: OrgFixture): Promise<void> {
  const principal = await svc.v1("GET", `/v1/principals/${org.principalId}`, { bearer: org.apiKey });
  const approver = await newApiKey(svc, org.apiKey, ["POLICY_APPROVER"], "approver");
  const steps: [string, string, unknown, string][] = [
    ["POST", "/v1/policies", {
      policy_key: "payments",
      description: "Vendor payments within delegated authority.",
      source: { rules: { actions: ["vendor_payment"], rules: [
        { id: "hard_cap", when: { amount: { gt: 1_000_000 } }, outcome: "DENY", reason: "amount_over_hard_cap" },
        { id: "authority", authority: true },
      ] } },
    }, org.apiKey],
    ["POST", "/v1/policies/payments/versions/1/submit", {}, org.apiKey],
    ["POST", "/v1/policies/payments/versions/1/approve", {}, approver.apiKey],
    ["POST", "/v1/policies/payments/versions/1/publish", {}, approver.apiKey],
    ["POST", "/v1/authority-graph/versions", { graph: {
      roles: [{ role: "clerk", reports_to: null }],
      memberships: [{ principal: principal.body.external_ref, role: "clerk" }],
      limits: [{ holder: "role:clerk", action: "vendor_payment", currency: "USD", max_amount: 50_000 }],
      delegations: [],
      approval_matrix: [
        { action: "vendor_payment", currency: "USD", up_to_amount: 1_000, approvals_required: 0 },
        { action: "vendor_payment", currency: "USD", up_to_amount: 5_000, approvals_required: 1 },
        { action: "vendor_payment", currency: "USD", up_to_amount: 20_000, approvals_required: 2 },
      ],
    } }, org.apiKey],
    ["POST", "/v1/authority-graph/versions/1/approve", {}, approver.apiKey],
    ["POST", "/v1/authority-graph/versions/1/publish", {}, approver.apiKey],
  ];
  for (const [method, path, body, bearer] of steps) {
    const res = await svc.v1(method, path, { bearer, body });
    if (res.status !== 200) throw new Error(`${method} ${path} failed: ${res.status} ${JSON.stringify(res.body)}`);
  }
}

/** A vendor payment Intent of `amount` USD (see publishPaymentsPolicy for the outcomes). */
export function paymentDoc(agentId: string, amount: number, fields: Record<string, unknown> = {}): Record<string, unknown> {
  return intentDoc(agentId, { action: "vendor_payment", amount, currency: "USD", counterparty: "ACME Corp", ...fields });
}

/** How many decisions the organization holds for `agentId` (GET /v1/decisions, all pages). */
export async function decisionCount(svc: TestService, apiKey: string, agentId: string): Promise<number> {
  let count = 0;
  let token = "";
  for (;;) {
    const res = await svc.v1("GET", `/v1/decisions?agent_id=${agentId}&page_size=500${token ? `&page_token=${token}` : ""}`, { bearer: apiKey });
    if (res.status !== 200) throw new Error(`listing decisions failed: ${res.status} ${JSON.stringify(res.body)}`);
    count += res.body.decisions.length;
    token = res.body.next_page_token;
    if (!token) return count;
  }
}

/** The organization's evidence head: how many records its chain holds. */
export async function evidenceCount(svc: TestService, apiKey: string): Promise<number> {
  return (await exportEvidence(svc, apiKey)).records.length;
}

/** Follows an organization's evidence chain: each `next()` returns the records appended since the previous call. */
export async function evidenceCursor(svc: TestService, apiKey: string): Promise<{ next(): Promise<any[]> }> {
  let seq = 0;
  const next = async () => {
    const fresh: any[] = [];
    for (;;) {
      const res = await svc.v1("GET", `/v1/evidence?after_seq=${seq}&page_size=1000`, { bearer: apiKey });
      if (res.status !== 200) throw new Error(`reading evidence failed: ${res.status} ${JSON.stringify(res.body)}`);
      fresh.push(...res.body.records);
      if (res.body.records.length) seq = res.body.records[res.body.records.length - 1].seq;
      if (!res.body.has_more) return fresh;
    }
  };
  await next();
  return { next };
}

/**
 * Checks one evidence record against a JWKS independently of src/evidence:
 * SHA-256 over the RFC 8785 canonical JSON (npm `canonicalize`) of every member
 * but digest, kid and signature; Ed25519 (base64url) over the hex digest's bytes
 * with the JWKS key named by `kid`. Returns what failed, or [] when it verifies.
 */
export function independentRecordCheck(record: any, jwks: { keys: any[] }): string[] {
  const problems: string[] = [];
  const { digest, kid, signature, ...covered } = record;
  const recomputed = createHash("sha256").update(canonicalize(covered)!, "utf8").digest("hex");
  if (recomputed !== digest) problems.push(`digest ${digest} but content hashes to ${recomputed}`);
  const jwk = jwks.keys.find((k) => k.kid === kid);
  if (!jwk) return [...problems, `kid ${kid} not in the JWKS`];
  const key = createPublicKey({ key: { kty: jwk.kty, crv: jwk.crv, x: jwk.x }, format: "jwk" });
  if (!verify(null, Buffer.from(digest, "utf8"), key, Buffer.from(signature, "base64url"))) problems.push("signature does not verify");
  return problems;
}
