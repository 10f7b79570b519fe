import type { DescMethod } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PERMISSIONS, type Permission } from "../../src/base/caller.js";
import { ACCESS } from "../../src/transport/access.js";
import { bindingOf, loadAllMandateServices } from "../support/api.js";
import { call, newApiKey, newOrgFixture, type OrgFixture } from "../support/agents.js";
import { startService, type TestService } from "../support/service.js";

/*
 * Which permission each operation needs (docs/architecture.md, Authentication), written out here
 * from the documented rules rather than read from the code's table: every RPC that needs one
 * refuses a key holding every other permission (403 permission_denied, over gRPC and /v1, before
 * anything is read or written), and a key holding only that one gets past the check. A new RPC
 * that needs a permission must be added here, or the last test fails.
 */
const NEEDS: Record<string, readonly Permission[]> = {
  // Keys, principals and integrations: ORG_ADMIN (approving a contract version: POLICY_APPROVER).
  "OrganizationService.CreateApiKey": ["ORG_ADMIN"],
  "OrganizationService.ListApiKeys": ["ORG_ADMIN"],
  "OrganizationService.RevokeApiKey": ["ORG_ADMIN"],
  "PrincipalService.CreatePrincipal": ["ORG_ADMIN"],
  "IntegrationService.CreateIntegration": ["ORG_ADMIN"],
  "IntegrationService.SuspendIntegration": ["ORG_ADMIN"],
  "IntegrationService.ReactivateIntegration": ["ORG_ADMIN"],
  "IntegrationService.CreateContractVersion": ["ORG_ADMIN"],
  "IntegrationService.ApproveContractVersion": ["POLICY_APPROVER"],
  "IntegrationService.RegisterAdapter": ["ORG_ADMIN"],
  "IntegrationService.SuspendAdapter": ["ORG_ADMIN"],
  "IntegrationService.ReactivateAdapter": ["ORG_ADMIN"],
  "IntegrationService.RevokeAdapter": ["ORG_ADMIN"],
  // Webhooks, the organization's outbound configuration: ORG_ADMIN.
  "WebhookService.CreateWebhook": ["ORG_ADMIN"],
  "WebhookService.ListWebhooks": ["ORG_ADMIN"],
  "WebhookService.GetWebhook": ["ORG_ADMIN"],
  "WebhookService.DeleteWebhook": ["ORG_ADMIN"],
  "WebhookService.RotateWebhookSecret": ["ORG_ADMIN"],
  "WebhookService.ListWebhookDeliveries": ["ORG_ADMIN"],
  "WebhookService.RedeliverWebhookDelivery": ["ORG_ADMIN"],
  // Registering an agent and its lifecycle: AGENT_ADMIN.
  "AgentService.RegisterAgent": ["AGENT_ADMIN"],
  "AgentService.UpdateAgent": ["AGENT_ADMIN"],
  "AgentService.ActivateAgent": ["AGENT_ADMIN"],
  "AgentService.SuspendAgent": ["AGENT_ADMIN"],
  "AgentService.ReactivateAgent": ["AGENT_ADMIN"],
  "AgentService.RevokeAgent": ["AGENT_ADMIN"],
  "AgentService.RetireAgent": ["AGENT_ADMIN"],
  "AgentService.RotateAgentKey": ["AGENT_ADMIN"],
  // Evidence, and an agent's audit records (evidence too): EVIDENCE_READ.
  "EvidenceService.GetEvidence": ["EVIDENCE_READ"],
  "EvidenceService.ListEvidence": ["EVIDENCE_READ"],
  "AgentService.ListAgentAuditRecords": ["EVIDENCE_READ"],
  // Decisions and reviews.
  "DecisionService.GetDecision": ["DECISION_READ"],
  "DecisionService.ListDecisions": ["DECISION_READ"],
  "DecisionService.ReviewDecision": ["REVIEWER"],
  // Capabilities: issuing (and reading what was issued) CAPABILITY_ISSUE, verifying CAPABILITY_VERIFY.
  "CapabilityService.IssueCapability": ["CAPABILITY_ISSUE"],
  "CapabilityService.IssueCapabilityFromReview": ["CAPABILITY_ISSUE"],
  "CapabilityService.GetCapability": ["CAPABILITY_ISSUE"],
  "CapabilityService.VerifyCapability": ["CAPABILITY_VERIFY"],
  // Authoring policy versions, documents and graph versions: POLICY_AUTHOR; approving and publishing: POLICY_APPROVER.
  "PolicyService.CreatePolicy": ["POLICY_AUTHOR"],
  "PolicyService.CreatePolicyVersion": ["POLICY_AUTHOR"],
  "PolicyService.SubmitPolicyVersion": ["POLICY_AUTHOR"],
  "PolicyService.EvaluatePolicy": ["POLICY_AUTHOR"],
  "PolicyService.ApprovePolicyVersion": ["POLICY_APPROVER"],
  "PolicyService.PublishPolicyVersion": ["POLICY_APPROVER"],
  "AuthorityGraphService.UploadGovernanceDocument": ["POLICY_AUTHOR"],
  "AuthorityGraphService.DeleteGovernanceDocument": ["POLICY_AUTHOR"],
  "AuthorityGraphService.CreateGraphVersion": ["POLICY_AUTHOR"],
  "AuthorityGraphService.GenerateGraphVersion": ["POLICY_AUTHOR"],
  "AuthorityGraphService.ApproveGraphVersion": ["POLICY_APPROVER"],
  "AuthorityGraphService.PublishGraphVersion": ["POLICY_APPROVER"],
  // Proposing a rollback or a disable, and replaying, is either role's; the bundle also the auditor's.
  "PolicyService.RollbackPolicy": ["POLICY_AUTHOR", "POLICY_APPROVER"],
  "PolicyService.DisablePolicy": ["POLICY_AUTHOR", "POLICY_APPROVER"],
  "PolicyService.ReplayPolicies": ["POLICY_AUTHOR", "POLICY_APPROVER"],
  "PolicyService.GetBundle": ["POLICY_AUTHOR", "POLICY_APPROVER", "EVIDENCE_READ"],
  // A stream: its refusal is asserted in events-stream.test.ts.
  "EventService.WatchEvents": ["EVENTS_READ"],
};

