import { randomBytes, randomUUID } from "node:crypto";
import { fromBinary, ScalarType, type DescEnum, type DescField, type DescMessage, type DescMethod, type DescService } from "@bufbuild/protobuf";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorDetailSchema } from "../../src/gen/mandate/v1/errors_pb.js";
import { bindingOf, loadAllMandateServices, wireNameOf, type Binding } from "../support/api.js";
import {
  intentDoc,
  newAgent,
  newAgentKey,
  newApiKey,
  newOrgFixture,
  paymentDoc,
  publishPaymentsPolicy,
  signBody,
  submitIntent,
  type AgentKey,
  type OrgFixture,
  type TestAgent,
} from "../support/agents.js";
import { startService, uniqueEmail, type TestService } from "../support/service.js";

/*
 * The whole public API under fuzz. Every unary RPC of every service in the
 * generated descriptors (mandate.v1 and mandate.v1alpha, enumerated from the
 * file descriptors, so a new RPC is covered without touching this file) gets
 * requests built from its own input message: plausible values (ids that exist,
 * fresh keys, valid enums, signed documents) mixed with junk (U+0000, lone
 * surrogates, huge strings, deep nesting, wrong types, out-of-range numbers,
 * garbage enums, unknown keys), under every kind of credentials (none, an
 * all-permission bearer key, the operator key, an agent or adapter signature
 * over the signed bytes, garbage).
 *
 * Each RPC is sent over the Connect protocol (camelCase JSON) and, where it has
 * a google.api.http binding, over /v1 (snake_case JSON, path variables and
 * query parameters from the binding). For every answer:
 *   - never a 5xx (Connect: never `internal` or `unknown` either): bad input is
 *     the client's fault and must be refused as such;
 *   - every refusal has the stable error shape: /v1 a JSON body with `detail`,
 *     `message` and `request_id`; Connect a `mandate.v1.ErrorDetail` in
 *     `details` with a non-empty detail and request id.
 * Finally the answers must be varied (some successes, some validation
 * failures, auth refusals, not-founds), so the property cannot hold vacuously.
 *
 * The seed is fixed (printed at the start and, by fast-check, on failure);
 * FUZZ_SEED=<n> runs another draw or replays one; FUZZ_RUNS sets the runs per RPC and protocol (12);
 * FUZZ_REPORT=1 prints what came back. Fixture state carries over from run to
 * run (a key revoked stays revoked), so replay the whole file, not one test.
 */

// A fixed seed by default: the same requests every run, so "reaches varied outcomes" cannot flake.
const SEED = Number(process.env.FUZZ_SEED ?? 20_261_126);
const RUNS_PER_RPC = Number(process.env.FUZZ_RUNS ?? 12);

// --- the API surface, from the descriptors -----------------------------------

interface Rpc {
  /** `Service.Method`, for test names. */
  id: string;
  service: DescService;
  method: DescMethod;
  /** The /v1 binding, if the method has one (internal services have none). */
  binding: Binding | undefined;
}

const RPCS: Rpc[] = (await loadAllMandateServices()).flatMap(({ service }) =>
  service.methods
    .filter((method) => method.methodKind === "unary")
    .map((method) => ({ id: `${service.name}.${method.name}`, service, method, binding: bindingOf(method) })),
);

// --- fixtures: real ids for the plausible values -------------------------------

let svc: TestService;
let org: OrgFixture;
/** The active agent whose certificate signs; replaced if a run revokes or rotates it. */
let agent: TestAgent;
/** A trusted adapter identity (signs execution receipts and adapter reports). */
let adapter: { adapterId: string; key: AgentKey };
/** What `<ref:NAME>` markers resolve to. */
const refs: Record<string, string> = {};

