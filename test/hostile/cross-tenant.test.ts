import { randomInt, randomUUID } from "node:crypto";
import type { DescMethod } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bindingOf, loadAllMandateServices } from "../support/api.js";
import { call, intentDoc, newAgent, newAgentKey, newApiKey, newOrgFixture, TRANSPORTS, type Auth, type OrgFixture, type Result, type TestAgent, type Transport } from "../support/agents.js";
import { startService, type TestService } from "../support/service.js";
import { allowedCapability, type Instance } from "../e2e/capabilities-support.js";
import { recordRow } from "./report.js";

/*
 * Hostile row 1, cross-tenant access. Organization A holds one of everything
 * (agent, decision, capability, policy, principal, integration, adapter,
 * evidence record, API key); organization B, with its all-permission key and
 * with its own agent's signature, calls every public RPC that has a /v1
 * binding (enumerated from the descriptors, so a new RPC is probed without
 * touching this file) over /v1 and over gRPC, naming A's resources in every
 * path variable and request field that takes one.
 *
 * Each probe has a twin naming well-formed ids that exist nowhere. A probe
 * fails when:
 *   - its answer (status and error code) differs from its twin's: B can tell
 *     that A's resource exists, or reached it (a 200 where the twin has 404);
 *   - its answer carries an id of A's that the request did not send, or A's
 *     organization id or name (a leak through a list, a lookup or an error).
 * The same probes run at both scales (they are cheap).
 */

