import { randomUUID } from "node:crypto";
import { Code } from "@connectrpc/connect";
import { decodeJwt } from "jose";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CapabilityService } from "../../src/gen/mandate/v1/capabilities_pb.js";
import {
  call,
  expectResult,
  newAgent,
  newAgentKey,
  newApiKey,
  exportEvidence,
  newOrgFixture,
  publishPaymentsPolicy,
  paymentDoc,
  signBody,
  submitIntent,
  TRANSPORTS,
  type OrgFixture,
  type TestAgent,
} from "../support/agents.js";
import { startService, type TestService } from "../support/service.js";
import { waitFor } from "../support/wait.js";
import {
  allowedCapability,
  capabilityState,
  decide,
  expectConsumed,
  issue,
  issueOk,
  startOwnedRedis,
  verify,
  type OwnedRedis,
} from "./capabilities-support.js";

/*
 * Capability Authorizations (issue 6, docs/architecture.md, Consume paths): issue once per decision,
 * verify and consume exactly once with a live recheck. The same suite runs on
 * both consume paths, a service with REDIS_URL (Lua script, then the Postgres
 * arbiter) and one without (the Postgres statement alone), and every verify
 * case runs over /v1 and gRPC. test/cases/capabilities.yaml holds the same
 * request/answer contract over /v1, gRPC and Connect on the shared service
 * (Redis path only); the cases here stay because they run on both paths.
 */

const PATHS = [
  { name: "Redis + Postgres", redis: true },
  { name: "Postgres only", redis: false },
] as const;