beforeAll(async () => {
  console.log(`api-fuzz: FUZZ_SEED=${SEED} FUZZ_RUNS=${RUNS_PER_RPC} (${RPCS.length} unary RPCs)`);
  svc = await startService();
  org = await newOrgFixture(svc);
  await publishPaymentsPolicy(svc, org);
  const bearer = org.apiKey;
  const ok = async (method: string, path: string, body: unknown, key = bearer) => {
    const res = await svc.v1(method, path, { bearer: key, body });
    if (res.status !== 200) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  };
  agent = await newAgent(svc, org);
  const registered = await newAgent(svc, org, "registered");
  const suspended = await newAgent(svc, org, "suspended");
  const spare = await newApiKey(svc, bearer, ["REVIEWER"], "spare");
  const approver = await newApiKey(svc, bearer, ["POLICY_APPROVER"], "approver");
  // publishPaymentsPolicy: ≤ 1,000 ALLOW, ≤ 20,000 HUMAN_REVIEW, above the 50,000 limit DENY.
  const decide = async (amount: number, outcome: string) => {
    const res = await submitIntent(svc, "v1", signBody(agent, paymentDoc(agent.agentId, amount)));
    expect(res.body.outcome, JSON.stringify(res.body)).toBe(outcome);
    return res.body as { decision_id: string; evidence_id: string };
  };
  const allow = await decide(500, "ALLOW");
  const allow2 = await decide(600, "ALLOW");
  const review = await decide(2_000, "HUMAN_REVIEW");
  const review2 = await decide(10_000, "HUMAN_REVIEW");
  const deny = await decide(60_000, "DENY");
  const cap = await ok("POST", `/v1/decisions/${allow.decision_id}/capability-token`, { audience: "erp-gateway", issued_by: "fuzzer" });
  const integration = await ok("POST", "/v1/integrations", { name: "erp", actions: ["reference_noop"] });
  await ok("POST", `/v1/integrations/${integration.integration_id}/contract-versions`, { resource_path: "resource", context_bindings: { po: "context.po" } });
  await ok("POST", `/v1/integrations/${integration.integration_id}/contract-versions/1/approve`, {}, approver.apiKey);
  const adapterKey = newAgentKey();
  const ad = await ok("POST", `/v1/integrations/${integration.integration_id}/adapters`, { name: "adapter", public_key: adapterKey.publicKey });
  adapter = { adapterId: ad.adapter_id, key: adapterKey };
  // A decision routed through the integration, and its consumed Capability: what receipts and reports refer to.
  const bound = (await submitIntent(svc, "v1", signBody(agent, intentDoc(agent.agentId, { resource: "po:1", context: { po: "1" } })))).body;
  expect(bound.outcome, JSON.stringify(bound)).toBe("ALLOW");
  const boundCap = await ok("POST", `/v1/decisions/${bound.decision_id}/capability-token`, { audience: "erp", issued_by: "fuzzer" });
  await ok("POST", "/v1/capability-tokens/verify", { token: boundCap.token, audience: "erp", action: "reference_noop", resource: "po:1", constraints: { po: "1" } });
  const externalRef = (await svc.v1("GET", `/v1/principals/${org.principalId}`, { bearer })).body.external_ref as string;
  const schedule = `principal,role,reports_to\n${externalRef},clerk,\n`;
  const doc = await ok("POST", "/v1/authority-graph/documents", { name: "schedule.csv", kind: "signing_schedule", format: "csv", content: schedule });
  Object.assign(refs, {
    organization: org.organizationId,
    operatorKey: svc.operatorKey!,
    principal: org.principalId,
    agent: agent.agentId,
    certificate: agent.certificateId,
    registeredAgent: registered.agentId,
    suspendedAgent: suspended.agentId,
    spareKey: spare.keyId,
    allowDecision: allow.decision_id,
    allowDecision2: allow2.decision_id,
    reviewDecision: review.decision_id,
    reviewDecision2: review2.decision_id,
    denyDecision: deny.decision_id,
    boundDecision: bound.decision_id,
    consumedCapability: boundCap.capability_id,
    evidence: allow.evidence_id,
    capability: cap.capability_id,
    capabilityToken: cap.token,
    integration: integration.integration_id,
    adapter: adapter.adapterId,
    document: doc.document_id,
    signingSchedule: schedule,
  });
});
afterAll(() => svc?.close());

/**
 * After a run suspended, revoked, retired or rotated something, puts the
 * signing agent and adapter back in service (or replaces them), so later runs
 * still reach the signed paths.
 */
async function heal(): Promise<void> {
  const bearer = org.apiKey;
  const a = (await svc.v1("GET", `/v1/agents/${agent.agentId}`, { bearer })).body;
  if (a?.state === "suspended") await svc.v1("POST", `/v1/agents/${agent.agentId}/reactivate`, { bearer, body: {} });
  else if (a?.state !== "active" || a.certificate_id !== agent.certificateId) {
    agent = await newAgent(svc, org);
    Object.assign(refs, { agent: agent.agentId, certificate: agent.certificateId });
  }
  const i = (await svc.v1("GET", `/v1/integrations/${refs.integration}`, { bearer })).body;
  if (i?.state === "suspended") await svc.v1("POST", `/v1/integrations/${refs.integration}/reactivate`, { bearer, body: {} });
  const ad = (i?.adapters as { adapter_id: string; state: string }[] | undefined)?.find((x) => x.adapter_id === adapter.adapterId);
  if (ad?.state === "suspended") await svc.v1("POST", `/v1/integrations/${refs.integration}/adapters/${adapter.adapterId}/reactivate`, { bearer, body: {} });
  else if (ad?.state !== "active") {
    const key = newAgentKey();
    const res = await svc.v1("POST", `/v1/integrations/${refs.integration}/adapters`, { bearer, body: { name: `adapter-${randomUUID().slice(0, 6)}`, public_key: key.publicKey } });
    if (res.status === 200) {
      adapter = { adapterId: res.body.adapter_id, key };
      refs.adapter = adapter.adapterId;
    }
  }
}

// --- markers: resolved when a request is sent ----------------------------------
// Arbitraries hold markers rather than live values, so a counterexample prints
// compactly and stays meaningful across runs (ids differ, markers do not).

const ref = (name: string) => `<ref:${name}>`;
const NOW = "<now>";
const UUID = "<uuid>";
const fresh = (kind: string) => `<fresh:${kind}>`;
const long = (n: number, char: string) => `<long:${n}:${char}>`;
const deep = (n: number) => `<deep:${n}>`;

const MARKER = /^<(ref|now|uuid|fresh|long|deep)(?::([^>]*))?>$/;
/** Stands for n nested arrays until serialize() splices the raw text in. */
const DEEP = (n: string) => `\u0001deep:${n}\u0001`;

function freshValue(kind: string): string {
  const hex = randomBytes(5).toString("hex");
  switch (kind) {
    case "public_key":
      return newAgentKey().publicKey;
    case "email":
      return uniqueEmail("fuzz");
    case "policy_key":
    case "action":
      return `fz_${hex}`;
    default:
      return `fuzz-${hex}`;
  }
}

function resolveText(s: string): string {
  const m = MARKER.exec(s);
  if (!m) return s;
  const [, kind, arg = ""] = m;
  switch (kind) {
    case "ref":
      if (refs[arg] === undefined) throw new Error(`no fixture ${arg}`);
      return refs[arg]!;
    case "now":
      return new Date().toISOString();
    case "uuid":
      return randomUUID();
    case "fresh":
      return freshValue(arg);
    case "long": {
      const [n, char] = arg.split(":");
      return char!.repeat(Number(n));
    }
    default:
      return DEEP(arg);
  }
}

/** The value with every marker replaced; `__proto__` and friends stay plain own keys. */
function resolve(v: unknown): unknown {
  if (typeof v === "string") return resolveText(v);
  if (Array.isArray(v)) return v.map(resolve);
  if (v !== null && typeof v === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) Object.defineProperty(out, k, { value: resolve(x), enumerable: true, writable: true, configurable: true });
    return out;
  }
  return v;
}

