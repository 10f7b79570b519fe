import { randomBytes, randomInt, randomUUID } from "node:crypto";
import { ScalarType, type DescMethod } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PERMISSIONS } from "../../src/base/caller.js";
import { accessOf } from "../../src/transport/access.js";
import { ErrorDetailSchema } from "../../src/gen/mandate/v1/errors_pb.js";
import { bindingOf, loadAllMandateServices, messageFromWireJson } from "../support/api.js";
import { call, intentDoc, newAgent, newAgentKey, newApiKey, signBody, submitIntent, toWire, type AgentKey, type OrgFixture, type TestAgent } from "../support/agents.js";
import { startService, type TestService } from "../support/service.js";
import { allowedCapability, issueOk, verify, type Presentation } from "../e2e/capabilities-support.js";
import { FULL, recordRow } from "./report.js";

/*
 * Hostile row 1, cross-tenant access. Organization A holds one of everything (agents,
 * decisions in every state a probe could move, capabilities issued and consumed, policies
 * published and awaiting approval, an integration with a contract, an adapter and a destination
 * identity, a governance document, a draft authority graph, evidence, API keys), and every text
 * field of A's carries a canary. Organization B calls every unary RPC of every mandate package
 * (enumerated from the generated descriptors, v1alpha and the RPCs that still answer
 * UNIMPLEMENTED included, so a new RPC is probed without touching this file) with every kind of
 * credential it has: its all-permission key, one key per permission (PERMISSIONS in
 * base/caller.ts), its all-permission key naming A's organization in X-Service-Organization-Id,
 * its agent's, adapter's and destination identity's signatures, and the operator key acting for
 * B. Each call goes over /v1 JSON (for a method with a google.api.http binding), gRPC on the
 * unary fast path, gRPC through connect-node (gzip-compressed, which the fast path leaves to it) and the Connect
 * protocol, naming A's resources in every path variable and request field that takes one (and,
 * for a method acting on a resource, once more with B's own resource in the path and A's in the
 * body). The request is otherwise well formed, so that it reaches the lookup.
 *
 * The operator key is platform-wide: naming A's organization it may act for A, and the
 * platform methods (suspending, reactivating, creating organizations) take an organization id by
 * design. So it is probed only as it acts for B (X-Service-Organization-Id: B), and not on
 * platform methods: there, crossing organizations is its job, not a leak.
 *
 * A probe naming A's ids has a twin naming well-formed ids that exist nowhere, asked once per
 * method, credential and variant (over its first route). A probe fails when:
 *   - its answer (status, error code, and each field error's field and code, ids blanked) differs
 *     from its twin's: B can tell that A's resource exists, or reached it (a 200 where the twin
 *     has 404);
 *   - its answer carries an id of A's that the request did not send, A's organization id, name,
 *     key or certificate, or the canary (a leak through a list, a lookup or an error);
 *   - it presented A's capability token and succeeded;
 *   - it answered 500.
 * And after every probe, A's state as A reads it (organization, keys, principals, agents,
 * decisions, capabilities, policies, integrations, authority graph, documents, the evidence
 * chain) must be exactly what it was before. At full scale every method meets every credential
 * over every route; at the short scale (`npm test`) over one route, taken in turn.
 *
 * Not covered here: server-streaming RPCs (v1alpha WatchEvents), which answer UNIMPLEMENTED for now.
 */

/** A text no answer to B may ever contain: every name and free-text field of A's holds it. */
const CANARY = `canaryA${randomBytes(6).toString("hex")}`;

type Route = "v1" | "grpc" | "grpc-gzip" | "connect";
/** The ways in: /v1, the unary gRPC fast path, connect-node for gzip-compressed gRPC, and Connect. */
const ROUTES: readonly Route[] = ["v1", "grpc", "grpc-gzip", "connect"];
const ROUTE_NAMES: Record<Route, string> = {
  v1: "/v1 JSON",
  grpc: "gRPC (fast path)",
  "grpc-gzip": "gRPC (connect-node, gzip)",
  connect: "Connect",
};

