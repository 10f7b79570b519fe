import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CapabilityStore } from "../../src/storage/capabilities.js";
import { NotFoundError } from "../../src/storage/errors.js";
import { PostgresCapabilityStore } from "../../src/storage/postgres/capabilities.js";
import { createDatabase, type Database } from "../../src/storage/postgres/database.js";
import { allowedCapability, decide, issueOk, verify } from "../e2e/capabilities-support.js";
import { newAgent, newAgentKey, newApiKey, newOrgFixture, type OrgFixture, type TestAgent } from "../support/agents.js";
import { createTestDatabase, startService, type TestService } from "../support/service.js";

/*
 * The CapabilityStore contract (src/storage/capabilities.ts) on real Postgres: capabilities read
 * as issued (the token's digest, never the token) and as consumed, only within their organization
 * (get, getMany one entry per key in order, byDecision), the live states a consume depends on as
 * they are now (the integration's "inactive" when it or an adapter is not active, null unbound),
 * NotFoundError for an unknown capability, and a contract version's bindings. Capabilities are
 * issued and consumed by a service running on this suite's own database.
 */

let svc: TestService;
let db: Database;
let store: CapabilityStore;
let orgA: OrgFixture;
let orgB: OrgFixture;
let agentA: TestAgent;
let agentB: TestAgent;

beforeAll(async () => {
  const url = await createTestDatabase("capability_store");
  svc = await startService({ DATABASE_URL: url, MANDATE_MIGRATION_DATABASE_URL: url });
  [orgA, orgB] = await Promise.all([newOrgFixture(svc), newOrgFixture(svc)]);
  [agentA, agentB] = await Promise.all([newAgent(svc, orgA), newAgent(svc, orgB)]);
  db = createDatabase(url, 4);
  store = new PostgresCapabilityStore(db);
});

afterAll(async () => {
  await db?.close();
  await svc?.close();
});

const operator = () => ({ "x-service-operator-key": svc.operatorKey! });

async function post(path: string, bearer: string, body: unknown = {}, headers: Record<string, string> = {}) {
  const res = await svc.v1("POST", path, { bearer, body, headers });
  expect(res.status, `${path}: ${JSON.stringify(res.body)}`).toBe(200);
  return res.body;
}