/** JSON bytes of a resolved value, with `<deep:n>` spliced in as n nested arrays. */
function serialize(v: unknown): Buffer {
  const text = JSON.stringify(v) ?? "";
  return Buffer.from(text.replace(/"\\u0001deep:(\d+)\\u0001"/g, (_, n: string) => "[".repeat(Number(n)) + "]".repeat(Number(n))), "utf8");
}

// --- arbitraries: junk ---------------------------------------------------------

/** Header-safe text (printable ASCII and Latin-1: what an HTTP client can send). */
const headerText = (maxLength = 80) =>
  fc.string({ unit: fc.oneof(fc.integer({ min: 0x20, max: 0x7e }), fc.integer({ min: 0xa0, max: 0xff })).map((c) => String.fromCharCode(c)), maxLength });

/** Strings no field should trust: NUL, lone surrogates, huge, numeric-looking, path-ish. */
const oddString = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom("", " ", "\u0000", "a\u0000b", "\ud800", "x\udfff", "\ud83d", "😀", "\u202e\u0301", "null", "NaN", "Infinity", "-1", "1e999", "0x1f", "99999999999999999999", "9223372036854775807", "-9223372036854775808", "../../etc/passwd", "%00", "%", "' OR '1'='1", "UNSPECIFIED", "ORG_ADMIN", " active ") },
  { weight: 3, arbitrary: fc.string({ unit: "binary", maxLength: 40 }) },
  { weight: 1, arbitrary: fc.string({ unit: "grapheme", maxLength: 20 }) },
  { weight: 1, arbitrary: fc.constantFrom(long(70_000, "x"), long(300_000, "é"), long(1_100_000, "a"), long(2_200_000, "a")) },
);

/** Numbers beyond every range: negative, fractional, past int32/int64/double-safe. */
const oddNumber = fc.oneof(
  fc.constantFrom(-1, 0, -0, 0.5, -(2 ** 31) - 1, 2 ** 31, 2 ** 32, 2 ** 53 + 2, -(2 ** 63), 2 ** 64, 1e308, -1e308, 5e-324),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
);

/** Timestamps at and past the edges of what JavaScript and Postgres can hold, or not quite ISO 8601. */
const oddTimestamp = fc.oneof(
  fc.constantFrom("0000-01-01T00:00:00Z", "-004714-11-23T00:00:00Z", "+275760-09-13T00:00:00.000Z", "2024-02-30T00:00:00Z", "2024-01-01T24:00:00Z", "2024-01-01T00:00:00+25:00", "2024-01-01", "2024-01-01T00:00:00.1234567890Z"),
  fc.date().map((d) => (Number.isNaN(d.getTime()) ? "Invalid Date" : d.toISOString())),
);

/** Any wrong value: odd strings, timestamps and numbers, wrong types, nested junk, deep nesting. */
const junk: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: oddString },
  { weight: 1, arbitrary: oddTimestamp },
  { weight: 3, arbitrary: oddNumber },
  { weight: 1, arbitrary: fc.boolean() },
  { weight: 1, arbitrary: fc.constantFrom(null, {}, [], [[]], { "": {} }) },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 1, arbitrary: fc.array(oddString, { maxLength: 4 }) },
  { weight: 1, arbitrary: fc.constantFrom(64, 10_000, 100_000).map(deep) },
);

/** Garbage for an enum: the zero value, numbers out of range, the other protocol's spelling, odd text. */
const enumJunk = (desc: DescEnum) =>
  fc.oneof(
    fc.constantFrom(0, -1, 99, 2 ** 31, 1.5, "0", desc.values[0]!.name, ...desc.values.map((v) => v.name.toLowerCase()), ...desc.values.slice(1).map((v) => ` ${wireNameOf(desc, v.number)}`)),
    fc.constantFrom(...desc.values.slice(1).flatMap((v) => [v.name, wireNameOf(desc, v.number)!])),
    oddString,
  );

// --- arbitraries: plausible values ---------------------------------------------

type Proto = "connect" | "v1";

const AGENT_IDS = fc.oneof({ weight: 3, arbitrary: fc.constant(ref("agent")) }, { weight: 1, arbitrary: fc.constantFrom(ref("registeredAgent"), ref("suspendedAgent")) });
const DECISION_IDS = fc.constantFrom(ref("allowDecision"), ref("allowDecision2"), ref("reviewDecision"), ref("reviewDecision2"), ref("denyDecision"), ref("boundDecision"));
const CAPABILITY_IDS = fc.constantFrom(ref("capability"), ref("consumedCapability"));
const RULES = {
  actions: ["vendor_payment"],
  rules: [
    { id: "hard_cap", when: { amount: { gt: 1_000_000 } }, outcome: "DENY", reason: "amount_over_hard_cap" },
    { id: "authority", authority: true },
  ],
};
const RULES_YAML = "actions: [vendor_payment]\nrules:\n  - id: hard_cap\n    when: {amount: {gt: 1000000}}\n    outcome: DENY\n    reason: amount_over_hard_cap\n  - id: authority\n    authority: true\n";
const GRAPH = {
  roles: [{ role: "clerk", reports_to: null }],
  memberships: [],
  limits: [{ holder: "role:clerk", action: "vendor_payment", currency: "USD", max_amount: 1_000 }],
  delegations: [],
  approval_matrix: [{ action: "vendor_payment", currency: "USD", up_to_amount: 1_000, approvals_required: 0 }],
};

const b64url = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");

