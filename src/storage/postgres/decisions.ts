import type { ReconciliationRow } from "./execution.js";
import type { Queryable } from "./database.js";

/** Outcomes; there is no fourth. */
export type Outcome = "ALLOW" | "DENY" | "HUMAN_REVIEW";

/** A reviewer's approval or resolution. */
export interface ReviewEntry {
  resolution: "approved" | "rejected";
  resolved_by: string;
  resolved_at: string;
  reason: string;
}

/** A decision row. */
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
  /** Early access: the latest reconciliation, when one was computed. */
  reconciliation?: Pick<ReconciliationRow, "status" | "receipt_id" | "reported_by"> & { reconciled_at: string } | null;
}

/** What the signed-intent path needs to know about the signer in one round trip. */
export interface SignerContext {
  principal_id: string;
  external_ref: string | null;
  kind: string;
  /** The integration covering the action and its active contract, if any. */
  integration_id: string | null;
  contract_version: number | null;
  context_bindings: Record<string, string> | null;
  resource_path: string | null;
}

/** SQL for decisions. */
export const decisionStore = {
  /** Inserts a decision; a unique violation on (agent_id, nonce) means a concurrent twin won. */
  async insert(q: Queryable, d: Omit<DecisionRow, "resolution" | "approvals">): Promise<void> {
    await q.query(
      `INSERT INTO decisions (decision_id, organization_id, agent_id, nonce, body_sha256, intent, action, outcome, reason, status,
                              evidence_id, policy_versions, graph_version, bundle_digest, integration_id, contract_version, evaluated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`,
      [
        d.decision_id, d.organization_id, d.agent_id, d.nonce, d.body_sha256, JSON.stringify(d.intent), d.action, d.outcome, d.reason,
        d.status, d.evidence_id, JSON.stringify(d.policy_versions), d.graph_version, d.bundle_digest, d.integration_id, d.contract_version,
        d.evaluated_at,
      ],
    );
  },

  /** The decision an agent already got for a nonce, or null. */
  async byNonce(q: Queryable, agentId: string, nonce: string): Promise<DecisionRow | null> {
    const { rows } = await q.query<DecisionRow>("SELECT * FROM decisions WHERE agent_id = $1 AND nonce = $2", [agentId, nonce]);
    return rows[0] ?? null;
  },

  /** One decision of the organization (locked for the transaction when asked), or null. */
  async get(q: Queryable, organizationId: string, decisionId: string, lock = false): Promise<DecisionRow | null> {
    const { rows } = await q.query<DecisionRow>(
      lock
        ? "SELECT * FROM decisions WHERE organization_id = $1 AND decision_id = $2 FOR UPDATE"
        : `SELECT d.*, (SELECT row_to_json(r) FROM (SELECT status, receipt_id, reported_by, reconciled_at FROM reconciliations
                          WHERE decision_id = d.decision_id ORDER BY reconciled_at DESC LIMIT 1) r) AS reconciliation
             FROM decisions d WHERE d.organization_id = $1 AND d.decision_id = $2`,
      [organizationId, decisionId],
    );
    return rows[0] ?? null;
  },

  /** The review queue: newest first, filtered, keyset-paginated on (evaluated_at, decision_id). */
  async list(
    q: Queryable,
    organizationId: string,
    f: { status: string | null; outcome: string | null; agentId: string | null; before: { at: Date; id: string } | null; limit: number },
  ): Promise<DecisionRow[]> {
    const { rows } = await q.query<DecisionRow>(
      `SELECT * FROM decisions WHERE organization_id = $1
          AND ($2::text IS NULL OR status = $2) AND ($3::text IS NULL OR outcome = $3) AND ($4::text IS NULL OR agent_id = $4)
          AND ($5::timestamptz IS NULL OR (evaluated_at, decision_id) < ($5, $6))
        ORDER BY evaluated_at DESC, decision_id DESC LIMIT $7`,
      [organizationId, f.status, f.outcome, f.agentId, f.before?.at ?? null, f.before?.id ?? "", f.limit],
    );
    return rows;
  },

  /** Records review progress. */
  async setReview(q: Queryable, decisionId: string, status: "PENDING" | "RESOLVED", resolution: ReviewEntry | null, approvals: ReviewEntry[]): Promise<void> {
    await q.query("UPDATE decisions SET status = $2, resolution = $3, approvals = $4 WHERE decision_id = $1", [
      decisionId,
      status,
      resolution ? JSON.stringify(resolution) : null,
      JSON.stringify(approvals),
    ]);
  },

  /** The signer's principal and the integration contract covering `action`, in one query. */
  async signerContext(q: Queryable, organizationId: string, principalId: string, action: string): Promise<SignerContext | null> {
    const { rows } = await q.query<SignerContext>(
      `SELECT p.principal_id, p.external_ref, p.kind, ia.integration_id, cv.version AS contract_version, cv.context_bindings, cv.resource_path
         FROM principals p
         LEFT JOIN integration_actions ia ON ia.organization_id = p.organization_id AND ia.action = $3
         LEFT JOIN contract_versions cv ON cv.integration_id = ia.integration_id AND cv.state = 'active'
        WHERE p.organization_id = $1 AND p.principal_id = $2`,
      [organizationId, principalId, action],
    );
    return rows[0] ?? null;
  },
};
