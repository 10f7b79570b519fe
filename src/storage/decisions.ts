import type { DeclaredFieldType } from "./integrations.js";
import type { ReconciliationRow } from "./execution.js";
import type { OrganizationKey } from "./keys.js";

/** Outcomes; there is no fourth. */
export type Outcome = "ALLOW" | "DENY" | "HUMAN_REVIEW";

/** A reviewer's approval or resolution. */
export interface ReviewEntry {
  resolution: "approved" | "rejected";
  resolved_by: string;
  resolved_at: string;
  reason: string;
}

/** The latest reconciliation of a decision (early access), as read with it. */
export type DecisionReconciliation = Pick<ReconciliationRow, "status" | "receipt_id" | "reported_by"> & { reconciled_at: string };

/** A stored decision. */
export interface DecisionRow {
  decision_id: string;
  organization_id: string;
  agent_id: string;
  nonce: string;
  body_sha256: Buffer;
  intent: Record<string, unknown>;
  action: string;
  outcome: Outcome;
  reason: string;
  status: "PENDING" | "RESOLVED" | null;
  evidence_id: string;
  policy_versions: Record<string, number>;
  graph_version: number;
  bundle_digest: string;
  integration_id: string | null;
  contract_version: number | null;
  evaluated_at: Date;
  resolution: ReviewEntry | null;
  approvals: ReviewEntry[];
  /** Early access: the latest reconciliation, when one was computed (single reads only). */
  reconciliation?: DecisionReconciliation | null;
}

/** A decision as first written (before any review). */
export type NewDecision = Omit<DecisionRow, "resolution" | "approvals" | "reconciliation">;

/**
 * What the Intent path reads in its one round trip before evaluating: the signer's live
 * state and its organization's, the organization's policy head, any prior decision for the
 * nonce, and the integration contract covering the action.
 */
export interface IntentContext {
  cert_state: "active" | "replaced" | "revoked";
  agent_state: "registered" | "active" | "suspended" | "revoked" | "retired";
  organization_state: "active" | "suspended";
  bundle_digest: string | null;
  policy_versions: Record<string, number> | null;
  graph_version: number | null;
  prior: DecisionRow | null;
  integration_id: string | null;
  contract_version: number | null;
  /** The active contract's resource path and bindings: the fields it names (null without a contract). */
  resource_path: string | null;
  context_bindings: Record<string, string> | null;
  /** The active contract's declared field types (null without a contract). */
  field_types: Record<string, DeclaredFieldType> | null;
}

/** What the Intent path looks up: the signing certificate, the Intent's nonce and action. */
export interface IntentLookup {
  certificateId: string;
  nonce: string;
  action: string;
}

/** A filter and keyset position over an organization's decisions, newest first. */
export interface DecisionQuery {
  status: string | null;
  outcome: string | null;
  agentId: string | null;
  /** Only decisions strictly before this (evaluated_at, decision_id). */
  before: { at: Date; id: string } | null;
  limit: number;
}

/**
 * A recorded, evaluated decision with what its evaluation's input was made of, for evaluating it
 * again (replay). `now`, `agent` and `principal` are those the decision's evidence record holds;
 * null in records written before evidence held them.
 */
export interface RecordedEvaluation {
  decision_id: string;
  outcome: Outcome;
  reason: string;
  intent: Record<string, unknown>;
  evaluated_at: Date;
  now: string | null;
  agent: { agent_id: string; state: string } | null;
  principal: { principal_id: string; external_ref: string | null; kind: string } | null;
  /** The deciding agent's acting principal as stored (an agent's acting principal and a principal's attributes never change). */
  acting_principal: { principal_id: string; external_ref: string | null; kind: string };
}

/** A review step computed from the decision as it stands under lock. */
export interface ReviewChange {
  status: "PENDING" | "RESOLVED";
  resolution: ReviewEntry | null;
  approvals: ReviewEntry[];
  /** The evidence payload and kind of this step. */
  evidence: { kind: string; payload: Record<string, unknown> };
}

/**
 * Decisions as stored. They are written only through the Ledger (storage/ledger.ts); this
 * reads them and records review steps.
 */
export interface DecisionStore {
  /** The decision of the organization with its latest reconciliation, or null (also when it belongs to another organization). */
  get(organizationId: string, decisionId: string): Promise<DecisionRow | null>;
  /** Decisions by (organization, id), one entry per key in order, null when absent or of another organization; no reconciliation. */
  getMany(keys: readonly OrganizationKey[]): Promise<(DecisionRow | null)[]>;
  /** The decision an agent already got for a nonce, or null. */
  byNonce(agentId: string, nonce: string): Promise<DecisionRow | null>;
  /** The organization's decisions matching `query`, newest first. */
  list(organizationId: string, query: DecisionQuery): Promise<DecisionRow[]>;
  /**
   * The organization's latest `limit` decisions that were evaluated (not those of a suspended
   * agent, which no policy decided), newest first, each with its evaluation's recorded input.
   */
  recordedEvaluations(organizationId: string, limit: number): Promise<RecordedEvaluation[]>;
  /** One entry per lookup, in order; null for an unknown certificate. */
  intentContexts(lookups: readonly IntentLookup[]): Promise<(IntentContext | null)[]>;
  /**
   * Applies one review step atomically: locks the decision, hands it to `step` (which returns
   * the change, or throws to refuse it, writing nothing), stores the change and appends its
   * evidence record in the same transaction. Returns the decision as changed. Throws
   * NotFoundError when the organization has no such decision.
   */
  review(organizationId: string, decisionId: string, step: (current: DecisionRow) => ReviewChange): Promise<DecisionRow>;
}