/** Page tokens shaped like the service's own (base64url JSON `[timestamp, id]`) with odd contents. */
const pageToken = fc.oneof(
  { weight: 2, arbitrary: fc.constant("") },
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.oneof(fc.date().map((d) => (Number.isNaN(d.getTime()) ? "x" : d.toISOString())), fc.constantFrom(-8.64e15, 8.64e15, 0, true, null, "")), fc.oneof(fc.string({ maxLength: 30 }), oddString))
      .map(b64url),
  },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }).map(b64url) },
);

/** Compact JWS-looking tokens: odd headers and claims, a signature of random bytes. */
const forgedToken = fc
  .tuple(
    fc.oneof(fc.constantFrom({ alg: "EdDSA" }, { alg: "none" }, { alg: "HS256", kid: "k" }, {}), fc.record({ alg: fc.constant("EdDSA"), kid: oddString }), fc.jsonValue({ maxDepth: 2 })),
    fc.oneof(fc.record({ iss: fc.string(), org: fc.constant(ref("organization")), jti: fc.constant(ref("capability")), exp: oddNumber }, { requiredKeys: [] }), fc.jsonValue({ maxDepth: 2 })),
    fc.uint8Array({ minLength: 0, maxLength: 70 }),
  )
  .map(([h, c, sig]) => `${b64url(h)}.${b64url(c)}.${Buffer.from(sig).toString("base64url")}`);

/**
 * Plausible values of a field, by its proto name (any message, any RPC):
 * ids of fixtures that exist, fresh names and keys, values the service accepts.
 * A field not named here gets a plausible value of its type.
 */
const BY_NAME: Record<string, fc.Arbitrary<unknown> | ((proto: Proto) => fc.Arbitrary<unknown>)> = {
  agent_id: AGENT_IDS,
  principal_id: fc.constant(ref("principal")),
  acting_for_principal_id: fc.constant(ref("principal")),
  decision_id: DECISION_IDS,
  capability_id: CAPABILITY_IDS,
  evidence_id: fc.constant(ref("evidence")),
  integration_id: fc.constant(ref("integration")),
  adapter_id: fc.constant(ref("adapter")),
  key_id: fc.constant(ref("spareKey")),
  document_ids: fc.array(fc.constant(ref("document")), { maxLength: 2 }),
  policy_key: fc.constantFrom("payments", fresh("policy_key")),
  public_key: fc.constant(fresh("public_key")),
  email: fc.constant(fresh("email")),
  name: fc.constant(fresh("name")),
  external_ref: fc.constant(fresh("name")),
  display_name: fc.constantFrom("Pat Payables", "Ops desk"),
  token: fc.oneof({ weight: 3, arbitrary: fc.constant(ref("capabilityToken")) }, { weight: 1, arbitrary: forgedToken }),
  action: fc.constantFrom("reference_noop", "vendor_payment"),
  actions: fc.constant([fresh("action")]),
  audience: fc.constant("erp-gateway"),
  issued_by: fc.constant("fuzzer"),
  version: fc.integer({ min: 1, max: 3 }),
  ttl_seconds: fc.integer({ min: 1, max: 3600 }),
  page_size: fc.integer({ min: 1, max: 100 }),
  page_token: pageToken,
  after_seq: fc.integer({ min: 0, max: 20 }),
  resource_path: fc.constant("resource"),
  context_bindings: fc.constant({ po: "context.po" }),
  constraints: fc.constant({ amount: "500", currency: "USD" }),
  content: fc.constantFrom(ref("signingSchedule"), "holder,delegate,action,currency,max_amount,valid_until\nrole:clerk,,vendor_payment,USD,1000,\n"),
  graph: fc.constant(GRAPH),
  source: (proto) => fc.constantFrom({ rules: RULES }, { [proto === "v1" ? "rules_yaml" : "rulesYaml"]: RULES_YAML }),
  intent: fc.record({ agent_id: fc.constant(ref("agent")), action: fc.constant("vendor_payment"), amount: fc.constantFrom(500, 2_000, 60_000), currency: fc.constant("USD"), requested_at: fc.constant(NOW), nonce: fc.constant(UUID) }),
  policy_versions: fc.constant({ payments: 1 }),
  reason: fc.constantFrom("", "routine check"),
  description: fc.constantFrom("", "fuzzed"),
  owner: fc.constantFrom("", "finance"),
  business_unit: fc.constantFrom("", "AP"),
  environment: fc.constantFrom("", "prod"),
  resource: fc.constantFrom("", "invoice:INV-1"),
};

/** When a signed document says it was written: now, or an odd timestamp. */
const SIGNED_AT = fc.oneof({ weight: 3, arbitrary: fc.constant(NOW) }, { weight: 1, arbitrary: oddTimestamp });

/**
 * Signed documents, by the name of the bytes field that carries them: what an
 * agent (Intent, heartbeat) or adapter (receipt, report) signs.
 */
const SIGNED_DOCS: Record<string, Record<string, fc.Arbitrary<unknown>>> = {
  intent: {
    agent_id: fc.constant(ref("agent")),
    action: fc.constantFrom("vendor_payment", "reference_noop"),
    amount: fc.constantFrom(100, 500, 2_000, 9_000, 60_000, 2_000_000),
    currency: fc.constantFrom("USD", "EUR"),
    counterparty: fc.constant("ACME Corp"),
    resource: fc.constantFrom("po:1", "invoice:INV-1"),
    context: fc.constant({ po: "1" }),
    requested_at: SIGNED_AT,
    nonce: fc.constant(UUID),
  },
  signed_body: { agent_id: fc.constant(ref("agent")), sent_at: SIGNED_AT, nonce: fc.constant(UUID) },
  signed_receipt: {
    capability_id: CAPABILITY_IDS,
    receipt_id: fc.constant(UUID),
    status: fc.constantFrom("executed", "failed", "partial"),
    executed_fields: fc.constant({ po: "1" }),
    reported_at: SIGNED_AT,
  },
  signed_report: {
    decision_id: fc.oneof({ weight: 3, arbitrary: fc.constant(ref("boundDecision")) }, { weight: 1, arbitrary: DECISION_IDS }),
    report_id: fc.constant(UUID),
    operation: fc.constantFrom({ po: "1" }, { po: "2", resource: "po:1" }),
    reported_at: SIGNED_AT,
  },
};