describe.each(PATHS)("capabilities on the $name path", ({ redis: withRedis }) => {
  let svc: TestService;
  let redis: OwnedRedis | undefined;
  let org: OrgFixture;
  let agent: TestAgent;

  beforeAll(async () => {
    // A redis-server of this file's own, so nothing here can disturb (or be disturbed by) other suites.
    redis = withRedis ? await startOwnedRedis() : undefined;
    svc = await startService({ REDIS_URL: redis?.url });
    org = await newOrgFixture(svc);
    agent = await newAgent(svc, org);
  });
  afterAll(async () => {
    await svc?.close();
    await redis?.stop("SIGTERM");
  });

  describe.each(TRANSPORTS)("verify over %s", (transport) => {
    it("consumes once: 200 with the bound resource and constraints, then 409 capability_consumed; GET says consumed", async () => {
      const c = await allowedCapability(svc, agent);
      expect(c.presentation.constraints).toEqual({ amount: "125.5", currency: "EUR", counterparty: "ACME Corp" });
      expect(await capabilityState(svc, org.apiKey, c.capabilityId)).toBe("issued");
      expectConsumed(await verify(svc, transport, org.apiKey, c.presentation), c);
      expectResult(await verify(svc, transport, org.apiKey, c.presentation), 409, "capability_consumed");
      const got = await svc.v1("GET", `/v1/capabilities/${c.capabilityId}`, { bearer: org.apiKey });
      expect(got.body).toMatchObject({ capability_id: c.capabilityId, decision_id: c.decisionId, agent_id: agent.agentId, state: "consumed" });
      expect(Date.parse(got.body.consumed_at)).toBeGreaterThan(0);
      expect(JSON.stringify(got.body)).not.toContain(c.presentation.token);
      if (redis) {
        // The Redis path really ran: the consumed marker sits under the org's hash tag.
        expect(await redis.command("GET", `mandate:{${org.organizationId}}:cap:${c.capabilityId}`)).toBe("consumed");
      }
    });

    it("without amount/currency/counterparty the constraints are empty and the resource is ''", async () => {
      const c = await allowedCapability(svc, agent, {});
      expect(c.presentation).toMatchObject({ resource: "", constraints: {} });
      expectConsumed(await verify(svc, transport, org.apiKey, c.presentation), c);
    });

    it("a member sent as null is absent: it binds no constraint (never the text \"null\")", async () => {
      const d = await decide(svc, agent, { amount: 10, currency: null, counterparty: null });
      const cap = await issueOk(svc, org.apiKey, d.decision_id);
      expect((await svc.v1("GET", `/v1/capabilities/${cap.capability_id}`, { bearer: org.apiKey })).body.constraints).toEqual({ amount: "10" });
      const presentation = { token: cap.token, audience: "erp-gateway", action: "reference_noop", resource: "", constraints: { amount: "10" } };
      expectConsumed(await verify(svc, transport, org.apiKey, presentation), { decisionId: d.decision_id, capabilityId: cap.capability_id, presentation });
    });

    it("a mismatched constraint → 409 capability_constraint_mismatch, token untouched; the right values then consume it", async () => {
      const c = await allowedCapability(svc, agent);
      const p = c.presentation;
      const wrong: Record<string, string>[] = [
        { ...p.constraints, amount: "125.51" },
        { ...p.constraints, currency: "USD" },
        { amount: p.constraints.amount!, currency: p.constraints.currency! }, // one missing
        { ...p.constraints, extra: "x" }, // one too many
        {},
      ];
      for (const constraints of wrong) {
        const res = await verify(svc, transport, org.apiKey, { ...p, constraints });
        expectResult(res, 409, "capability_constraint_mismatch");
      }
      expect(await capabilityState(svc, org.apiKey, c.capabilityId)).toBe("issued");
      expectConsumed(await verify(svc, transport, org.apiKey, p), c);
    });

    it("audience, action and resource mismatches have their own codes and leave the token unconsumed", async () => {
      const c = await allowedCapability(svc, agent);
      const p = c.presentation;
      expectResult(await verify(svc, transport, org.apiKey, { ...p, audience: "other-gateway" }), 409, "capability_audience_mismatch");
      expectResult(await verify(svc, transport, org.apiKey, { ...p, action: "vendor_payment" }), 409, "capability_action_mismatch");
      expectResult(await verify(svc, transport, org.apiKey, { ...p, resource: "invoice:INV-2" }), 409, "capability_resource_mismatch");
      expectResult(await verify(svc, transport, org.apiKey, { ...p, resource: "" }), 409, "capability_resource_mismatch");
      expect(await capabilityState(svc, org.apiKey, c.capabilityId)).toBe("issued");
      expectConsumed(await verify(svc, transport, org.apiKey, p), c);
    });

    it("garbage and tampered tokens → 422 capability_token_invalid", async () => {
      const c = await allowedCapability(svc, agent);
      const [h, payload, sig] = c.presentation.token.split(".") as [string, string, string];
      const claims = JSON.parse(Buffer.from(payload, "base64url").toString("utf8"));
      const forged = `${h}.${Buffer.from(JSON.stringify({ ...claims, exp: claims.exp + 3600 })).toString("base64url")}.${sig}`;
      for (const token of ["", "garbage", "a.b.c", forged, `${h}.${payload}.${Buffer.alloc(64).toString("base64url")}`]) {
        expectResult(await verify(svc, transport, org.apiKey, { ...c.presentation, token }), 422, "capability_token_invalid");
      }
      expectConsumed(await verify(svc, transport, org.apiKey, c.presentation), c);
    });

    it("a capability issued before token digests were kept is verified by its signature: consumes once, refuses a tampered copy", async () => {
      const c = await allowedCapability(svc, agent);
      const db = new pg.Client({ connectionString: svc.env.DATABASE_URL });
      await db.connect();
      try {
        expect((await db.query("UPDATE capabilities SET token_digest = NULL WHERE capability_id = $1", [c.capabilityId])).rowCount).toBe(1);
      } finally {
        await db.end();
      }
      const [h, payload] = c.presentation.token.split(".") as [string, string, string];
      const unsigned = `${h}.${payload}.${Buffer.alloc(64).toString("base64url")}`;
      expectResult(await verify(svc, transport, org.apiKey, { ...c.presentation, token: unsigned }), 422, "capability_token_invalid");
      expectConsumed(await verify(svc, transport, org.apiKey, c.presentation), c);
      expectResult(await verify(svc, transport, org.apiKey, c.presentation), 409, "capability_consumed");
    });

    it("another organization's key → 404 and the token stays usable by its own org", async () => {
      const other = await newOrgFixture(svc);
      const c = await allowedCapability(svc, agent);
      expectResult(await verify(svc, transport, other.apiKey, c.presentation), 404, "not_found");
      expect((await svc.v1("GET", `/v1/capabilities/${c.capabilityId}`, { bearer: other.apiKey })).status).toBe(404);
      expectConsumed(await verify(svc, transport, org.apiKey, c.presentation), c);
    });

    it("a key without CAPABILITY_VERIFY → 403 permission_denied; a CAPABILITY_VERIFY-only key consumes", async () => {
      const c = await allowedCapability(svc, agent);
      const reader = await newApiKey(svc, org.apiKey, ["DECISION_READ"]);
      const verifier = await newApiKey(svc, org.apiKey, ["CAPABILITY_VERIFY"]);
      expectResult(await verify(svc, transport, reader.apiKey, c.presentation), 403, "permission_denied");
      expectConsumed(await verify(svc, transport, verifier.apiKey, c.presentation), c);
    });

    it("revoking the agent → 403 capability_dependency_inactive and the capability stays issued", async () => {
      const a = await newAgent(svc, org);
      const c = await allowedCapability(svc, a);
      expect((await svc.v1("POST", `/v1/agents/${a.agentId}/revoke`, { bearer: org.apiKey, body: {} })).status).toBe(200);
      expectResult(await verify(svc, transport, org.apiKey, c.presentation), 403, "capability_dependency_inactive");
      expectResult(await verify(svc, transport, org.apiKey, c.presentation), 403, "capability_dependency_inactive");
      expect(await capabilityState(svc, org.apiKey, c.capabilityId)).toBe("issued");
      // A mismatch is still reported as such: the presented values are checked before the live recheck.
      expectResult(await verify(svc, transport, org.apiKey, { ...c.presentation, audience: "x" }), 409, "capability_audience_mismatch");
    });

    it("suspending the organization (operator) → 403 for its tokens (its keys are refused; the operator's verify fails closed); reactivating it → the same token consumes", async () => {
      const o = await newOrgFixture(svc);
      const c = await allowedCapability(svc, await newAgent(svc, o));
      const operator = { "x-service-operator-key": svc.operatorKey! };
      // Only the platform operator decides this, never the organization's own keys.
      expect((await svc.v1("POST", `/v1/organizations/${o.organizationId}/suspend`, { bearer: o.apiKey, body: {} })).status).toBe(401);
      const suspended = await svc.v1("POST", `/v1/organizations/${o.organizationId}/suspend`, { headers: operator, body: {} });
      expect(suspended).toMatchObject({ status: 200, body: { organization_id: o.organizationId, state: "suspended" } });
      expect((await svc.v1("POST", `/v1/organizations/${o.organizationId}/suspend`, { headers: operator, body: {} })).body.detail).toBe("invalid_transition");
      expectResult(await verify(svc, transport, o.apiKey, c.presentation), 403, "organization_suspended");
      // The operator key still acts for it, and the consume still fails closed; the token stays unconsumed.
      const asOperator = { operator: svc.operatorKey!, organizationId: o.organizationId };
      expectResult(await call(svc, transport, CapabilityService.method.verifyCapability, { ...c.presentation }, asOperator), 403, "capability_dependency_inactive");
      const state = await svc.v1("GET", `/v1/capabilities/${c.capabilityId}`, { headers: { ...operator, "x-service-organization-id": o.organizationId } });
      expect(state).toMatchObject({ status: 200, body: { state: "issued" } });
      const reactivated = await svc.v1("POST", `/v1/organizations/${o.organizationId}/reactivate`, { headers: operator, body: {} });
      expect(reactivated).toMatchObject({ status: 200, body: { state: "active" } });
      expectConsumed(await verify(svc, transport, o.apiKey, c.presentation), c);
      const kinds = (await exportEvidence(svc, o.apiKey)).records.map((r) => r.kind);
      expect(kinds).toEqual(expect.arrayContaining(["organization.suspended", "organization.reactivated"]));
      expect((await svc.v1("POST", "/v1/organizations/org_nope/suspend", { headers: operator, body: {} })).status).toBe(404);
    });

    it("suspending the agent → 403; reactivating it → the same token consumes", async () => {
      const a = await newAgent(svc, org);
      const c = await allowedCapability(svc, a);
      expect((await svc.v1("POST", `/v1/agents/${a.agentId}/suspend`, { bearer: org.apiKey, body: {} })).status).toBe(200);
      expectResult(await verify(svc, transport, org.apiKey, c.presentation), 403, "capability_dependency_inactive");
      expect(await capabilityState(svc, org.apiKey, c.capabilityId)).toBe("issued");
      expect((await svc.v1("POST", `/v1/agents/${a.agentId}/reactivate`, { bearer: org.apiKey, body: {} })).status).toBe(200);
      expectConsumed(await verify(svc, transport, org.apiKey, c.presentation), c);
    });
  });

  it("a capability with ttl_seconds 1 → 410 capability_expired once it lapsed (over both transports); GET says expired", async () => {
    const [c1, c2] = await Promise.all([allowedCapability(svc, agent, {}, { ttl_seconds: 1 }), allowedCapability(svc, agent, {}, { ttl_seconds: 1 })]);
    const got = await svc.v1("GET", `/v1/capabilities/${c1.capabilityId}`, { bearer: org.apiKey });
    expect(Date.parse(got.body.expires_at) - Date.parse(got.body.issued_at)).toBe(1000);
    // No sleep: wait until the service itself reports both lapsed (its clock is the one verify reads).
    for (const c of [c1, c2]) await waitFor(`${c.capabilityId} to expire`, async () => (await capabilityState(svc, org.apiKey, c.capabilityId)) === "expired");
    expectResult(await verify(svc, "v1", org.apiKey, c1.presentation), 410, "capability_expired");
    // gRPC has no 410: the error model (docs/architecture.md) pairs capability_expired with FAILED_PRECONDITION (which the harness reads as 409).
    const grpc = await verify(svc, "grpc", org.apiKey, c2.presentation);
    expect(grpc.grpcCode, JSON.stringify(grpc.body)).toBe(Code.FailedPrecondition);
    expect(grpc.detail).toBe("capability_expired");
    expect(await capabilityState(svc, org.apiKey, c1.capabilityId)).toBe("expired");
    // An expired capability is never replaced: its decision gets no other.
    expectResult(await call(svc, "v1", CapabilityService.method.issueCapability, { decision_id: c1.decisionId, audience: "a", issued_by: "b" }, { bearer: org.apiKey }), 409, "capability_already_issued");
  });

  it("issues with the requested ttl (default 300 s) and refuses ttl_seconds outside 1..3600 and an empty audience (422)", async () => {
    const d1 = await decide(svc, agent);
    const before = Date.now();
    const cap = await issueOk(svc, org.apiKey, d1.decision_id);
    const after = Date.now();
    expect(cap.token.split(".")).toHaveLength(3);
    // Issue time plus ttl_seconds, never a moment less (one test process and service share the clock).
    expect(Date.parse(cap.expires_at)).toBeGreaterThanOrEqual(before + 300_000);
    expect(Date.parse(cap.expires_at)).toBeLessThanOrEqual(after + 300_000);
    // The token's exp is that instant in whole seconds, rounded down: it never outlasts the capability.
    expect(decodeJwt(cap.token).exp).toBe(Math.floor(Date.parse(cap.expires_at) / 1000));
    const d2 = await decide(svc, agent);
    for (const body of [{ ttl_seconds: 0 }, { ttl_seconds: 3601 }, { ttl_seconds: -5 }, { audience: "" }, { issued_by: "" }]) {
      const res = await issue(svc, org.apiKey, d2.decision_id, body);
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect(res.body.detail).toBe("validation_failed");
    }
    const cap2 = await issueOk(svc, org.apiKey, d2.decision_id, { ttl_seconds: 3600 });
    expect(Date.parse(cap2.expires_at) - Date.now()).toBeGreaterThan(3590_000);
  });

  it("the token is a compact EdDSA JWS whose kid is in the JWKS, with jti = capability_id and the audience", async () => {
    const c = await allowedCapability(svc, agent);
    const [h, payload] = c.presentation.token.split(".") as [string, string];
    const header = JSON.parse(Buffer.from(h, "base64url").toString("utf8"));
    const claims = JSON.parse(Buffer.from(payload, "base64url").toString("utf8"));
    expect(header.alg).toBe("EdDSA");
    const jwks = await svc.v1("GET", "/.well-known/jwks.json");
    expect(jwks.body.keys.map((k: { kid: string }) => k.kid)).toContain(header.kid);
    expect(claims).toMatchObject({ jti: c.capabilityId, aud: "erp-gateway" });
    expect(typeof claims.exp).toBe("number");
  });

  it("a second issue for a decision → 409 capability_already_issued, also for 10 concurrent issues (exactly one 200), over both transports", async () => {
    const d = await decide(svc, agent);
    await issueOk(svc, org.apiKey, d.decision_id);
    for (const transport of TRANSPORTS) {
      const again = await call(svc, transport, CapabilityService.method.issueCapability, { decision_id: d.decision_id, audience: "erp-gateway", issued_by: "x" }, { bearer: org.apiKey });
      expectResult(again, 409, "capability_already_issued");
    }
    const d2 = await decide(svc, agent);
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        call(svc, TRANSPORTS[i % 2]!, CapabilityService.method.issueCapability, { decision_id: d2.decision_id, audience: `aud-${i}`, issued_by: "x" }, { bearer: org.apiKey }),
      ),
    );
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    for (const r of results.filter((x) => x.status !== 200)) expectResult(r, 409, "capability_already_issued");
  });

  it("a consumed capability's decision gets no other", async () => {
    const c = await allowedCapability(svc, agent);
    expectConsumed(await verify(svc, "v1", org.apiKey, c.presentation), c);
    const res = await issue(svc, org.apiKey, c.decisionId);
    expect(res.status).toBe(409);
    expect(res.body.detail).toBe("capability_already_issued");
  });

  describe("DENY and HUMAN_REVIEW decisions", () => {
    let payOrg: OrgFixture;
    let payAgent: TestAgent;
    let reviewer: { apiKey: string };
    beforeAll(async () => {
      payOrg = await newOrgFixture(svc);
      await publishPaymentsPolicy(svc, payOrg);
      payAgent = await newAgent(svc, payOrg);
      reviewer = await newApiKey(svc, payOrg.apiKey, ["REVIEWER", "DECISION_READ"], "reviewer");
    });

    const submitPayment = async (amount: number) => {
      const res = await submitIntent(svc, "v1", signBody(payAgent, paymentDoc(payAgent.agentId, amount, { resource: `invoice:${amount}` })));
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return res.body as { decision_id: string; outcome: string; reason: string };
    };

    it("a DENY or unresolved HUMAN_REVIEW decision → 409 decision_not_allowed; from-review on them or on an ALLOW → 409 review_not_approved", async () => {
      const deny = await submitPayment(60_000);
      expect(deny.outcome).toBe("DENY");
      const review = await submitPayment(2_000);
      expect(review.outcome).toBe("HUMAN_REVIEW");
      const allow = await submitPayment(500);
      expect(allow.outcome).toBe("ALLOW");
      for (const transport of TRANSPORTS) {
        const req = (id: string) => ({ decision_id: id, audience: "bank", issued_by: "ops" });
        const auth = { bearer: payOrg.apiKey };
        expectResult(await call(svc, transport, CapabilityService.method.issueCapability, req(deny.decision_id), auth), 409, "decision_not_allowed");
        expectResult(await call(svc, transport, CapabilityService.method.issueCapability, req(review.decision_id), auth), 409, "decision_not_allowed");
        expectResult(await call(svc, transport, CapabilityService.method.issueCapabilityFromReview, req(deny.decision_id), auth), 409, "review_not_approved");
        expectResult(await call(svc, transport, CapabilityService.method.issueCapabilityFromReview, req(review.decision_id), auth), 409, "review_not_approved");
        expectResult(await call(svc, transport, CapabilityService.method.issueCapabilityFromReview, req(allow.decision_id), auth), 409, "review_not_approved");
      }
      // Unknown and other-org decisions do not exist for the caller.
      expect((await issue(svc, payOrg.apiKey, `dec_${randomUUID().replace(/-/g, "")}`)).status).toBe(404);
      expect((await issue(svc, org.apiKey, allow.decision_id)).status).toBe(404);
    });

    it("from-review after approval issues a capability bound to the payment; the decision still reads HUMAN_REVIEW; a rejected review gets none", async () => {
      const review = await submitPayment(2_500);
      expect(review.outcome).toBe("HUMAN_REVIEW");
      const resolved = await svc.v1("POST", `/v1/decisions/${review.decision_id}/review`, { bearer: reviewer.apiKey, body: { resolution: "approved", reason: "invoice matches PO" } });
      expect(resolved.status, JSON.stringify(resolved.body)).toBe(200);
      // The direct endpoint still refuses: the outcome was never rewritten to ALLOW.
      expect((await issue(svc, payOrg.apiKey, review.decision_id)).body.detail).toBe("decision_not_allowed");
      const cap = await issueOk(svc, payOrg.apiKey, review.decision_id, { audience: "bank" }, true);
      const presentation = { token: cap.token, audience: "bank", action: "vendor_payment", resource: "invoice:2500", constraints: { amount: "2500", currency: "USD", counterparty: "ACME Corp" } };
      expectResult(await verify(svc, "grpc", payOrg.apiKey, { ...presentation, constraints: { ...presentation.constraints, amount: "25000" } }), 409, "capability_constraint_mismatch");
      expectConsumed(await verify(svc, "v1", payOrg.apiKey, presentation), { decisionId: review.decision_id, capabilityId: cap.capability_id, presentation });
      const decision = await svc.v1("GET", `/v1/decisions/${review.decision_id}`, { bearer: payOrg.apiKey });
      expect(decision.body).toMatchObject({ outcome: "HUMAN_REVIEW", status: "RESOLVED", resolution: { resolution: "approved" } });
      expect((await issue(svc, payOrg.apiKey, review.decision_id, {}, true)).body.detail).toBe("capability_already_issued");

      const rejected = await submitPayment(3_000);
      const r = await svc.v1("POST", `/v1/decisions/${rejected.decision_id}/review`, { bearer: reviewer.apiKey, body: { resolution: "rejected", reason: "no PO" } });
      expect(r.status).toBe(200);
      expect((await issue(svc, payOrg.apiKey, rejected.decision_id, {}, true)).body.detail).toBe("review_not_approved");
    });
  });

  describe("bound to an integration contract", () => {
    let iOrg: OrgFixture;
    let iAgent: TestAgent;
    let integrationId: string;
    let adapterId: string;

    const post = async (path: string, body: unknown = {}, bearer = iOrg.apiKey) => {
      const res = await svc.v1("POST", path, { bearer, body });
      expect(res.status, `${path}: ${JSON.stringify(res.body)}`).toBe(200);
      return res.body;
    };

    beforeAll(async () => {
      iOrg = await newOrgFixture(svc);
      iAgent = await newAgent(svc, iOrg);
      const approver = await newApiKey(svc, iOrg.apiKey, ["POLICY_APPROVER"], "approver");
      integrationId = (await post("/v1/integrations", { name: "ERP", actions: ["reference_noop"] })).integration_id;
      await post(`/v1/integrations/${integrationId}/contract-versions`, { resource_path: "resource", context_bindings: { po: "context.po", vendor: "context.vendor" } });
      await post(`/v1/integrations/${integrationId}/contract-versions/1/approve`, {}, approver.apiKey);
      adapterId = (await post(`/v1/integrations/${integrationId}/adapters`, { name: "erp-adapter", public_key: newAgentKey().publicKey })).adapter_id;
    });

    const contractCapability = async () => {
      // Only fields the contract names: an amount or currency would be refused (422 undeclared_field, intents.yaml).
      const d = await decide(svc, iAgent, { resource: "erp:invoice:77", context: { po: "PO-77", vendor: "initech" } });
      expect(d.outcome).toBe("ALLOW");
      const cap = await issueOk(svc, iOrg.apiKey, d.decision_id);
      return {
        decisionId: d.decision_id,
        capabilityId: cap.capability_id,
        // The contract's declared fields are the constraints, and nothing else.
        presentation: { token: cap.token, audience: "erp-gateway", action: "reference_noop", resource: "erp:invoice:77", constraints: { po: "PO-77", vendor: "initech" } },
      };
    };

    it("binds exactly the contract's context_bindings; amount/currency presented as constraints is a mismatch", async () => {
      const c = await contractCapability();
      const got = await svc.v1("GET", `/v1/capabilities/${c.capabilityId}`, { bearer: iOrg.apiKey });
      expect(got.body).toMatchObject({ constraints: { po: "PO-77", vendor: "initech" }, resource: "erp:invoice:77", integration_id: integrationId });
      expectResult(await verify(svc, "v1", iOrg.apiKey, { ...c.presentation, constraints: { ...c.presentation.constraints, amount: "40" } }), 409, "capability_constraint_mismatch");
      expectResult(await verify(svc, "grpc", iOrg.apiKey, { ...c.presentation, constraints: { po: "PO-78", vendor: "initech" } }), 409, "capability_constraint_mismatch");
      expectConsumed(await verify(svc, "grpc", iOrg.apiKey, c.presentation), c);
    });

    it("binds a context key holding dots by its whole name, and never an inherited name the Intent lacks", async () => {
      const org = await newOrgFixture(svc);
      const agent = await newAgent(svc, org);
      const approver = await newApiKey(svc, org.apiKey, ["POLICY_APPROVER"], "approver");
      const id = (await post("/v1/integrations", { name: "ERP", actions: ["reference_noop"] }, org.apiKey)).integration_id;
      await post(`/v1/integrations/${id}/contract-versions`, { resource_path: "resource", context_bindings: { erp_ref: "context.erp.ref", ctor: "context.constructor" } }, org.apiKey);
      await post(`/v1/integrations/${id}/contract-versions/1/approve`, {}, approver.apiKey);
      const d = await decide(svc, agent, { resource: "erp:invoice:9", context: { "erp.ref": "REF-9" } });
      expect(d.outcome).toBe("ALLOW");
      const cap = await issueOk(svc, org.apiKey, d.decision_id);
      const got = await svc.v1("GET", `/v1/capabilities/${cap.capability_id}`, { bearer: org.apiKey });
      expect(got.body.constraints).toEqual({ erp_ref: "REF-9" });
      const presentation = { token: cap.token, audience: "erp-gateway", action: "reference_noop", resource: "erp:invoice:9", constraints: { erp_ref: "REF-9" } };
      expectResult(await verify(svc, "v1", org.apiKey, { ...presentation, constraints: {} }), 409, "capability_constraint_mismatch");
      expectConsumed(await verify(svc, "v1", org.apiKey, presentation), { decisionId: d.decision_id, capabilityId: cap.capability_id, presentation });
    });

    it("integration suspended → 403 capability_dependency_inactive; reactivated → the same token consumes", async () => {
      const c = await contractCapability();
      await post(`/v1/integrations/${integrationId}/suspend`);
      for (const transport of TRANSPORTS) expectResult(await verify(svc, transport, iOrg.apiKey, c.presentation), 403, "capability_dependency_inactive");
      expect(await capabilityState(svc, iOrg.apiKey, c.capabilityId)).toBe("issued");
      await post(`/v1/integrations/${integrationId}/reactivate`);
      expectConsumed(await verify(svc, "v1", iOrg.apiKey, c.presentation), c);
    });

    it("bound adapter suspended → 403; reactivated → 200; revoked → 403 for every unconsumed token", async () => {
      const [c1, c2] = [await contractCapability(), await contractCapability()];
      await post(`/v1/integrations/${integrationId}/adapters/${adapterId}/suspend`);
      expectResult(await verify(svc, "grpc", iOrg.apiKey, c1.presentation), 403, "capability_dependency_inactive");
      await post(`/v1/integrations/${integrationId}/adapters/${adapterId}/reactivate`);
      expectConsumed(await verify(svc, "grpc", iOrg.apiKey, c1.presentation), c1);
      await post(`/v1/integrations/${integrationId}/adapters/${adapterId}/revoke`);
      for (const transport of TRANSPORTS) expectResult(await verify(svc, transport, iOrg.apiKey, c2.presentation), 403, "capability_dependency_inactive");
      expect(await capabilityState(svc, iOrg.apiKey, c2.capabilityId)).toBe("issued");
    });
  });
});
