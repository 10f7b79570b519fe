import { Permission } from "../../../src/gen/mandate/v1/organizations_pb.js";

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

/** The names of `permissions` as GetCaller answers them. */
export function permissionNames(permissions: readonly Permission[]): Set<PermissionName> {
  return new Set(permissions.map((p) => Permission[p] as PermissionName).filter((name) => PERMISSION_NAMES.includes(name)));
}
