import { createClient, type Transport } from "@connectrpc/connect";
import { AgentService } from "../../../src/gen/mandate/v1/agents_pb.js";
import { CapabilityService } from "../../../src/gen/mandate/v1/capabilities_pb.js";
import { DecisionService, ReviewResolution } from "../../../src/gen/mandate/v1/decisions_pb.js";
import { EvidenceService } from "../../../src/gen/mandate/v1/evidence_pb.js";
import { OrganizationService, Permission } from "../../../src/gen/mandate/v1/organizations_pb.js";
import { PolicyService } from "../../../src/gen/mandate/v1/policies_pb.js";
import { EventService } from "../../../src/gen/mandate/v1alpha/events_pb.js";
import { failureCode } from "./errors";

/** A permission's wire name ("ORG_ADMIN"), as the API documents it. */
export type PermissionName = Exclude<keyof typeof Permission, "UNSPECIFIED">;

/** Every permission, in the proto's order. */
export const PERMISSION_NAMES = Object.keys(Permission).filter((k): k is PermissionName => isNaN(Number(k)) && k !== "UNSPECIFIED");

/** What each permission lets a key do, in a line (the overview and the key form show it). */
export const PERMISSION_MEANINGS: Record<PermissionName, string> = {
  ORG_ADMIN: "manage API keys, principals, integrations and webhooks",
  AGENT_ADMIN: "register agents and change their lifecycle",
  POLICY_AUTHOR: "upload governance, author policies and graphs",
  POLICY_APPROVER: "approve and publish policies and graphs",
  REVIEWER: "approve or reject human reviews",
  CAPABILITY_ISSUE: "issue capabilities",
  CAPABILITY_VERIFY: "verify and consume capabilities",
  DECISION_READ: "read decisions and the review queue",
  EVIDENCE_READ: "read evidence and audit records",
  EVENTS_READ: "watch the live event stream",
};

/** An id no resource has: a probe naming it can only be refused or not found. */
const NOBODY = "console-permission-probe";

/**
 * The public API has no call that tells a key its own permissions (GetOrganization answers the
 * organization only; ListApiKeys lists keys without saying which one is the caller). So the
 * console derives them: one call per permission that the access rule (src/transport/access.ts)
 * checks before anything else, on a resource that does not exist or a list of one item. 403
 * `permission_denied` means the key lacks it; any other answer (the list, 404, 422) means it
 * holds it. Nothing is changed: a probe's target never exists.
 */
const PROBES: Record<PermissionName, (t: Transport, signal: AbortSignal) => Promise<unknown>> = {
  ORG_ADMIN: (t, signal) => createClient(OrganizationService, t).listApiKeys({}, { signal }),
  AGENT_ADMIN: (t, signal) => createClient(AgentService, t).activateAgent({ agentId: NOBODY }, { signal }),
  POLICY_AUTHOR: (t, signal) => createClient(PolicyService, t).submitPolicyVersion({ policyKey: NOBODY, version: 1 }, { signal }),
  POLICY_APPROVER: (t, signal) => createClient(PolicyService, t).approvePolicyVersion({ policyKey: NOBODY, version: 1 }, { signal }),
  REVIEWER: (t, signal) =>
    createClient(DecisionService, t).reviewDecision({ decisionId: NOBODY, resolution: ReviewResolution.APPROVED, reason: "permission probe" }, { signal }),
  CAPABILITY_ISSUE: (t, signal) => createClient(CapabilityService, t).getCapability({ capabilityId: NOBODY }, { signal }),
  CAPABILITY_VERIFY: (t, signal) => createClient(CapabilityService, t).verifyCapability({ token: NOBODY, audience: NOBODY, action: NOBODY }, { signal }),
  DECISION_READ: (t, signal) => createClient(DecisionService, t).listDecisions({ pageSize: 1 }, { signal }),
  EVIDENCE_READ: (t, signal) => createClient(EvidenceService, t).listEvidence({ pageSize: 1 }, { signal }),
  // A stream is refused on its first message, before anything is sent; a malformed cursor makes
  // a permitted key's stream fail at once (422) instead of staying open.
  EVENTS_READ: async (t, signal) => {
    const stream = createClient(EventService, t).watchEvents({ after: NOBODY }, { signal });
    for await (const _ of stream) break;
  },
};

/** The permissions `transport`'s credential holds, derived by PROBES. */
export async function probePermissions(transport: Transport, signal: AbortSignal): Promise<Set<PermissionName>> {
  const held = await Promise.all(
    PERMISSION_NAMES.map((name) =>
      PROBES[name](transport, signal).then(
        () => true,
        (err: unknown) => {
          const code = failureCode(err);
          if (code === "permission_denied") return false;
          // A key that cannot authenticate holds nothing; anything else is the probe's refusal past the check.
          if (code === "unknown_key" || code === "missing_credentials" || code === "organization_suspended") throw err;
          return true;
        },
      ),
    ),
  );
  return new Set(PERMISSION_NAMES.filter((_, i) => held[i]));
}