/** Bytes to sign: a JSON document (`$signed`) or raw text (`$signedText`). */
type SignedDoc = { $signed: unknown } | { $signedText: string };
const isSignedDoc = (v: unknown): v is SignedDoc => v !== null && typeof v === "object" && ("$signed" in v || "$signedText" in v);
const docBytes = (d: SignedDoc): Buffer => ("$signed" in d ? serialize(d.$signed) : Buffer.from(d.$signedText, "utf8"));

/** A signed document for a bytes field: as expected, one member wrong or missing, extra members, or anything. */
function signedDoc(fieldName: string): fc.Arbitrary<SignedDoc> {
  const shape = SIGNED_DOCS[fieldName];
  const doc = shape
    ? fc.oneof(
        { weight: 4, arbitrary: fc.record(shape) },
        {
          weight: 3,
          arbitrary: fc.tuple(fc.record(shape), fc.constantFrom(...Object.keys(shape)), fc.option(junk)).map(([d, key, bad]) => {
            const out: Record<string, unknown> = { ...d };
            if (bad === null) delete out[key];
            else out[key] = bad;
            return out;
          }),
        },
        { weight: 1, arbitrary: fc.tuple(fc.record(shape), fc.dictionary(oddString, junk, { minKeys: 1, maxKeys: 2 })).map(([a, b]) => ({ ...b, ...a })) },
      )
    : fc.dictionary(oddString, junk, { maxKeys: 4 });
  return fc.oneof(
    { weight: 8, arbitrary: doc.map((d) => ({ $signed: d })) },
    { weight: 1, arbitrary: junk.map((d) => ({ $signed: d })) },
    { weight: 1, arbitrary: fc.constantFrom("", "{", '{"agent_id":', "[]", "null", "\u0000", '{"a":1}{"a":2}', "\ufeff{}").map((t) => ({ $signedText: t })) },
  );
}

const isBytes = (f: DescField) => f.fieldKind === "scalar" && f.scalar === ScalarType.BYTES;

/** The key of a field in a JSON body: camelCase JSON name for Connect, proto name for /v1. */
const keyOf = (f: DescField, proto: Proto) => (proto === "connect" ? f.jsonName : f.name);

function enumValue(desc: DescEnum, proto: Proto): fc.Arbitrary<unknown> {
  const values = desc.values.filter((v) => v.number !== 0);
  if (proto === "v1") return fc.constantFrom(...values.map((v) => wireNameOf(desc, v.number)!));
  return fc.oneof(fc.constantFrom(...values.map((v) => v.name)), fc.constantFrom(...values.map((v) => v.number)));
}

function scalarValue(scalar: ScalarType, proto: Proto): fc.Arbitrary<unknown> {
  switch (scalar) {
    case ScalarType.STRING:
      return fc.string({ maxLength: 20 });
    case ScalarType.BOOL:
      return fc.boolean();
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return fc.double({ min: -1e6, max: 1e6, noNaN: true });
    case ScalarType.BYTES:
      return fc.uint8Array({ maxLength: 32 }).map((b) => Buffer.from(b).toString("base64"));
    case ScalarType.INT64:
    case ScalarType.UINT64:
    case ScalarType.SINT64:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
      // proto3 JSON (Connect) writes 64-bit integers as strings and reads numbers too.
      return proto === "connect" ? fc.oneof(fc.nat(1000), fc.nat(1000).map(String)) : fc.nat(1000);
    default:
      return fc.nat(1000);
  }
}

function messageValue(desc: DescMessage, proto: Proto, depth: number): fc.Arbitrary<unknown> {
  switch (desc.typeName) {
    case "google.protobuf.Timestamp":
      return fc.constant(NOW);
    case "google.protobuf.Struct":
      return fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 });
    case "google.protobuf.Value":
      return fc.jsonValue({ maxDepth: 2 });
    case "google.protobuf.ListValue":
      return fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 4 });
  }
  if (depth > 3) return fc.constant({});
  return fc.record(Object.fromEntries(desc.fields.map((f) => [keyOf(f, proto), fieldValue(f, proto, depth + 1)])), { requiredKeys: [] });
}

function singular(field: DescField, kind: "scalar" | "enum" | "message", proto: Proto, depth: number): fc.Arbitrary<unknown> {
  if (kind === "enum") return enumValue(field.enum!, proto);
  if (kind === "message") return messageValue(field.message!, proto, depth);
  return scalarValue(field.scalar!, proto);
}

/** A plausible value of a field: by name if known, else by type. */
function plausible(field: DescField, proto: Proto, depth: number): fc.Arbitrary<unknown> {
  const isEnum = field.fieldKind === "enum" || (field.fieldKind === "list" && field.listKind === "enum");
  const named = isEnum ? undefined : BY_NAME[field.name];
  if (named) return typeof named === "function" ? named(proto) : named;
  switch (field.fieldKind) {
    case "list":
      return fc.array(singular(field, field.listKind, proto, depth), { maxLength: 4 });
    case "map":
      return fc.dictionary(fc.string({ minLength: 1, maxLength: 10 }), singular(field, field.mapKind, proto, depth), { maxKeys: 3 });
    default:
      return singular(field, field.fieldKind, proto, depth);
  }
}