let svc: TestService;
let org: OrgFixture;
const methods = new Map<string, DescMethod>();

beforeAll(async () => {
  svc = await startService();
  org = await newOrgFixture(svc);
  for (const { service } of await loadAllMandateServices()) for (const m of service.methods) methods.set(`${service.name}.${m.name}`, m);
});

afterAll(async () => {
  await svc?.close();
});

/** An API key of the organization holding exactly `permissions`. */
async function keyWith(permissions: readonly Permission[]): Promise<string> {
  return (await newApiKey(svc, org.apiKey, [...permissions])).apiKey;
}

describe("permissions", () => {
  const unary = Object.entries(NEEDS).filter(([name]) => name !== "EventService.WatchEvents");

  it.each(unary)("%s: refused without %j (403 permission_denied); one of them is enough", async (name, needed) => {
    const method = methods.get(name);
    expect(method, `${name} exists`).toBeDefined();
    const without = await keyWith(PERMISSIONS.filter((p) => !needed.includes(p)));
    // Over /v1 each path variable needs a value for the route to match ("1" fits ids and versions alike).
    const path = Object.fromEntries([...(bindingOf(method!)?.template ?? "").matchAll(/\{([a-z_][a-z0-9_]*)/g)].map((m) => [m[1]!, "1"]));
    for (const transport of ["grpc", "v1"] as const) {
      const res = await call(svc, transport, method!, transport === "v1" ? path : {}, { bearer: without });
      expect({ status: res.status, detail: res.detail }, `${name} over ${transport}`).toEqual({ status: 403, detail: "permission_denied" });
    }
    for (const one of needed) {
      const res = await call(svc, "grpc", method!, {}, { bearer: await keyWith([one]) });
      expect(res.detail, `${name} with ${one} alone`).not.toBe("permission_denied");
    }
  });

  it("names every RPC that needs a permission, with the permissions the service asks for", () => {
    const asked = Object.entries(ACCESS).flatMap(([name, access]) =>
      (access.mode === "org" || access.mode === "org_or_agent") && access.permission ? [[name, [access.permission].flat()] as const] : [],
    );
    expect(Object.fromEntries(asked)).toEqual(NEEDS);
  });
});
