import type { AgentKey } from "./keys.js";

/*
 * The /v1 resources as the client returns them: the wire form itself
 * (snake_case members, the spec's enum spellings, ISO 8601 timestamps), so what
 * a caller reads is what the spec and the OpenAPI document describe.
 */

export type Outcome = "ALLOW" | "DENY" | "HUMAN_REVIEW";
export type DecisionStatus = "PENDING" | "RESOLVED";
export type AgentState = "registered" | "active" | "suspended" | "revoked" | "retired";
export type PrincipalKind = "person" | "role" | "org_unit" | "service";
export type ReviewResolution = "approved" | "rejected";
export type Permission =
  | "ORG_ADMIN"
  | "AGENT_ADMIN"
  | "POLICY_AUTHOR"
  | "POLICY_APPROVER"
  | "REVIEWER"
  | "CAPABILITY_ISSUE"
  | "CAPABILITY_VERIFY"
  | "DECISION_READ"
  | "EVIDENCE_READ"
  | "EVENTS_READ";

/** Answer of POST /v1/sandbox/organizations. */
export interface Sandbox {
  organization_id: string;
  api_key: string;
  starter_policy_key: string;
}

export interface Principal {
  principal_id: string;
  display_name: string;
  kind: PrincipalKind;
  external_ref: string;
  created_at: string;
}

export interface Agent {
  agent_id: string;
  certificate_id: string;
  name: string;
  acting_for_principal_id: string;
  public_key: string;
  owner: string;
  business_unit: string;
  environment: string;
  state: AgentState;
  created_at?: string;
  updated_at?: string;
  last_heartbeat_at?: string;
}

/** What an agent signs with: its id, its current certificate and its private key. */
export interface AgentIdentity {
  agent_id: string;
  certificate_id: string;
  key: AgentKey;
}

/** The identity of a registered agent (after registration or a key rotation) with its key. */
export function agentIdentity(agent: Pick<Agent, "agent_id" | "certificate_id">, key: AgentKey): AgentIdentity {
  return { agent_id: agent.agent_id, certificate_id: agent.certificate_id, key };
}

export interface Heartbeat {
  agent_id: string;
  state: AgentState;
  last_heartbeat_at: string;
}

export interface Resolution {
  resolution: ReviewResolution;
  resolved_by: string;
  resolved_at: string;
  reason: string;
}

/**
 * A decision. Submitting an Intent answers the spec's shape (decision_id,
 * outcome, reason, evidence_id, evaluated_at, and status for HUMAN_REVIEW);
 * reading it adds the rest.
 */
export interface Decision {
  decision_id: string;
  outcome: Outcome;
  reason: string;
  evidence_id: string;
  evaluated_at: string;
  status?: DecisionStatus;
  resolution?: Resolution;
  approvals?: { resolved_by: string; resolved_at: string; reason: string }[];
  reconciliation?: Record<string, unknown>;
  agent_id?: string;
  action?: string;
  intent?: Record<string, unknown>;
  policy_versions?: Record<string, number>;
  graph_version?: number;
  bundle_digest?: string;
}

/** The fields of an Intent besides agent_id (taken from the identity). */
export interface IntentFields {
  action: string;
  amount?: number;
  currency?: string;
  counterparty?: string;
  /** `<kind>:<identifier>`. */
  resource?: string;
  context?: Record<string, unknown>;
  /** Defaults to now. */
  requested_at?: Date | string;
  /** Idempotency key of this Intent; defaults to a fresh UUID. */
  nonce?: string;
}

/** Answer of issuing a Capability: the token is shown only here. */
export interface CapabilityToken {
  token: string;
  capability_id: string;
  expires_at: string;
}

/** A Capability as stored (GET /v1/capabilities/{id}); never its token. */
export interface Capability {
  capability_id: string;
  decision_id: string;
  agent_id: string;
  state: "issued" | "consumed" | "expired";
  audience: string;
  issued_by: string;
  action: string;
  /** "" when the Intent had no resource. */
  resource: string;
  constraints: Record<string, string>;
  issued_at: string;
  expires_at: string;
  /** Absent until consumed. */
  consumed_at?: string;
  /** The lifetime it was issued with, in seconds: expires_at - issued_at. */
  ttl_seconds: number;
  /** "" when no integration is bound. */
  integration_id: string;
}

export interface IssueCapabilityOptions {
  /** The enforcement point that will verify and consume it. */
  audience: string;
  /** Identity of the issuer. */
  issued_by: string;
  /** 1..3600, 300 when absent. */
  ttl_seconds?: number;
}

