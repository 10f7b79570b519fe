import type { ReconciliationRow } from "./execution.js";
import type { EvidenceRecord } from "../../evidence/record.js";
import { rowsByKey, type OrganizationKey, type Queryable } from "./database.js";
import { evidenceInsert, evidenceInsertValues, headMoveCtes, headMoveValues, jsonLines, toJsonLines, type HeadMove } from "./evidence.js";

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

/**
 * What the Intent path reads in its one round trip before evaluating: the
 * signer's live state, the organization's policy head, any prior decision for
 * the nonce, and the integration contract covering the action.
 */
export interface IntentContext {
  cert_state: "active" | "replaced" | "revoked";
  agent_state: "registered" | "active" | "suspended" | "revoked" | "retired";
  bundle_digest: string | null;
  policy_versions: Record<string, number> | null;
  graph_version: number | null;
  prior: DecisionRow | null;
  integration_id: string | null;
  contract_version: number | null;
  context_bindings: Record<string, string> | null;
}

/** What the Intent path looks up: the signing certificate, the Intent's nonce and action. */
export interface IntentLookup {
  certificateId: string;
  nonce: string;
  action: string;
}

/** A decision as first written (before any review). */
export type NewDecision = Omit<DecisionRow, "resolution" | "approvals">;

/**
 * The INSERT of decisions as 17 array parameters numbered from `offset` + 1; `where` conditions it.
 * The JSON columns come as JSON lines (see jsonLines), which spares escaping every quote.
 */
function decisionsInsert(offset: number, where = ""): string {
  const types = ["text", "text", "text", "text", "bytea", "jsonb", "text", "text", "text", "text", "text", "jsonb", "int", "text", "text", "int", "timestamptz"];
  const params = types.map((t, i) => (t === "jsonb" ? `${jsonLines(offset + i + 1)}::jsonb[]` : `$${offset + i + 1}::${t}[]`)).join(", ");
  return `INSERT INTO decisions (${DECISION_COLUMNS})
          SELECT * FROM unnest(${params}) AS d(${DECISION_COLUMNS}) ${where}`;
}

const DECISION_COLUMNS = `decision_id, organization_id, agent_id, nonce, body_sha256, intent, action, outcome, reason, status,
                          evidence_id, policy_versions, graph_version, bundle_digest, integration_id, contract_version, evaluated_at`;