describe("PostgresCapabilityStore", () => {
  it("reads a capability as issued, with the SHA-256 of its token and not the token, only within its organization", async () => {
    const c = await allowedCapability(svc, agentA);
    const row = await store.get(orgA.organizationId, c.capabilityId);
    expect(row).toEqual({
      capability_id: c.capabilityId,
      organization_id: orgA.organizationId,
      decision_id: c.decisionId,
      agent_id: agentA.agentId,
      integration_id: null,
      audience: c.presentation.audience,
      issued_by: "payables-bot",
      action: c.presentation.action,
      resource: c.presentation.resource,
      constraints: c.presentation.constraints,
      issued_at: expect.any(Date),
      expires_at: expect.any(Date),
      consumed_at: null,
      consumed_by: null,
      token_digest: createHash("sha256").update(c.presentation.token).digest("hex"),
    });
    expect(row!.issued_at.getTime()).toBeLessThan(row!.expires_at.getTime());
    expect(JSON.stringify(row)).not.toContain(c.presentation.token);
    expect(await store.get(orgB.organizationId, c.capabilityId)).toBeNull();
    expect(await store.get(orgA.organizationId, "cap_unknown")).toBeNull();
  });

  it("reads a consumed capability with when and by whom", async () => {
    const c = await allowedCapability(svc, agentA);
    expect((await verify(svc, "v1", orgA.apiKey, c.presentation)).status).toBe(200);
    const row = await store.get(orgA.organizationId, c.capabilityId);
    expect(row!.consumed_at).toBeInstanceOf(Date);
    expect(row!.consumed_by).toEqual(expect.any(String));
    expect(row!.consumed_by).not.toBe("");
  });

  it("reads many by (organization, id): one entry per key, in order, null when absent or of another organization", async () => {
    const [a, b] = await Promise.all([allowedCapability(svc, agentA), allowedCapability(svc, agentB)]);
    const keys = [
      { organizationId: orgB.organizationId, id: b.capabilityId },
      { organizationId: orgA.organizationId, id: a.capabilityId },
      { organizationId: orgB.organizationId, id: a.capabilityId },
      { organizationId: orgA.organizationId, id: "cap_unknown" },
      { organizationId: orgA.organizationId, id: a.capabilityId },
    ];
    const rows = await store.getMany(keys);
    expect(rows.map((r) => r && [r.organization_id, r.capability_id])).toEqual([
      [orgB.organizationId, b.capabilityId],
      [orgA.organizationId, a.capabilityId],
      null,
      null,
      [orgA.organizationId, a.capabilityId],
    ]);
    expect(rows[1]).toEqual(await store.get(orgA.organizationId, a.capabilityId));
    expect(await store.getMany([])).toEqual([]);
  });

  it("reads a decision's capability, null for a decision without one and under another organization", async () => {
    const c = await allowedCapability(svc, agentA);
    expect(await store.byDecision(orgA.organizationId, c.decisionId)).toMatchObject({ capability_id: c.capabilityId, decision_id: c.decisionId });
    expect(await store.byDecision(orgB.organizationId, c.decisionId)).toBeNull();
    const bare = await decide(svc, agentA);
    expect(await store.byDecision(orgA.organizationId, bare.decision_id)).toBeNull();
  });

  it("reads the live states an unbound capability depends on as they are now; NotFoundError for an unknown capability", async () => {
    const org = await newOrgFixture(svc);
    const agent = await newAgent(svc, org);
    const c = await allowedCapability(svc, agent);
    expect(await store.dependencies(c.capabilityId)).toEqual({ organization: "active", agent: "active", integration: null });
    await post(`/v1/agents/${agent.agentId}/suspend`, org.apiKey);
    expect(await store.dependencies(c.capabilityId)).toEqual({ organization: "active", agent: "suspended", integration: null });
    await post(`/v1/organizations/${org.organizationId}/suspend`, "", {}, operator());
    expect(await store.dependencies(c.capabilityId)).toEqual({ organization: "suspended", agent: "suspended", integration: null });
    await expect(store.dependencies("cap_unknown")).rejects.toBeInstanceOf(NotFoundError);
  });

  describe("bound to an integration contract", () => {
    let org: OrgFixture;
    let agent: TestAgent;
    let integrationId: string;
    let adapterId: string;

    beforeAll(async () => {
      org = await newOrgFixture(svc);
      agent = await newAgent(svc, org);
      const approver = await newApiKey(svc, org.apiKey, ["POLICY_APPROVER"], "approver");
      integrationId = (await post("/v1/integrations", org.apiKey, { name: "ERP", actions: ["reference_noop"] })).integration_id;
      await post(`/v1/integrations/${integrationId}/contract-versions`, org.apiKey, { resource_path: "resource", context_bindings: { po: "context.po", vendor: "context.vendor" } });
      await post(`/v1/integrations/${integrationId}/contract-versions/1/approve`, approver.apiKey);
      adapterId = (await post(`/v1/integrations/${integrationId}/adapters`, org.apiKey, { name: "erp-adapter", public_key: newAgentKey().publicKey })).adapter_id;
    });

    it("reads a contract version's resource path and bindings, null for a version or integration that does not exist", async () => {
      expect(await store.contractBindings(integrationId, 1)).toEqual({ resource_path: "resource", context_bindings: { po: "context.po", vendor: "context.vendor" } });
      expect(await store.contractBindings(integrationId, 2)).toBeNull();
      expect(await store.contractBindings("int_unknown", 1)).toBeNull();
    });

    it("reads the integration's state as inactive while it or one of its adapters is not active", async () => {
      const d = await decide(svc, agent, { resource: "erp:invoice:1", context: { po: "PO-1", vendor: "initech" } });
      const { capability_id: id } = await issueOk(svc, org.apiKey, d.decision_id);
      expect(await store.get(org.organizationId, id)).toMatchObject({ integration_id: integrationId, constraints: { po: "PO-1", vendor: "initech" } });
      expect(await store.dependencies(id)).toEqual({ organization: "active", agent: "active", integration: "active" });
      await post(`/v1/integrations/${integrationId}/suspend`, org.apiKey);
      expect((await store.dependencies(id)).integration).toBe("inactive");
      await post(`/v1/integrations/${integrationId}/reactivate`, org.apiKey);
      expect((await store.dependencies(id)).integration).toBe("active");
      await post(`/v1/integrations/${integrationId}/adapters/${adapterId}/suspend`, org.apiKey);
      expect((await store.dependencies(id)).integration).toBe("inactive");
    });
  });
});
