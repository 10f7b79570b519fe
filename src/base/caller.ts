/** Permissions an API key can hold (docs/architecture.md, Authentication). */
export const PERMISSIONS = [
  "ORG_ADMIN",
  "AGENT_ADMIN",
  "POLICY_AUTHOR",
  "POLICY_APPROVER",
  "REVIEWER",
  "CAPABILITY_ISSUE",
  "CAPABILITY_VERIFY",
  "DECISION_READ",
  "EVIDENCE_READ",
  // Early access: the event stream (docs/events.md). Proto enum numbers follow this order.
  "EVENTS_READ",
] as const;

/** One permission. */
export type Permission = (typeof PERMISSIONS)[number];

/**
 * Who is calling, established once per request by authentication. `identity`
 * is what audit trails record (`key_…` or `operator`).
 */
export type Caller =
  | { kind: "anonymous"; clientAddress: string }
  | {
      kind: "key" | "operator";
      organizationId: string;
      identity: string;
      permissions: ReadonlySet<Permission>;
      clientAddress: string;
    }
  /** An operator call that names no organization (only CreateOrganization accepts it). */
  | { kind: "platform_operator"; identity: "operator"; clientAddress: string }
  /** Agent-signed headers; the signature is verified by the domain against the certificate. */
  | { kind: "agent_signed"; keyId: string; signature: string; timestamp: string | undefined; clientAddress: string };

/** An organization-scoped caller. */
export type OrgCaller = Extract<Caller, { kind: "key" | "operator" }>;