/** A wrong value shaped like the field: garbage enums, lists and maps of junk, odd strings or numbers. */
function wrongShape(field: DescField): fc.Arbitrary<unknown> {
  const e = field.fieldKind === "enum" ? field.enum : field.fieldKind === "list" && field.listKind === "enum" ? field.enum : undefined;
  if (field.fieldKind === "list") return fc.array(e ? enumJunk(e) : junk, { minLength: 1, maxLength: 3 });
  if (e) return enumJunk(e);
  if (field.fieldKind === "map" || field.fieldKind === "message") return fc.dictionary(oddString, junk, { minKeys: 1, maxKeys: 3 });
  return field.scalar === ScalarType.STRING ? oddString : oddNumber;
}

/** One field's value: mostly plausible, often junk; a bytes field carries a signed document. */
function fieldValue(field: DescField, proto: Proto, depth = 0): fc.Arbitrary<unknown> {
  if (isBytes(field)) return fc.oneof({ weight: 5, arbitrary: signedDoc(field.name) }, { weight: 1, arbitrary: junk });
  return fc.oneof({ weight: 6, arbitrary: plausible(field, proto, depth) }, { weight: 2, arbitrary: junk }, { weight: 1, arbitrary: wrongShape(field) });
}

/**
 * A request to send: field values by proto name (path variables, body, query),
 * extra unknown keys, and sometimes a whole body that replaces it all.
 */
interface Draft {
  values: Record<string, unknown>;
  extra: Record<string, unknown>;
  /** Sometimes the whole body instead: any JSON value, or broken text. */
  whole?: { json: unknown } | { text: string };
  /** Connect only: the snake_case proto names instead of the JSON names (protobuf JSON accepts both). */
  protoNames: boolean;
}

const pathVariables = (b: Binding | undefined) => [...(b?.template.matchAll(/\{([a-z_][a-z0-9_]*)/g) ?? [])].map((m) => m[1]!);

function draft(rpc: Rpc, proto: Proto): fc.Arbitrary<Draft> {
  const fields = rpc.method.input.fields;
  const model = Object.fromEntries(fields.map((f) => [f.name, fieldValue(f, proto)]));
  const other = (f: DescField) => (proto === "connect" ? f.name : f.jsonName);
  const values = fc.oneof(
    { weight: 4, arbitrary: fc.record(model) },
    { weight: 1, arbitrary: fc.record(model, { requiredKeys: proto === "v1" ? pathVariables(rpc.binding) : [] }) },
  );
  const extra = fc.oneof(
    { weight: 8, arbitrary: fc.constant({}) },
    { weight: 1, arbitrary: fc.dictionary(fc.constantFrom("extra", "__proto__", "constructor", "", ...fields.map(other)), junk, { minKeys: 1, maxKeys: 2 }) },
  );
  const whole = fc.oneof(
    { weight: 12, arbitrary: fc.constant(undefined) },
    { weight: 1, arbitrary: junk.map((json) => ({ json })) },
    { weight: 1, arbitrary: fc.constantFrom("", "{", '{"', "[1,", "nul", '"\\ud800"', '{"a":1}{', " ", "\u0000").map((text) => ({ text })) },
  );
  const protoNames = proto === "connect" ? fc.nat(3).map((n) => n === 0) : fc.constant(false);
  return fc.record({ values, extra, whole, protoNames });
}

// --- arbitraries: credentials ----------------------------------------------------

type Creds = { kind: "none" | "bearer" | "operator" | "agent" | "adapter" } | { kind: "garbage"; headers: Record<string, string> };

const garbageHeaders: fc.Arbitrary<Record<string, string>> = fc.oneof(
  headerText().map((v) => ({ authorization: v })),
  headerText().map((v) => ({ authorization: `Bearer ${v}` })),
  fc.constantFrom("Bearer", "Bearer ", "Basic dXNlcjpwYXNz", "Bearer a b", "bearer\t").map((v) => ({ authorization: v })),
  headerText().map((v) => ({ "x-service-operator-key": v, "x-service-organization-id": ref("organization") })),
  headerText().map((v) => ({ "x-service-operator-key": ref("operatorKey"), "x-service-organization-id": v })),
  fc.tuple(headerText(), headerText()).map(([k, s]) => ({ "x-service-key-id": k, "x-service-signature": s })),
  fc.tuple(fc.constantFrom(ref("certificate"), ref("adapter")), headerText(100), fc.constantFrom(NOW, "", "yesterday", "1970-01-01T00:00:00Z")).map(([k, s, t]) => ({
    "x-service-key-id": k,
    "x-service-signature": s,
    "x-service-timestamp": t,
  })),
  fc.constantFrom(ref("certificate"), ref("adapter"), long(70, "k")).map((k) => ({ "x-service-key-id": k, "x-service-signature": `${"A".repeat(86)}==` })),
);

/**
 * Who calls: nobody, the org's all-permission key, the operator, the agent or
 * adapter signing, or garbage. Signers weigh more where the input carries a
 * signed document (a bytes field), administrators elsewhere.
 */
function credentials(rpc: Rpc): fc.Arbitrary<Creds> {
  const signed = rpc.method.input.fields.some(isBytes);
  return fc.oneof(
    { weight: 1, arbitrary: fc.constant({ kind: "none" as const }) },
    { weight: signed ? 1 : 3, arbitrary: fc.constant({ kind: "bearer" as const }) },
    { weight: signed ? 1 : 2, arbitrary: fc.constant({ kind: "operator" as const }) },
    { weight: signed ? 4 : 1, arbitrary: fc.constant({ kind: "agent" as const }) },
    { weight: signed ? 3 : 1, arbitrary: fc.constant({ kind: "adapter" as const }) },
    { weight: 2, arbitrary: garbageHeaders.map((headers) => ({ kind: "garbage" as const, headers })) },
  );
}

/**
 * The headers of `creds`. A signer signs `signed` (the signed document, else
 * the body); on a GET-bound method it signs an agent read instead:
 * `GET <path>\n<timestamp>`, the path with its variables unencoded.
 */
function authHeaders(creds: Creds, signed: Uint8Array, getLine: string | undefined): Record<string, string> {
  switch (creds.kind) {
    case "none":
      return {};
    case "bearer":
      return { authorization: `Bearer ${org.apiKey}` };
    case "operator":
      return { "x-service-operator-key": svc.operatorKey!, "x-service-organization-id": org.organizationId };
    case "garbage":
      return Object.fromEntries(Object.entries(creds.headers).map(([k, v]) => [k, resolveText(v)]));
    default: {
      const [keyId, key] = creds.kind === "agent" ? [agent.certificateId, agent.key] : [adapter.adapterId, adapter.key];
      if (getLine === undefined) return { "x-service-key-id": keyId, "x-service-signature": key.sign(signed) };
      const timestamp = new Date().toISOString();
      return { "x-service-key-id": keyId, "x-service-signature": key.sign(`${getLine}\n${timestamp}`), "x-service-timestamp": timestamp };
    }
  }
}

// --- sending ---------------------------------------------------------------------

interface Exchange {
  /** What was sent, for the failure message (a curl-able description). */
  request: string;
  status: number;
  body: unknown;
}

/** A path variable or query value as text. */
const asText = (v: unknown): string => (typeof v === "string" ? v : v === undefined || v === null ? "" : typeof v === "object" ? JSON.stringify(v) : String(v));

/** Percent-encodes every UTF-16 unit; a lone surrogate becomes its (invalid) 3-byte UTF-8 form. */
function pct(s: string): string {
  let out = "";
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      out += encodeURIComponent(s.slice(i, i + 2));
      i++;
    } else if (c >= 0xd800 && c <= 0xdfff) {
      out += [0xe0 | (c >> 12), 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f)].map((b) => `%${b.toString(16).toUpperCase()}`).join("");
    } else out += encodeURIComponent(s[i]!);
  }
  return out;
}