interface Fixture {
  org: OrgFixture;
  orgName: string;
  agent: TestAgent;
  decisionId: string;
  capabilityId: string;
  token: string;
  policyKey: string;
  integrationId: string;
  adapterId: string;
  evidenceId: string;
  apiKeyId: string;
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

/** Fields whose value is B's own name for something, not a reference to A's resource. */
const NOT_A_REFERENCE = new Set(["PolicyService.CreatePolicy.policy_key"]);

describe("hostile: cross-tenant access", () => {
  let svc: TestService;
  let a: Fixture;
  let b: OrgFixture;
  let bAgent: TestAgent;

  beforeAll(async () => {
    svc = await startService();
    const orgName = `Tenant A ${randomUUID().slice(0, 8)}`;
    const orgA = await svc.newOrg(orgName);
    const p = await svc.v1("POST", "/v1/principals", { bearer: orgA.apiKey, body: { display_name: "Alex A", kind: "person", external_ref: `alex-${randomUUID().slice(0, 8)}` } });
    expect(p.status, JSON.stringify(p.body)).toBe(200);
    const org: OrgFixture = { ...orgA, principalId: p.body.principal_id };
    const agent = await newAgent(svc, org);
    const cap = await allowedCapability(svc as Instance, agent);
    const policyKey = `secret-${randomUUID().slice(0, 8)}`;
    const pol = await svc.v1("POST", "/v1/policies", {
      bearer: org.apiKey,
      body: { policy_key: policyKey, description: "A's own.", source: { rules: { actions: ["vendor_payment"], rules: [{ id: "cap", when: { amount: { gt: 10 } }, outcome: "DENY", reason: "over" }] } } },
    });
    expect(pol.status, JSON.stringify(pol.body)).toBe(200);
    const integ = await svc.v1("POST", "/v1/integrations", { bearer: org.apiKey, body: { name: `erp-${randomUUID().slice(0, 6)}`, actions: ["vendor_payment"] } });
    expect(integ.status, JSON.stringify(integ.body)).toBe(200);
    const ad = await svc.v1("POST", `/v1/integrations/${integ.body.integration_id}/adapters`, { bearer: org.apiKey, body: { name: "adapter", public_key: newAgentKey().publicKey } });
    expect(ad.status, JSON.stringify(ad.body)).toBe(200);
    const ev = await svc.v1("GET", "/v1/evidence?page_size=5", { bearer: org.apiKey });
    expect(ev.status, JSON.stringify(ev.body)).toBe(200);
    const key = await newApiKey(svc, org.apiKey, ["DECISION_READ"]);
    a = {
      org,
      orgName,
      agent,
      decisionId: cap.decisionId,
      capabilityId: cap.capabilityId,
      token: cap.presentation.token,
      policyKey,
      integrationId: integ.body.integration_id,
      adapterId: ad.body.adapter_id,
      evidenceId: ev.body.records[0].evidence_id,
      apiKeyId: key.keyId,
    };
    b = await newOrgFixture(svc);
    bAgent = await newAgent(svc, b);
  }, 120_000);
  afterAll(async () => {
    await svc?.close();
  });

  it("organization B reaches none of A's resources: every /v1-bound RPC × /v1 and gRPC × B's key and B's agent signature", async () => {
    const methods: { id: string; method: DescMethod }[] = (await loadAllMandateServices())
      .filter((s) => !s.internal)
      .flatMap(({ service }) => service.methods.filter((m) => m.methodKind === "unary" && bindingOf(m)).map((method) => ({ id: `${service.name}.${method.name}`, method })));
    expect(methods.length).toBeGreaterThan(40);

    // A's ids by the field names that take them, and a well-formed twin of each that names nothing.
    const ids: Record<string, string> = {
      agent_id: a.agent.agentId,
      decision_id: a.decisionId,
      capability_id: a.capabilityId,
      policy_key: a.policyKey,
      principal_id: a.org.principalId,
      acting_for_principal_id: a.org.principalId,
      integration_id: a.integrationId,
      adapter_id: a.adapterId,
      evidence_id: a.evidenceId,
      key_id: a.apiKeyId,
      organization_id: a.org.organizationId,
      token: a.token,
    };
    const twins: Record<string, string> = Object.fromEntries(Object.entries(ids).map(([k, v]) => [k, unknownLike(v)]));
    twins.acting_for_principal_id = twins.principal_id!;
    // A token cannot be forged for a capability that does not exist: its twin is itself, and
    // presenting A's token must simply not succeed (and, checked below, leave A's capability unused).
    twins.token = ids.token!;
    const secrets = [...new Set([...Object.values(ids), a.org.apiKey, a.org.organizationId, a.orgName, a.agent.certificateId])];

    /** The request naming `names`' ids wherever the method takes one, and the A ids it sent. */
    const build = (id: string, method: DescMethod, names: Record<string, string>): { request: Record<string, unknown>; sent: string[] } => {
      const request: Record<string, unknown> = {};
      const sent: string[] = [];
      for (const f of method.input.fields) {
        const v = names[f.name];
        if (v !== undefined && !NOT_A_REFERENCE.has(`${id}.${f.name}`) && f.fieldKind === "scalar") {
          request[f.name] = v;
          sent.push(v);
        }
        if (f.name === "version") request.version = 1;
        if (f.name === "policy_versions") {
          request.policy_versions = { [names.policy_key!]: 1 };
          sent.push(names.policy_key!);
        }
        if (f.name === "document_ids") request.document_ids = [];
      }
      const signed = (doc: Record<string, unknown>) => new Uint8Array(Buffer.from(JSON.stringify(doc), "utf8"));
      if (id === "IntentService.SubmitIntent") request.intent = signed(intentDoc(names.agent_id!));
      if (id === "AgentService.Heartbeat") request.signed_body = signed({ agent_id: names.agent_id, sent_at: new Date().toISOString(), nonce: randomUUID() });
      if (id === "PolicyService.EvaluatePolicy") request.intent = intentDoc(names.agent_id!);
      for (const field of ["signed_receipt", "signed_report"])
        if (method.input.fields.some((f) => f.name === field))
          request[field] = signed({ decision_id: names.decision_id, capability_id: names.capability_id, adapter_id: names.adapter_id, reported_at: new Date().toISOString(), nonce: randomUUID() });
      return { request, sent };
    };

    /** B's credentials: its all-permission key, and its agent's signature over what it sends. */
    const credentials = (request: Record<string, unknown>, method: DescMethod): { name: string; auth: Auth }[] => {
      const bytes = Object.values(request).find((v): v is Uint8Array => v instanceof Uint8Array);
      const timestamp = new Date().toISOString();
      const binding = bindingOf(method)!;
      const line = `${binding.verb} ${binding.template.replace(/\{([a-z_]+)(?:=\*)?\}/g, (_, n: string) => String(request[n] ?? ""))}\n${timestamp}`;
      return [
        { name: "B's all-permission key", auth: { bearer: b.apiKey } },
        { name: "B's agent signature", auth: { keyId: bAgent.certificateId, signature: bAgent.key.sign(bytes ?? line), ...(bytes ? {} : { timestamp }) } },
      ];
    };

    const outcome = (r: Result) => (r.status >= 200 && r.status < 300 ? `${r.status}` : `${r.status} ${r.detail}`);
    let probes = 0;
    const failures: string[] = [];
    const statuses: Record<string, number> = {};
    for (const { id, method } of methods) {
      for (const transport of TRANSPORTS as readonly Transport[]) {
        const real = build(id, method, ids);
        const twin = build(id, method, twins);
        for (const [k, cred] of credentials(real.request, method).entries()) {
          const res = await call(svc, transport, method, real.request, cred.auth);
          const twinRes = await call(svc, transport, method, twin.request, credentials(twin.request, method)[k]!.auth);
          probes++;
          statuses[outcome(res)] = (statuses[outcome(res)] ?? 0) + 1;
          const text = JSON.stringify(res.body ?? "");
          const leaked = secrets.filter((s) => !real.sent.includes(s) && text.includes(s));
          const where = `${id} over ${transport} with ${cred.name}`;
          if (real.sent.includes(a.token) && res.status < 300) failures.push(`${where}: ${outcome(res)} for A's capability token: ${text.slice(0, 200)}`);
          else if (real.sent.length && outcome(res) !== outcome(twinRes)) failures.push(`${where}: ${outcome(res)} for A's ids, ${outcome(twinRes)} for ids that exist nowhere: ${text.slice(0, 200)}`);
          else if (leaked.length) failures.push(`${where}: the answer carries A's ${leaked.join(", ")}: ${text.slice(0, 200)}`);
        }
      }
    }
    // Nothing B sent changed A's resources.
    const states: [string, string, string][] = [
      [`/v1/capabilities/${a.capabilityId}`, "state", "issued"],
      [`/v1/agents/${a.agent.agentId}`, "state", "active"],
      [`/v1/integrations/${a.integrationId}`, "state", "active"],
      [`/v1/policies/${a.policyKey}`, "policy_key", a.policyKey],
    ];
    for (const [path, field, want] of states) {
      probes++;
      const res = await svc.v1("GET", path, { bearer: a.org.apiKey });
      if (res.status !== 200 || res.body[field] !== want) failures.push(`A's ${path} changed: ${res.status} ${JSON.stringify(res.body).slice(0, 200)}`);
    }
    const keys = await svc.v1("GET", "/v1/organization/api-keys", { bearer: a.org.apiKey });
    probes++;
    const key = keys.body.api_keys?.find((k: any) => k.key_id === a.apiKeyId);
    if (!key || key.revoked_at) failures.push(`A's API key ${a.apiKeyId} was revoked or is gone: ${JSON.stringify(key)}`);
    const refusals = Object.entries(statuses).sort((x, y) => y[1] - x[1]).slice(0, 4).map(([k, n]) => `${n}× ${k}`).join(", ");
    recordRow({
      order: 1,
      attack: `cross-tenant access: ${methods.length} RPCs × /v1, gRPC × 2 credentials of another org`,
      probes,
      failures: failures.length,
      note: refusals,
    });
    expect(failures).toEqual([]);
  }, 300_000);
});