function decisionsInsertValues(ds: readonly NewDecision[]): unknown[] {
  const col = <T>(f: (d: NewDecision) => T) => ds.map(f);
  return [
    col((d) => d.decision_id), col((d) => d.organization_id), col((d) => d.agent_id), col((d) => d.nonce), col((d) => d.body_sha256),
    toJsonLines(col((d) => d.intent)), col((d) => d.action), col((d) => d.outcome), col((d) => d.reason), col((d) => d.status),
    col((d) => d.evidence_id), toJsonLines(col((d) => d.policy_versions)), col((d) => d.graph_version), col((d) => d.bundle_digest),
    col((d) => d.integration_id), col((d) => d.contract_version), col((d) => d.evaluated_at),
  ];
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

  /**
   * Share-locks the signing agents of a group (ascending agent_id, the order
   * lifecycle transitions lock them in too) and returns each certificate's
   * current state and its agent's. Held until commit, so a revocation either
   * commits before these decisions (and they see it) or waits for them.
   */
  async lockSigners(q: Queryable, certificateIds: readonly string[]): Promise<Map<string, { cert_state: string; agent_state: string }>> {
    const { rows } = await q.query<{ certificate_id: string; cert_state: string; agent_state: string }>({
      name: "decisions_lock_signers",
      text: `SELECT c.certificate_id, c.state AS cert_state, a.state AS agent_state
         FROM certificates c JOIN agents a USING (agent_id)
        WHERE c.certificate_id = ANY($1::text[])
        ORDER BY a.agent_id
        FOR SHARE OF a`,
      values: [certificateIds],
    });
    return new Map(rows.map((r) => [r.certificate_id, r]));
  },

  /** Inserts many decisions in one statement (the group commit's locking path). */
  async insertMany(q: Queryable, ds: readonly NewDecision[]): Promise<void> {
    await q.query({ name: "decisions_insert_many", text: decisionsInsert(0), values: decisionsInsertValues(ds) });
  },

  /**
   * The group commit's fast path, ONE autocommitted statement for decisions of one or more
   * organizations: for each organization whose chain head is still where its move expects it
   * (seq and digest: a head predicted from a group that never committed cannot match), whose
   * signing certificates and their agents are all still active, and each of whose decisions
   * names the policy head and integration contract still current for its action, stores its
   * decisions and evidence records and moves its head on. The other organizations get nothing
   * written (the caller retries them, then takes the locking path). Returns the organizations
   * written. The signers' agents are share-locked first, in the order lifecycle transitions lock
   * them, then the heads in organization order: a transition in flight is waited for, and two
   * such statements never deadlock.
   *
   * The chain heads are checked, not locked beforehand: any other writer that moved one since it
   * was read (a group of another replica, a lifecycle change, a review) fails the check, the
   * row lock waiting for that writer and re-reading the row.
   */
  async insertWithEvidence(
    q: Queryable,
    moves: readonly HeadMove[],
    records: readonly EvidenceRecord[],
    ds: readonly NewDecision[],
    signers: readonly { certificateId: string; organizationId: string }[],
  ): Promise<Set<string>> {
    const { rows } = await q.query<{ organization_id: string }>({
      name: "decisions_insert_with_evidence",
      text: `WITH live_signers AS (
               SELECT c.certificate_id FROM certificates c JOIN agents a ON a.agent_id = c.agent_id
                WHERE c.certificate_id = ANY($25::text[]) AND c.state = 'active' AND a.state = 'active'
                ORDER BY a.agent_id
                  FOR SHARE OF a
             ),
             -- Organizations with a signer no longer active, or a decision evaluated against a
             -- policy head or integration contract that is no longer current.
             refused AS (
               SELECT s.organization_id FROM unnest($25::text[], $26::text[]) AS s(certificate_id, organization_id)
                WHERE s.certificate_id NOT IN (SELECT certificate_id FROM live_signers)
               UNION
               SELECT d.organization_id
                 FROM unnest($9::text[], $14::text[], ${jsonLines(19)}::jsonb[], $20::int[], $21::text[], $22::text[], $23::int[])
                      AS d(organization_id, action, policy_versions, graph_version, bundle_digest, integration_id, contract_version)
                 LEFT JOIN policy_heads h ON h.organization_id = d.organization_id
                 LEFT JOIN integration_actions ia ON ia.organization_id = d.organization_id AND ia.action = d.action
                 LEFT JOIN contract_versions cv ON cv.integration_id = ia.integration_id AND cv.state = 'active'
                WHERE h.bundle_digest IS DISTINCT FROM d.bundle_digest OR h.graph_version IS DISTINCT FROM d.graph_version
                   OR h.policy_versions IS DISTINCT FROM d.policy_versions
                   OR ia.integration_id IS DISTINCT FROM d.integration_id OR cv.version IS DISTINCT FROM d.contract_version
             ),
             ${headMoveCtes(27, "m.organization_id NOT IN (SELECT organization_id FROM refused)")},
             records AS (${evidenceInsert("WHERE r.organization_id IN (SELECT organization_id FROM head)")}),
             decisions AS (${decisionsInsert(7, "WHERE d.organization_id IN (SELECT organization_id FROM head)")})
             SELECT organization_id FROM head`,
      values: [
        ...evidenceInsertValues(records),
        ...decisionsInsertValues(ds),
        signers.map((s) => s.certificateId),
        signers.map((s) => s.organizationId),
        ...headMoveValues(moves),
      ],
    });
    return new Set(rows.map((r) => r.organization_id));
  },

  /**
   * The organization's policy head (share-locked: a publish waits for this transaction) and, per
   * action, the integration and active contract version: what a decision's evaluation must match.
   */
  async currentContext(
    q: Queryable,
    organizationId: string,
    actions: readonly string[],
  ): Promise<{ head: { bundle_digest: string; policy_versions: Record<string, number>; graph_version: number } | null; contracts: Map<string, { integration_id: string | null; contract_version: number | null }> }> {
    const head = await q.query<{ bundle_digest: string; policy_versions: Record<string, number>; graph_version: number }>(
      "SELECT bundle_digest, policy_versions, graph_version FROM policy_heads WHERE organization_id = $1 FOR SHARE",
      [organizationId],
    );
    const { rows } = await q.query<{ action: string; integration_id: string | null; contract_version: number | null }>(
      `SELECT r.action, ia.integration_id, cv.version AS contract_version
         FROM unnest($2::text[]) AS r(action)
         LEFT JOIN integration_actions ia ON ia.organization_id = $1 AND ia.action = r.action
         LEFT JOIN contract_versions cv ON cv.integration_id = ia.integration_id AND cv.state = 'active'`,
      [organizationId, actions],
    );
    return { head: head.rows[0] ?? null, contracts: new Map(rows.map((r) => [r.action, r])) };
  },

  /** The decision an agent already got for a nonce, or null. */
  async byNonce(q: Queryable, agentId: string, nonce: string): Promise<DecisionRow | null> {
    const { rows } = await q.query<DecisionRow>("SELECT * FROM decisions WHERE agent_id = $1 AND nonce = $2", [agentId, nonce]);
    return rows[0] ?? null;
  },

  /** Many decisions by (organization, id) in one query (no reconciliation); one entry per key, in order, null when absent. */
  getMany(q: Queryable, keys: readonly OrganizationKey[]): Promise<(DecisionRow | null)[]> {
    return rowsByKey<DecisionRow>(q, "decisions", "decision_id", keys);
  },

  /** One decision of the organization (locked for the transaction when asked), or null. */
  async get(q: Queryable, organizationId: string, decisionId: string, lock = false): Promise<DecisionRow | null> {
    const { rows } = await q.query<DecisionRow>(
      lock
        ? { name: "decisions_get_locked", text: "SELECT * FROM decisions WHERE organization_id = $1 AND decision_id = $2 FOR UPDATE", values: [organizationId, decisionId] }
        : {
            name: "decisions_get",
            text: `SELECT d.*, (SELECT row_to_json(r) FROM (SELECT status, receipt_id, reported_by, reconciled_at FROM reconciliations
                                  WHERE decision_id = d.decision_id ORDER BY reconciled_at DESC LIMIT 1) r) AS reconciliation
                     FROM decisions d WHERE d.organization_id = $1 AND d.decision_id = $2`,
            values: [organizationId, decisionId],
          },
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

  /**
   * Everything the Intent path needs after the signature verified, for many
   * Intents in one round trip; one entry per lookup, in order, null for an
   * unknown certificate.
   */
  async intentContexts(q: Queryable, lookups: readonly IntentLookup[]): Promise<(IntentContext | null)[]> {
    const { rows } = await q.query<IntentContext & { i: number }>({
      name: "decisions_intent_contexts",
      text: `SELECT r.i::int AS i, c.state AS cert_state, a.state AS agent_state, h.bundle_digest, h.policy_versions, h.graph_version,
              (SELECT row_to_json(d) FROM decisions d WHERE d.agent_id = c.agent_id AND d.nonce = r.nonce) AS prior,
              ia.integration_id, cv.version AS contract_version, cv.context_bindings
         FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS r(certificate_id, nonce, action, i)
         JOIN certificates c ON c.certificate_id = r.certificate_id
         JOIN agents a ON a.agent_id = c.agent_id
         LEFT JOIN policy_heads h ON h.organization_id = c.organization_id
         LEFT JOIN integration_actions ia ON ia.organization_id = c.organization_id AND ia.action = r.action
         LEFT JOIN contract_versions cv ON cv.integration_id = ia.integration_id AND cv.state = 'active'`,
      values: [lookups.map((l) => l.certificateId), lookups.map((l) => l.nonce), lookups.map((l) => l.action)],
    });
    const found: (IntentContext | null)[] = lookups.map(() => null);
    for (const { i, ...r } of rows) {
      // row_to_json gives JSON types: restore the column types the rest of the code expects.
      const prior = r.prior
        ? { ...r.prior, body_sha256: Buffer.from((r.prior.body_sha256 as unknown as string).slice(2), "hex"), evaluated_at: new Date(r.prior.evaluated_at) }
        : null;
      found[i - 1] = { ...r, prior };
    }
    return found;
  },
};