/** The agent-read line of a GET-bound method (`GET /v1/decisions/<id>`), else undefined. */
function getLine(rpc: Rpc, values: Record<string, unknown>): string | undefined {
  if (rpc.binding?.verb !== "GET") return undefined;
  return `GET ${rpc.binding.template.replace(/\{([a-z_][a-z0-9_]*)(?:=\*)?\}/g, (_, name: string) => asText(values[name]))}`;
}

const describeRequest = (verb: string, path: string, headers: Record<string, string>, body: Uint8Array | undefined) => {
  const h = Object.entries(headers).map(([k, v]) => `-H '${k}: ${v.length > 120 ? `${v.slice(0, 120)}…(${v.length})` : v}'`);
  const b = body === undefined ? "" : Buffer.from(body).toString("utf8");
  return `curl -X ${verb} '${path.length > 300 ? `${path.slice(0, 300)}…(${path.length})` : path}' ${h.join(" ")}${body === undefined ? "" : ` --data-binary '${b.length > 400 ? `${b.slice(0, 400)}…(${b.length} bytes)` : b}'`}`;
};

/** Replaces each signed document by its bytes (base64, as proto3 JSON writes bytes) and collects the bytes. */
function renderSigned(values: Record<string, unknown>, signed: Buffer[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(values)) {
    if (isSignedDoc(v)) {
      const bytes = docBytes(v);
      signed.push(bytes);
      out[k] = bytes.toString("base64");
    } else out[k] = v;
  }
  return out;
}

/** POST /<service>/<Method> over the Connect protocol with a JSON body. */
async function sendConnect(rpc: Rpc, d: Draft, creds: Creds): Promise<Exchange> {
  const values = resolve(d.values) as Record<string, unknown>;
  const signed: Buffer[] = [];
  const rendered = renderSigned(values, signed);
  const named: Record<string, unknown> = {};
  for (const f of rpc.method.input.fields) if (f.name in rendered) named[d.protoNames ? f.name : f.jsonName] = rendered[f.name];
  let body: Buffer;
  if (d.whole && "text" in d.whole) body = Buffer.from(d.whole.text, "utf8");
  else body = serialize(d.whole ? resolve(d.whole.json) : { ...named, ...(resolve(d.extra) as object) });
  const headers = { "content-type": "application/json", "connect-protocol-version": "1", ...authHeaders(creds, signed[0] ?? body, getLine(rpc, values)) };
  const path = `/${rpc.service.typeName}/${rpc.method.name}`;
  const res = await svc.v1("POST", path, { headers, body: new Uint8Array(body) });
  return { request: describeRequest("POST", path, headers, body), status: res.status, body: res.body };
}

/** The same call over /v1: path variables, then the body ("*" or one field) or the query string. */
async function sendV1(rpc: Rpc, d: Draft, creds: Creds): Promise<Exchange> {
  const binding = rpc.binding!;
  const values = resolve(d.values) as Record<string, unknown>;
  const rest = { ...values };
  const path = binding.template.replace(/\{([a-z_][a-z0-9_]*)(?:=\*)?\}/g, (_, name: string) => {
    const v = rest[name];
    delete rest[name];
    return pct(asText(v));
  });
  const signed: Buffer[] = [];
  let body: Buffer | undefined;
  let query = "";
  const extra = resolve(d.extra) as Record<string, unknown>;
  if (binding.body === "*") body = serialize({ ...renderSigned(rest, signed), ...extra });
  else if (binding.body !== "") {
    // A bytes body field is the raw body: the signed document exactly as signed.
    const v = rest[binding.body];
    if (isSignedDoc(v)) signed.push((body = docBytes(v)));
    else if (v !== undefined) body = serialize(v);
  } else {
    const params: string[] = [];
    for (const [k, v] of Object.entries({ ...rest, ...extra })) {
      for (const item of Array.isArray(v) ? v : [v]) params.push(`${pct(k)}=${pct(asText(item))}`);
    }
    query = params.length ? `?${params.join("&")}` : "";
  }
  if (d.whole && binding.body !== "") body = "text" in d.whole ? Buffer.from(d.whole.text, "utf8") : serialize(resolve(d.whole.json));
  const headers = authHeaders(creds, signed[0] ?? body ?? Buffer.alloc(0), getLine(rpc, values));
  const res = await svc.v1(binding.verb, path + query, { headers, body: body && new Uint8Array(body) });
  return { request: describeRequest(binding.verb, path + query, headers, body), status: res.status, body: res.body };
}