/** The HTTP status each gRPC code stands for (docs/architecture.md, Error model). */
const HTTP_OF_CODE: Partial<Record<Code, number>> = {
  [Code.Unauthenticated]: 401,
  [Code.PermissionDenied]: 403,
  [Code.NotFound]: 404,
  [Code.FailedPrecondition]: 409,
  [Code.AlreadyExists]: 409,
  [Code.ResourceExhausted]: 413,
  [Code.InvalidArgument]: 422,
  [Code.Unavailable]: 503,
  [Code.Internal]: 500,
  [Code.Unknown]: 500,
  [Code.Unimplemented]: 501,
};

interface Answer {
  status: number;
  detail?: string;
  body: unknown;
}

/** A well-formed id that names nothing: the last 8 characters redrawn within their character class. */
function unknownLike(id: string): string {
  const pick = (s: string) => s[randomInt(s.length)]!;
  const head = id.slice(0, -8);
  const tail = [...id.slice(-8)]
    .map((c) => (/[0-9]/.test(c) ? pick("0123456789") : /[a-f]/.test(c) ? pick("abcdef") : /[a-z]/.test(c) ? pick("abcdefghijklmnopqrstuvwxyz") : /[A-Z]/.test(c) ? pick("ABCDEFGHIJKLMNOPQRSTUVWXYZ") : c))
    .join("");
  return head + tail;
}

/**
 * Fields left out: B's own name for something, not a reference to A's resource; and the acting
 * principal on UpdateAgent, which is refused as immutable before the agent is looked up.
 */
const NOT_A_REFERENCE = new Set(["PolicyService.CreatePolicy.policy_key", "AgentService.UpdateAgent.acting_for_principal_id"]);

/** Runs `fn` over `items`, at most `width` at a time. */
async function pool<T>(items: readonly T[], width: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, items.length) }, async () => {
      while (next < items.length) await fn(items[next++]!);
    }),
  );
}

/** One of B's credentials: the headers it adds to a request (signatures cover what is sent). */
interface Credential {
  kind: string;
  /** Whether to probe `method` with it (the operator is kept off platform methods). */
  applies(method: DescMethod): boolean;
  headers(method: DescMethod, request: Record<string, unknown>): Record<string, string>;
}

