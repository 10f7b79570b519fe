import type { Permission } from "../base/caller.js";

/**
 * How each RPC authenticates (docs/architecture.md, "Authentication"):
 * - `public`: no credentials (sandbox creation);
 * - `platform`: the operator key without an organization (creating organizations);
 * - `org`: a bearer key or the operator key naming its organization, holding `permission` if set (any one of them when a list);
 * - `operator`: the operator key naming its organization, nothing else (platform-internal services);
 * - `agent`: signed by an agent, adapter or destination identity (the domain verifies the signature over the exact bytes);
 * - `org_or_agent`: either of the two above.
 */
export type Access =
  | { mode: "public" }
  | { mode: "platform" }
  | { mode: "org"; permission?: Permission | readonly Permission[] }
  | { mode: "operator" }
  | { mode: "agent" }
  | { mode: "org_or_agent"; permission: Permission };

const org = (permission?: Permission | readonly Permission[]): Access => ({ mode: "org", permission });

/** Access rule of every RPC by `Service.Method`; a test asserts none is missing. */
export const ACCESS: Readonly<Record<string, Access>> = {
  "SandboxService.CreateSandboxOrganization": { mode: "public" },
  "OrganizationService.CreateOrganization": { mode: "platform" },
  "OrganizationService.GetOrganization": org(),
  "OrganizationService.GetCaller": org(),
  "OrganizationService.CreateApiKey": org("ORG_ADMIN"),
  "OrganizationService.ListApiKeys": org("ORG_ADMIN"),
  "OrganizationService.RevokeApiKey": org("ORG_ADMIN"),
  "OrganizationService.SuspendOrganization": { mode: "platform" },
  "OrganizationService.ReactivateOrganization": { mode: "platform" },
  "PrincipalService.CreatePrincipal": org("ORG_ADMIN"),
  "PrincipalService.GetPrincipal": org(),
  "PrincipalService.ListPrincipals": org(),
  "AgentService.RegisterAgent": org("AGENT_ADMIN"),
  "AgentService.GetAgent": org(),
  "AgentService.ListAgents": org(),
  "AgentService.UpdateAgent": org("AGENT_ADMIN"),
  "AgentService.ActivateAgent": org("AGENT_ADMIN"),
  "AgentService.SuspendAgent": org("AGENT_ADMIN"),
  "AgentService.ReactivateAgent": org("AGENT_ADMIN"),
  "AgentService.RevokeAgent": org("AGENT_ADMIN"),
  "AgentService.RetireAgent": org("AGENT_ADMIN"),
  "AgentService.RotateAgentKey": org("AGENT_ADMIN"),
  "AgentService.Heartbeat": { mode: "agent" },
  "AgentService.ListAgentAuditRecords": org("EVIDENCE_READ"),
  "EvidenceService.GetEvidence": org("EVIDENCE_READ"),
  "EvidenceService.ListEvidence": org("EVIDENCE_READ"),
  "IntentService.SubmitIntent": { mode: "agent" },
  "DecisionService.GetDecision": { mode: "org_or_agent", permission: "DECISION_READ" },
  "DecisionService.ListDecisions": org("DECISION_READ"),
  "DecisionService.ReviewDecision": org("REVIEWER"),
  "CapabilityService.IssueCapability": org("CAPABILITY_ISSUE"),
  "CapabilityService.IssueCapabilityFromReview": org("CAPABILITY_ISSUE"),
  "CapabilityService.VerifyCapability": org("CAPABILITY_VERIFY"),
  "CapabilityService.GetCapability": org("CAPABILITY_ISSUE"),
  "PolicyService.CreatePolicy": org("POLICY_AUTHOR"),
  "PolicyService.ListPolicies": org(),
  "PolicyService.GetPolicy": org(),
  "PolicyService.CreatePolicyVersion": org("POLICY_AUTHOR"),
  "PolicyService.SubmitPolicyVersion": org("POLICY_AUTHOR"),
  "PolicyService.ApprovePolicyVersion": org("POLICY_APPROVER"),
  "PolicyService.PublishPolicyVersion": org("POLICY_APPROVER"),
  "PolicyService.EvaluatePolicy": org("POLICY_AUTHOR"),
  // Applying a pending change also needs POLICY_APPROVER; whether a call applies depends on what
  // is pending, so the domain checks that (Policies.change).
  "PolicyService.RollbackPolicy": org(["POLICY_AUTHOR", "POLICY_APPROVER"]),
  "PolicyService.DisablePolicy": org(["POLICY_AUTHOR", "POLICY_APPROVER"]),
  "PolicyService.ReplayPolicies": org(["POLICY_AUTHOR", "POLICY_APPROVER"]),
  // Auditors reproduce recorded decisions from the bundle their evidence names: EVIDENCE_READ.
  "PolicyService.GetBundle": org(["POLICY_AUTHOR", "POLICY_APPROVER", "EVIDENCE_READ"]),
  "AuthorityGraphService.UploadGovernanceDocument": org("POLICY_AUTHOR"),
  "AuthorityGraphService.ListGovernanceDocuments": org(),
  "AuthorityGraphService.CreateGraphVersion": org("POLICY_AUTHOR"),
  "AuthorityGraphService.DeleteGovernanceDocument": org("POLICY_AUTHOR"),
  "AuthorityGraphService.GenerateGraphVersion": org("POLICY_AUTHOR"),
  "AuthorityGraphService.ApproveGraphVersion": org("POLICY_APPROVER"),
  "AuthorityGraphService.PublishGraphVersion": org("POLICY_APPROVER"),
  "AuthorityGraphService.GetAuthorityGraph": org(),
  "AuthorityGraphService.ListGraphVersions": org(),
  "AuthorityGraphService.GetGraphVersion": org(),
  "IntegrationService.CreateIntegration": org("ORG_ADMIN"),
  "IntegrationService.ListIntegrations": org(),
  "IntegrationService.GetIntegration": org(),
  "IntegrationService.SuspendIntegration": org("ORG_ADMIN"),
  "IntegrationService.ReactivateIntegration": org("ORG_ADMIN"),
  "IntegrationService.CreateContractVersion": org("ORG_ADMIN"),
  "IntegrationService.ApproveContractVersion": org("POLICY_APPROVER"),
  "IntegrationService.RegisterAdapter": org("ORG_ADMIN"),
  "IntegrationService.SuspendAdapter": org("ORG_ADMIN"),
  "IntegrationService.ReactivateAdapter": org("ORG_ADMIN"),
  "IntegrationService.RevokeAdapter": org("ORG_ADMIN"),
  "ExecutionReportService.SubmitExecutionReceipt": { mode: "agent" },
  "ExecutionReportService.SubmitAdapterReport": { mode: "agent" },
  "ReconciliationService.Reconcile": { mode: "operator" },
  "WebhookService.CreateWebhook": org("ORG_ADMIN"),
  "WebhookService.ListWebhooks": org("ORG_ADMIN"),
  "WebhookService.GetWebhook": org("ORG_ADMIN"),
  "WebhookService.DeleteWebhook": org("ORG_ADMIN"),
  "WebhookService.RotateWebhookSecret": org("ORG_ADMIN"),
  "WebhookService.ListWebhookDeliveries": org("ORG_ADMIN"),
  "WebhookService.RedeliverWebhookDelivery": org("ORG_ADMIN"),
  "EventService.WatchEvents": org("EVENTS_READ"),
  "ServerReflection.ServerReflectionInfo": { mode: "public" },
};

/** The access rule of a method, by its service's short name and method name. */
export function accessOf(serviceName: string, methodName: string): Access | undefined {
  const short = serviceName.slice(serviceName.lastIndexOf(".") + 1);
  return ACCESS[`${short}.${methodName}`];
}