// --- the checks ------------------------------------------------------------------

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** Problems with a /v1 answer: a 5xx, or a refusal without detail, message or request_id. */
function v1Problems(status: number, body: unknown): string[] {
  if (status >= 500) return [`status ${status}`];
  if (status < 300) return isObject(body) ? [] : ["2xx without a JSON object"];
  const problems: string[] = [];
  if (!isObject(body)) return ["error without a JSON object body"];
  if (typeof body.detail !== "string" || !/^[a-z_]+$/.test(body.detail)) problems.push("no detail code");
  if (typeof body.message !== "string") problems.push("no message");
  if (typeof body.request_id !== "string" || body.request_id === "") problems.push("no request_id");
  return problems;
}

/** The decoded mandate.v1.ErrorDetail of a Connect error body, if any. */
function errorDetail(body: unknown) {
  const details = isObject(body) && Array.isArray(body.details) ? (body.details as { type?: string; value?: string }[]) : [];
  const d = details.find((x) => x?.type === "mandate.v1.ErrorDetail");
  if (!d || typeof d.value !== "string") return undefined;
  try {
    return fromBinary(ErrorDetailSchema, Buffer.from(d.value, "base64"));
  } catch {
    return undefined;
  }
}

/** Problems with a Connect answer: a 5xx, internal/unknown, or an error without a decodable ErrorDetail. */
function connectProblems(status: number, body: unknown): string[] {
  const problems: string[] = [];
  if (status >= 500) problems.push(`status ${status}`);
  if (status === 200) return isObject(body) ? problems : [...problems, "200 without a JSON object"];
  const code = isObject(body) ? body.code : undefined;
  if (code === "internal" || code === "unknown") problems.push(`code ${code}`);
  const detail = errorDetail(body);
  if (!detail) problems.push("no mandate.v1.ErrorDetail");
  else {
    if (!detail.detail) problems.push("ErrorDetail without detail");
    if (!detail.requestId) problems.push("ErrorDetail without request id");
  }
  return problems;
}

/** What came back, per protocol: HTTP statuses and detail codes ("ok" for a success). */
const seen: Record<Proto, Map<string, number>> = { connect: new Map(), v1: new Map() };
const count = (proto: Proto, key: string) => seen[proto].set(key, (seen[proto].get(key) ?? 0) + 1);

function record(proto: Proto, status: number, body: unknown): void {
  count(proto, `http ${status}`);
  const detail = status === 200 ? "ok" : proto === "v1" ? (isObject(body) ? body.detail : undefined) : errorDetail(body)?.detail;
  count(proto, `detail ${String(detail)}`);
}

// --- the properties ----------------------------------------------------------------

const MUTATES_FIXTURES = /^(Suspend|Revoke|Retire|Rotate)/;

function fuzz(proto: Proto, rpc: Rpc): Promise<void> {
  const send = proto === "connect" ? sendConnect : sendV1;
  const problemsOf = proto === "connect" ? connectProblems : v1Problems;
  return fc.assert(
    fc.asyncProperty(draft(rpc, proto), credentials(rpc), async (d, creds) => {
      const x = await send(rpc, d, creds);
      record(proto, x.status, x.body);
      const problems = problemsOf(x.status, x.body);
      if (problems.length) throw new Error(`${rpc.id} (${proto}, credentials ${creds.kind}) → ${x.status} ${JSON.stringify(x.body)?.slice(0, 600)}: ${problems.join(", ")}\n${x.request}`);
      if (x.status === 200 && MUTATES_FIXTURES.test(rpc.method.name)) await heal();
    }),
    { numRuns: RUNS_PER_RPC, seed: SEED },
  );
}

/** The generators must reach past the front door: successes, validation failures, auth refusals, not-founds. */
function expectVariedOutcomes(proto: Proto): void {
  const summary = JSON.stringify([...seen[proto]].sort());
  if (process.env.FUZZ_REPORT) console.log(`api-fuzz ${proto}: ${summary}`);
  for (const key of ["detail ok", "detail validation_failed", "detail missing_credentials", "detail not_found"]) {
    expect(seen[proto].get(key) ?? 0, `${proto} answers with ${key}: ${summary}`).toBeGreaterThan(0);
  }
  if (proto === "v1") for (const s of [200, 401, 404, 422]) expect(seen.v1.get(`http ${s}`) ?? 0, `v1 answers with status ${s}: ${summary}`).toBeGreaterThan(0);
}

describe("every RPC over the Connect protocol: no 5xx, never internal/unknown, every error a mandate.v1.ErrorDetail", () => {
  it("enumerates the RPCs from the descriptors", () => {
    expect(RPCS.length).toBeGreaterThan(50);
    expect(RPCS.map((r) => r.id)).toEqual(expect.arrayContaining(["IntentService.SubmitIntent", "AgentService.Heartbeat", "ExecutionReportService.SubmitExecutionReceipt"]));
  });
  it.each(RPCS.map((r) => [r.id, r] as const))("%s", (_, rpc) => fuzz("connect", rpc), 60_000);
  it("reaches varied outcomes", () => expectVariedOutcomes("connect"));
});

describe("every RPC over /v1: no 5xx, every refusal with detail, message and request_id", () => {
  it.each(RPCS.filter((r) => r.binding).map((r) => [r.id, r] as const))("%s", (_, rpc) => fuzz("v1", rpc), 60_000);
  it("reaches varied outcomes", () => expectVariedOutcomes("v1"));
});