describe("hostile: cross-tenant access", () => {
  let svc: TestService;
  /** A's ids by the field names that take them. */
  let ids: Record<string, string>;
  /** Per method, the A id a field takes there instead (a decision in the state the method acts on). */
  let overrides: Record<string, Record<string, string>>;
  /** Per method, the version number of A's it names (default 1). */
  let versions: Record<string, number>;
  /** B's own resources by the field names that take them. */
  let own: Record<string, string>;
  /** What must never appear in an answer to B unless B sent it. */
  let secrets: string[];
  let presentation: Presentation;
  let aKey: string;
  let credentials: Credential[];

  beforeAll(async () => {
    svc = await startService();

    // ---- Organization A, every text field carrying the canary.
    const orgA = await svc.newOrg(`Tenant A ${CANARY}`);
    const ok = async (method: string, path: string, body: unknown = {}, bearer = orgA.apiKey) => {
      const res = await svc.v1(method, path, { bearer, body: method === "GET" ? undefined : body });
      if (res.status !== 200) throw new Error(`A's ${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body;
    };
    aKey = orgA.apiKey;
    const principal = await ok("POST", "/v1/principals", { display_name: `Alex ${CANARY}`, kind: "person", external_ref: `alex-${CANARY}` });
    const org: OrgFixture = { ...orgA, principalId: principal.principal_id };
    const approver = await newApiKey(svc, aKey, ["POLICY_APPROVER"], `approver ${CANARY}`);
    const reader = await newApiKey(svc, aKey, ["DECISION_READ"], `reader ${CANARY}`);
    const agentKey = newAgentKey();
    const registered = await ok("POST", "/v1/agents", {
      name: `agent ${CANARY}`,
      acting_for_principal_id: org.principalId,
      public_key: agentKey.publicKey,
      owner: `owner ${CANARY}`,
      business_unit: `unit ${CANARY}`,
      environment: "production",
    });
    await ok("POST", `/v1/agents/${registered.agent_id}/activate`, { reason: `go ${CANARY}` });
    const agent: TestAgent = { agentId: registered.agent_id, certificateId: registered.certificate_id, key: agentKey, org };

    // A published policy (so A's bundle, and its digest, is A's alone) and one awaiting approval.
    const source = (reason: string) => ({ rules: { actions: ["vendor_payment"], rules: [{ id: "cap", when: { amount: { gt: 10 } }, outcome: "DENY", reason }] } });
    const published = `live-${randomUUID().slice(0, 8)}`;
    await ok("POST", "/v1/policies", { policy_key: published, description: `A's live policy ${CANARY}`, source: source("over_cap") });
    await ok("POST", `/v1/policies/${published}/versions/1/submit`);
    await ok("POST", `/v1/policies/${published}/versions/1/approve`, {}, approver.apiKey);
    await ok("POST", `/v1/policies/${published}/versions/1/publish`, {}, approver.apiKey);
    const policyKey = `secret-${randomUUID().slice(0, 8)}`;
    await ok("POST", "/v1/policies", { policy_key: policyKey, description: `A's draft ${CANARY}`, source: source("over_draft_cap") });
    await ok("POST", `/v1/policies/${policyKey}/versions/1/submit`);

    // Decisions: one with an issued (unconsumed) capability, one ALLOW without a capability yet,
    // one awaiting review, one whose review A approved (its capability not yet issued).
    const fields = { amount: 125.5, currency: "EUR", counterparty: `ACME ${CANARY}`, resource: `invoice:${CANARY}` };
    const cap = await allowedCapability(svc, agent, fields);
    presentation = cap.presentation;
    const decide = async (doc: Record<string, unknown>) => {
      const res = await submitIntent(svc, "v1", signBody(agent, intentDoc(agent.agentId, doc)));
      if (res.status !== 200) throw new Error(`A's Intent: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body as { decision_id: string; outcome: string; evidence_id: string };
    };
    const free = await decide(fields);
    expect(free.outcome).toBe("ALLOW");
    const pending = await decide({ action: `unheard_of_${CANARY}` });
    expect(pending.outcome).toBe("HUMAN_REVIEW");
    const reviewed = await decide({ action: `unheard_of_${CANARY}` });
    await ok("POST", `/v1/decisions/${reviewed.decision_id}/review`, { resolution: "approved", reason: `fine ${CANARY}` });

    // An integration covering the action, its approved contract, an adapter and a destination,
    // and a decision through it whose capability was consumed: what receipts and reports name.
    const integration = await ok("POST", "/v1/integrations", { name: `erp ${CANARY}`, actions: ["reference_noop"] });
    const integrationId = integration.integration_id as string;
    await ok("POST", `/v1/integrations/${integrationId}/contract-versions`, { resource_path: "resource", context_bindings: { po: "context.po" } });
    await ok("POST", `/v1/integrations/${integrationId}/contract-versions/1/approve`, {}, approver.apiKey);
    const adapter = await ok("POST", `/v1/integrations/${integrationId}/adapters`, { name: `adapter ${CANARY}`, public_key: newAgentKey().publicKey });
    await ok("POST", `/v1/integrations/${integrationId}/adapters`, { name: `destination ${CANARY}`, public_key: newAgentKey().publicKey, role: "destination" });
    const bound = await decide({ resource: `po:${CANARY}`, context: { po: CANARY } });
    expect(bound.outcome).toBe("ALLOW");
    const boundCap = await issueOk(svc, aKey, bound.decision_id, { audience: "erp" });
    expect((await verify(svc, "v1", aKey, { token: boundCap.token, audience: "erp", action: "reference_noop", resource: `po:${CANARY}`, constraints: { po: CANARY } })).status).toBe(200);
    // A second contract version, proposed: approving it is a change B must not make.
    const proposed = await ok("POST", `/v1/integrations/${integrationId}/contract-versions`, { resource_path: "resource", context_bindings: { po: "context.po", vendor: "context.vendor" } });

    // A governance document and a draft authority graph.
    const doc = await ok("POST", "/v1/authority-graph/documents", { kind: "signing_schedule", format: "csv", content: `principal,role,reports_to\nalex-${CANARY},clerk,\n`, name: `schedule-${CANARY}.csv` });
    const graph = await ok("POST", "/v1/authority-graph/versions", {
      graph: {
        roles: [{ role: "clerk", reports_to: null }],
        memberships: [{ principal: `alex-${CANARY}`, role: "clerk" }],
        limits: [{ holder: "role:clerk", action: "vendor_payment", currency: "USD", max_amount: 500 }],
        delegations: [],
        approval_matrix: [{ action: "vendor_payment", currency: "USD", up_to_amount: 500, approvals_required: 0 }],
      },
    });
    // A webhook, once the service has them (until then the RPCs answer UNIMPLEMENTED and are probed with made-up ids).
    const webhook = await svc.v1("POST", "/v1alpha/webhooks", { bearer: aKey, body: { url: "https://a.example.com/hook", events: [], description: `A's hook ${CANARY}` } });
    const decision = await ok("GET", `/v1/decisions/${cap.decisionId}`);
    expect(decision.bundle_digest).toMatch(/^[0-9a-f]{64}$/);

    ids = {
      agent_id: agent.agentId,
      decision_id: cap.decisionId,
      capability_id: cap.capabilityId,
      policy_key: policyKey,
      principal_id: org.principalId,
      acting_for_principal_id: org.principalId,
      integration_id: integrationId,
      adapter_id: adapter.adapter_id,
      evidence_id: free.evidence_id,
      key_id: reader.keyId,
      organization_id: org.organizationId,
      token: cap.presentation.token,
      document_id: doc.document_id,
      digest: decision.bundle_digest,
      ...(webhook.status === 200 && { webhook_id: webhook.body.webhook_id as string }),
    };
    overrides = {
      "CapabilityService.IssueCapability": { decision_id: free.decision_id },
      "CapabilityService.IssueCapabilityFromReview": { decision_id: reviewed.decision_id },
      "DecisionService.ReviewDecision": { decision_id: pending.decision_id },
      "ExecutionReportService.SubmitExecutionReceipt": { capability_id: boundCap.capability_id },
      "ExecutionReportService.SubmitAdapterReport": { decision_id: bound.decision_id },
      "ReconciliationService.Reconcile": { decision_id: bound.decision_id },
    };
    versions = {
      "IntegrationService.ApproveContractVersion": proposed.version,
      "AuthorityGraphService.ApproveGraphVersion": graph.version,
      "AuthorityGraphService.PublishGraphVersion": graph.version,
      "AuthorityGraphService.GetGraphVersion": graph.version,
    };
    secrets = [
      ...new Set([
        ...Object.values(ids),
        ...Object.values(overrides).flatMap((o) => Object.values(o)),
        aKey,
        approver.apiKey,
        reader.apiKey,
        approver.keyId,
        agent.certificateId,
        agentKey.publicKey,
        published,
        boundCap.token,
        CANARY,
      ]),
    ];

    // ---- Organization B and every kind of credential it has.
    const orgB = await svc.newOrg();
    const pB = await svc.v1("POST", "/v1/principals", { bearer: orgB.apiKey, body: { display_name: "Blake B", kind: "person", external_ref: `blake-${randomUUID().slice(0, 8)}` } });
    expect(pB.status).toBe(200);
    const b: OrgFixture = { ...orgB, principalId: pB.body.principal_id };
    const bAgent = await newAgent(svc, b);
    const bIntegration = await svc.v1("POST", "/v1/integrations", { bearer: b.apiKey, body: { name: "b-erp", actions: ["reference_noop"] } });
    expect(bIntegration.status).toBe(200);
    const identity = async (role: "adapter" | "destination") => {
      const key = newAgentKey();
      const res = await svc.v1("POST", `/v1/integrations/${bIntegration.body.integration_id}/adapters`, { bearer: b.apiKey, body: { name: `b-${role}`, public_key: key.publicKey, role } });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return { keyId: res.body.adapter_id as string, key };
    };
    const [bAdapter, bDestination] = [await identity("adapter"), await identity("destination")];
    own = { agent_id: bAgent.agentId, integration_id: bIntegration.body.integration_id, adapter_id: bAdapter.keyId };

    const bearer = (key: string) => ({ authorization: `Bearer ${key}` });
    const signed = (keyId: string, key: AgentKey) => (method: DescMethod, request: Record<string, unknown>): Record<string, string> => {
      const bytes = Object.values(request).find((v): v is Uint8Array => v instanceof Uint8Array);
      if (bytes) return { "x-service-key-id": keyId, "x-service-signature": key.sign(bytes) };
      // A signed read: "<VERB> <path>\n<timestamp>" (docs/architecture.md, Authentication).
      const timestamp = new Date().toISOString();
      const binding = bindingOf(method);
      const path = binding ? binding.template.replace(/\{([a-z_]+)(?:=\*)?\}/g, (_, n: string) => String(request[n] ?? "")) : `/${method.parent.typeName}/${method.name}`;
      return { "x-service-key-id": keyId, "x-service-signature": key.sign(`${binding?.verb ?? "POST"} ${path}\n${timestamp}`), "x-service-timestamp": timestamp };
    };
    const always = () => true;
    const perRole = await Promise.all(PERMISSIONS.map(async (p) => ({ p, key: (await newApiKey(svc, b.apiKey, [p], `b-${p}`)).apiKey })));
    credentials = [
      { kind: "B's all-permission key", applies: always, headers: () => bearer(b.apiKey) },
      ...perRole.map(({ p, key }): Credential => ({ kind: `B's ${p} key`, applies: always, headers: () => bearer(key) })),
      {
        kind: "B's all-permission key naming A's organization",
        applies: always,
        headers: () => ({ ...bearer(b.apiKey), "x-service-organization-id": org.organizationId }),
      },
      { kind: "B's agent signature", applies: always, headers: signed(bAgent.certificateId, bAgent.key) },
      { kind: "B's adapter signature", applies: always, headers: signed(bAdapter.keyId, bAdapter.key) },
      { kind: "B's destination signature", applies: always, headers: signed(bDestination.keyId, bDestination.key) },
      {
        kind: "the operator key acting for B",
        applies: (m) => accessOf(m.parent.typeName, m.name)?.mode !== "platform",
        headers: () => ({ "x-service-operator-key": svc.operatorKey!, "x-service-organization-id": b.organizationId }),
      },
    ];
  }, 180_000);
  afterAll(async () => {
    await svc?.close();
  });

  /** Everything A can read about itself, as A reads it (/v1 with A's all-permission key). */
  async function stateOfA(): Promise<Record<string, unknown>> {
    const get = async (path: string) => {
      const res = await svc.v1("GET", path, { bearer: aKey });
      return { status: res.status, body: res.body };
    };
    const paths = [
      "/v1/organization",
      "/v1/organization/api-keys",
      "/v1/principals?page_size=100",
      "/v1/agents?page_size=100",
      `/v1/agents/${ids.agent_id}/audit-records`,
      "/v1/decisions?page_size=500",
      "/v1/policies",
      `/v1/policies/${ids.policy_key}`,
      "/v1/integrations",
      `/v1/integrations/${ids.integration_id}`,
      "/v1/authority-graph",
      "/v1/authority-graph/documents",
      "/v1/authority-graph/versions",
      `/v1/authority-graph/versions/${versions["AuthorityGraphService.GetGraphVersion"]}`,
      `/v1/capabilities/${ids.capability_id}`,
      `/v1/capabilities/${overrides["ExecutionReportService.SubmitExecutionReceipt"]!.capability_id}`,
    ];
    const state: Record<string, unknown> = {};
    for (const p of paths) state[p] = await get(p);
    for (const d of (state["/v1/decisions?page_size=500"] as { body: { decisions: { decision_id: string }[] } }).body.decisions) state[`/v1/decisions/${d.decision_id}`] = await get(`/v1/decisions/${d.decision_id}`);
    // The evidence chain: every record (its head is signed afresh on each read, so it is left out).
    const evidence = await get("/v1/evidence?page_size=1000");
    state["/v1/evidence"] = { status: evidence.status, records: (evidence.body as { records: unknown[] }).records };
    return state;
  }

  it("organization B reaches none of A's resources: every unary RPC × /v1, gRPC and Connect × every credential of B", async () => {
    const started = performance.now();
    const methods: { id: string; method: DescMethod; bound: boolean }[] = (await loadAllMandateServices()).flatMap(({ service }) =>
      service.methods.filter((m) => m.methodKind === "unary").map((method) => ({ id: `${service.name}.${method.name}`, method, bound: bindingOf(method) !== undefined })),
    );
    expect(methods.filter((m) => m.bound).length).toBeGreaterThan(60);
    const before = await stateOfA();

    const twinOf = new Map<string, string>();
    const twin = (v: string) => {
      if (v === ids.token) return v; // A token cannot be forged for a capability that does not exist: presenting A's must simply fail.
      if (!twinOf.has(v)) twinOf.set(v, unknownLike(v));
      return twinOf.get(v)!;
    };
    const aIds = (id: string): Record<string, string> => ({ ...ids, ...overrides[id] });
    const twinIds = (names: Record<string, string>) => Object.fromEntries(Object.entries(names).map(([k, v]) => [k, twin(v)]));

    /**
     * The request naming `names`' ids wherever the method takes one, otherwise well formed, and the
     * ids it sent; `pathOwn` puts B's own resource in the path variables instead.
     */
    const build = (id: string, method: DescMethod, names: Record<string, string>, pathOwn = false) => {
      const request: Record<string, unknown> = {};
      const sent: string[] = [];
      const binding = bindingOf(method);
      const pathVars = new Set([...(binding?.template.matchAll(/\{([a-z_]+)/g) ?? [])].map((m) => m[1]!));
      const set = (field: string, v: string) => {
        request[field] = v;
        sent.push(v);
      };
      for (const f of method.input.fields) {
        const v = pathOwn && pathVars.has(f.name) ? own[f.name] : names[f.name];
        if (v !== undefined && !NOT_A_REFERENCE.has(`${id}.${f.name}`) && f.fieldKind === "scalar" && f.scalar === ScalarType.STRING) {
          if (pathOwn && pathVars.has(f.name)) request[f.name] = v;
          else set(f.name, v);
        }
      }
      // A path variable that names nothing of A's still gets a well-formed value, so that /v1 routes it.
      for (const v of pathVars) if (request[v] === undefined && method.input.fields.some((f) => f.name === v && f.scalar === ScalarType.STRING)) request[v] = `${v.replace(/_id$/, "")}_probe${randomInt(1e6)}`;
      const has = (name: string) => method.input.fields.some((f) => f.name === name);
      const now = () => new Date().toISOString();
      const bytes = (doc: Record<string, unknown>) => new Uint8Array(Buffer.from(JSON.stringify(doc), "utf8"));
      if (has("version")) request.version = versions[id] ?? 1;
      if (has("policy_versions")) {
        request.policy_versions = { [names.policy_key!]: 1 };
        sent.push(names.policy_key!);
      }
      if (has("document_ids")) {
        request.document_ids = [names.document_id!];
        sent.push(names.document_id!);
      }
      // Signed documents name A's resources inside (B signs them: see the credentials).
      if (id === "IntentService.SubmitIntent") {
        request.intent = bytes(intentDoc(names.agent_id!));
        sent.push(names.agent_id!);
      }
      if (id === "AgentService.Heartbeat") {
        request.signed_body = bytes({ agent_id: names.agent_id, sent_at: now(), nonce: randomUUID() });
        sent.push(names.agent_id!);
      }
      if (has("signed_receipt")) {
        request.signed_receipt = bytes({ capability_id: names.capability_id, receipt_id: randomUUID(), status: "executed", executed_fields: {}, reported_at: now() });
        sent.push(names.capability_id!);
      }
      if (has("signed_report")) {
        request.signed_report = bytes({ decision_id: names.decision_id, report_id: randomUUID(), operation: {}, reported_at: now() });
        sent.push(names.decision_id!);
      }
      if (id === "PolicyService.EvaluatePolicy") {
        request.intent = intentDoc(names.agent_id!);
        sent.push(names.agent_id!);
      }
      // Otherwise well formed, so that it reaches the lookup (only where it names something of A's).
      if (sent.length) {
        const fill: Record<string, unknown> = {
          name: `probe-${randomUUID().slice(0, 8)}`,
          public_key: newAgentKey().publicKey,
          reason: "cross-tenant probe",
          note: "cross-tenant probe",
          resolution: "approved",
          audience: presentation.audience,
          issued_by: "probe",
          owner: "probe-owner",
          action: presentation.action,
          resource: presentation.resource,
          constraints: presentation.constraints,
          resource_path: "resource",
          context_bindings: { po: "context.po" },
        };
        for (const [k, v] of Object.entries(fill)) if (has(k) && request[k] === undefined) request[k] = v;
        if (has("source") && id !== "PolicyService.CreatePolicy") request.source = { rules: { actions: ["vendor_payment"], rules: [{ id: "b", when: { amount: { gt: 1 } }, outcome: "DENY", reason: "b" }] } };
      }
      return { request, sent, pathVars };
    };

    /** Calls `method` over `route` with exactly `headers` (no credential of the harness's own). */
    const send = async (route: Route, method: DescMethod, request: Record<string, unknown>, headers: Record<string, string>): Promise<Answer> => {
      if (route === "v1") {
        const r = await call(svc, "v1", method, request, { headers });
        return { status: r.status, detail: r.detail, body: r.body };
      }
      const client = (
        route === "connect" ? svc.connect(method.parent) : route === "grpc-gzip" ? svc.grpcViaConnectNode(method.parent) : svc.grpc(method.parent)
      ) as unknown as Record<string, (req: unknown, opts: unknown) => Promise<any>>;
      const json: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(request)) {
        const f = method.input.fields.find((x) => x.name === k);
        json[k] = f?.fieldKind === "scalar" && f.scalar === ScalarType.INT64 && typeof v === "number" ? BigInt(v) : v;
      }
      try {
        const res = await client[method.localName]!(messageFromWireJson(method.input, json), { headers });
        return { status: 200, body: toWire(method.output, res) };
      } catch (err) {
        const e = ConnectError.from(err);
        const [d] = e.findDetails(ErrorDetailSchema);
        return { status: HTTP_OF_CODE[e.code] ?? 1000 + e.code, detail: d?.detail ?? Code[e.code], body: d ? { detail: d.detail, message: d.message, errors: d.errors.map((x) => ({ field: x.field, code: x.code, message: x.message })) } : { message: e.rawMessage } };
      }
    };

    /**
     * `send`, asked again (at most twice) while the answer is 503 `unavailable`: a database wait
     * past its bound on a loaded machine says nothing about tenancy, and would hide the answer.
     */
    const ask = async (route: Route, method: DescMethod, request: Record<string, unknown>, headers: () => Record<string, string>): Promise<Answer> => {
      let answer = await send(route, method, request, headers());
      for (let i = 0; i < 2 && answer.status === 503 && answer.detail === "unavailable"; i++) answer = await send(route, method, request, headers());
      return answer;
    };

    // Every probe: method × credential × route, with A's ids, and (for a method acting on a
    // resource that takes A's ids elsewhere too) once more with B's own resource in the path.
    // Grouped by method, credential and variant: the twin is asked once, over /v1 (gRPC for a
    // method without a binding), and every route's answer must be its answer, since status and
    // code never differ between transports.
    interface Group {
      id: string;
      method: DescMethod;
      routes: Route[];
      cred: Credential;
      pathOwn: boolean;
    }
    const groups: Group[] = [];
    // At full scale every group goes over every route; at the short scale (`npm test`) over one,
    // in turn, so that every method meets every credential and every route.
    let turn = 0;
    const routesOf = (all: Route[]) => (FULL ? all : [all[turn++ % all.length]!]);
    for (const { id, method, bound } of methods) {
      const plain = build(id, method, aIds(id));
      const mixed = build(id, method, aIds(id), true);
      const withOwnPath = [...plain.pathVars].some((v) => own[v]) && [...plain.pathVars].every((v) => own[v] || !aIds(id)[v]) && mixed.sent.length > 0;
      const all = ROUTES.filter((r) => bound || r !== "v1");
      for (const cred of credentials.filter((c) => c.applies(method))) {
        groups.push({ id, method, routes: routesOf(all), cred, pathOwn: false });
        if (withOwnPath) groups.push({ id, method, routes: routesOf(all), cred, pathOwn: true });
      }
    }

    /** Status and code, and for field errors each field and code (the ids sent replaced by `<id>`). */
    const outcome = (r: Answer, sent: readonly string[] = []) => {
      if (r.status >= 200 && r.status < 300) return `${r.status}`;
      const errors = ((r.body as { errors?: { field: string; code: string }[] } | undefined)?.errors ?? []).map((e) => `${e.field}:${e.code}`).sort();
      const text = errors.length ? ` [${errors.join(", ")}]` : "";
      return `${r.status} ${r.detail}${sent.reduce((t, id) => t.split(id).join("<id>"), text)}`;
    };
    const failures: string[] = [];
    const statuses: Record<string, number> = {};
    const perRoute: Record<string, number> = {};
    const perCredential: Record<string, number> = {};
    let probes = 0;
    let twins = 0;
    await pool(groups, 16, async ({ id, method, routes, cred, pathOwn }) => {
      const names = aIds(id);
      // A request that names nothing of A's has nothing to compare: its answer is only searched for A's data.
      const twinReq = build(id, method, twinIds(names), pathOwn);
      const twinRes = twinReq.sent.length ? await ask(routes[0]!, method, twinReq.request, () => cred.headers(method, twinReq.request)) : undefined;
      if (twinRes) twins++;
      await Promise.all(
        routes.map(async (route) => {
          const real = build(id, method, names, pathOwn);
          const res = await ask(route, method, real.request, () => cred.headers(method, real.request));
          probes++;
          const answered = res.status < 300 ? `${res.status}` : `${res.status} ${res.detail}`;
          statuses[answered] = (statuses[answered] ?? 0) + 1;
          perRoute[route] = (perRoute[route] ?? 0) + 1;
          perCredential[cred.kind] = (perCredential[cred.kind] ?? 0) + 1;
          const text = JSON.stringify(res.body ?? "");
          const leaked = secrets.filter((s) => !real.sent.includes(s) && text.includes(s));
          const where = `${id} over ${ROUTE_NAMES[route]} with ${cred.kind}${pathOwn ? " (B's own resource in the path)" : ""}`;
          if (real.sent.includes(ids.token!) && res.status < 300) failures.push(`${where}: ${outcome(res)} for A's capability token: ${text.slice(0, 200)}`);
          else if (res.status === 500) failures.push(`${where}: ${outcome(res)}: ${text.slice(0, 200)}`);
          else if (twinRes && outcome(res, real.sent) !== outcome(twinRes, twinReq.sent))
            failures.push(`${where}: ${outcome(res, real.sent)} for A's ids, ${outcome(twinRes, twinReq.sent)} for ids that exist nowhere (over ${ROUTE_NAMES[routes[0]!]}): ${text.slice(0, 200)}`);
          else if (leaked.length) failures.push(`${where}: the answer carries A's ${leaked.map((s) => (s === CANARY ? "canary" : s)).join(", ")}: ${text.slice(0, 200)}`);
        }),
      );
    });

    // Nothing B sent changed anything of A's.
    const after = await stateOfA();
    const changed = Object.keys({ ...before, ...after }).filter((k) => JSON.stringify(before[k]) !== JSON.stringify(after[k]));
    for (const k of changed) failures.push(`A's ${k} changed: ${JSON.stringify(before[k]).slice(0, 300)} → ${JSON.stringify(after[k]).slice(0, 300)}`);
    const seconds = ((performance.now() - started) / 1000).toFixed(1);

    const refusals = Object.entries(statuses).sort((x, y) => y[1] - x[1]).slice(0, 5).map(([k, n]) => `${n}× ${k}`).join(", ");
    const routes = ROUTES.map((r) => `${ROUTE_NAMES[r]} ${perRoute[r] ?? 0}`).join(", ");
    console.log(`[cross-tenant] ${probes} probes (and ${twins} twins) in ${seconds} s; per transport: ${routes}`);
    console.log(`[cross-tenant] per credential: ${Object.entries(perCredential).map(([k, n]) => `${k} ${n}`).join("; ")}`);
    console.log(`[cross-tenant] answers: ${Object.entries(statuses).sort((x, y) => y[1] - x[1]).map(([k, n]) => `${n}× ${k}`).join(", ")}`);
    recordRow({
      order: 1,
      attack: `cross-tenant access: ${methods.length} RPCs × ${credentials.length} credentials of another org × ${FULL ? "" : "one of "}${ROUTES.map((r) => ROUTE_NAMES[r]).join(", ")}`,
      probes,
      failures: failures.length,
      note: `${routes}; A's state (${Object.keys(before).length} reads) unchanged: ${changed.length === 0 ? "yes" : "NO"}; ${refusals}`,
    });
    expect(failures).toEqual([]);
  }, 300_000);
});