export interface VerifyCapabilityOptions {
  token: string;
  audience: string;
  action: string;
  /** "" when the Intent had no resource. */
  resource: string;
  constraints: Record<string, string>;
  environment?: string;
}

export interface VerifiedCapability {
  capability_id: string;
  decision_id: string;
  resource: string;
  constraints: Record<string, string>;
}

export interface ApiKey {
  key_id: string;
  api_key: string;
  name: string;
  permissions: Permission[];
  created_at: string;
}

export interface PolicyVersionRef {
  policy_key: string;
  version: number;
  state: "draft" | "in_review" | "approved" | "active" | "superseded";
}

export interface GraphVersionRef {
  version: number;
  state: "draft" | "approved" | "active" | "superseded";
  /** What generation accepted but an author should look at (generateGraphVersion only). */
  warnings: GraphWarning[];
}

/** A delegation cycle or a row another row makes irrelevant, at its document (by name) and file line. */
export interface GraphWarning {
  code: "delegation_cycle" | "shadowed_row";
  message: string;
  document: string;
  line: number;
}

/** A graph version; `graph` only when one version is read (getGraphVersion, getAuthorityGraph). */
export interface GraphVersion {
  version: number;
  state: GraphVersionRef["state"];
  graph?: Record<string, unknown>;
  author: string;
  approver?: string;
  created_at: string;
  published_at?: string;
}

export interface GovernanceDocument {
  document_id: string;
  name: string;
  kind: "delegation_of_authority" | "approval_matrix" | "signing_schedule";
  format: "csv" | "yaml" | "json";
  /** Data rows, counted at upload. */
  rows: number;
  author: string;
  created_at: string;
}

/**
 * The constraints a Capability binds when no integration contract applies
 * (docs/architecture.md, Consume paths): whichever of amount, currency and
 * counterparty the Intent carried, the amount written as JavaScript writes
 * numbers (`5`, `12.5`).
 */
export function boundConstraints(intent: Pick<IntentFields, "amount" | "currency" | "counterparty">): Record<string, string> {
  const out: Record<string, string> = {};
  if (intent.amount !== undefined) out.amount = String(intent.amount);
  if (intent.currency !== undefined) out.currency = intent.currency;
  if (intent.counterparty !== undefined) out.counterparty = intent.counterparty;
  return out;
}

// --- events and webhooks (early access, /v1alpha; docs/events.md, docs/webhooks.md) -------------

/** The event names (docs/events.md). */
export type EventName =
  | "IntentReceived"
  | "DecisionCompleted"
  | "HumanReviewRequested"
  | "HumanReviewResolved"
  | "ReceiptIssued"
  | "PolicyPublished"
  | "AuthorityGraphUpdated"
  | "ExecutionReconciled"
  | "AgentStateChanged"
  | "WebhookFailing";

/** Every event name, in the order docs/events.md lists them. */
export const EVENT_NAMES: readonly EventName[] = [
  "IntentReceived",
  "DecisionCompleted",
  "HumanReviewRequested",
  "HumanReviewResolved",
  "ReceiptIssued",
  "PolicyPublished",
  "AuthorityGraphUpdated",
  "ExecutionReconciled",
  "AgentStateChanged",
  "WebhookFailing",
];

/** The spec's envelope: on the stream and as a webhook body, exactly these four members. */
export interface EventEnvelope {
  event: EventName;
  /** Unique, stable, sortable within an organization, and the stream's resume cursor. */
  event_id: string;
  /** ISO 8601 UTC with milliseconds. */
  occurred_at: string;
  /** The event's fields (docs/events.md): ids, versions, outcome, reason; never secrets. */
  data: Record<string, unknown>;
}

/** A webhook subscription; `secret` (`whsec_…`) only in the answers of create and rotate. */
export interface Webhook {
  webhook_id: string;
  url: string;
  /** Event names delivered; all when empty. */
  events: EventName[];
  description: string;
  state: "active" | "failing";
  secret?: string;
  created_at: string;
}

/** One attempt to deliver an event. */
export interface WebhookAttempt {
  attempted_at: string;
  /** The receiver's HTTP status; 0 when none (timeout, refused connection). */
  status: number;
  latency_ms: number;
  error?: string;
}

/** An event's delivery to one webhook; `delivery_id` is also every attempt's `webhook-id` header. */
export interface WebhookDelivery {
  delivery_id: string;
  webhook_id: string;
  event_id: string;
  event: EventName;
  state: "pending" | "delivered" | "failed";
  attempts: WebhookAttempt[];
  next_attempt_at?: string;
  created_at: string;
}
