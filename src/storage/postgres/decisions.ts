import type { EvidenceRecord } from "../../evidence/record.js";
import type { DecisionQuery, DecisionRow, DecisionStore, IntentContext, IntentLookup, NewDecision, RecordedEvaluation, ReviewChange, ReviewEntry } from "../decisions.js";
import { NotFoundError } from "../errors.js";
import type { OrganizationKey } from "../keys.js";
import { rowsByKey, type Database, type Queryable } from "./database.js";
import type { EvidenceChain } from "./evidence-chain.js";
import { jsonLines, toJsonLines } from "./evidence.js";

/** A decision as the ledger writes it: the new decision and the id of its evidence record. */
export type DecisionToWrite = Omit<NewDecision, "evidence_id">;

/**
 * The INSERT of decisions as 17 array parameters numbered from `offset` + 1 (see
 * {@link decisionsInsertValues}), as the rows `d`; `where` conditions it. The JSON columns come
 * as JSON lines (see jsonLines), which spares escaping every quote.
 */
export function decisionsInsert(offset: number, where = ""): string {
  const types = ["text", "text", "text", "text", "bytea", "jsonb", "text", "text", "text", "text", "text", "jsonb", "int", "text", "text", "int", "timestamptz"];
  const params = types.map((t, i) => (t === "jsonb" ? `${jsonLines(offset + i + 1)}::jsonb[]` : `$${offset + i + 1}::${t}[]`)).join(", ");
  return `INSERT INTO decisions (${DECISION_COLUMNS})
          SELECT * FROM unnest(${params}) AS d(${DECISION_COLUMNS}) ${where}`;
}

const DECISION_COLUMNS = `decision_id, organization_id, agent_id, nonce, body_sha256, intent, action, outcome, reason, status,
                          evidence_id, policy_versions, graph_version, bundle_digest, integration_id, contract_version, evaluated_at`;

/** The parameters of {@link decisionsInsert}: the decisions and, at the same index, the ids of their evidence records. */
export function decisionsInsertValues(ds: readonly DecisionToWrite[], records: readonly EvidenceRecord[]): unknown[] {
  const col = <T>(f: (d: DecisionToWrite) => T) => ds.map(f);
  return [
    col((d) => d.decision_id), col((d) => d.organization_id), col((d) => d.agent_id), col((d) => d.nonce), col((d) => d.body_sha256),
    toJsonLines(col((d) => d.intent)), col((d) => d.action), col((d) => d.outcome), col((d) => d.reason), col((d) => d.status),
    records.map((r) => r.evidence_id), toJsonLines(col((d) => d.policy_versions)), col((d) => d.graph_version), col((d) => d.bundle_digest),
    col((d) => d.integration_id), col((d) => d.contract_version), col((d) => d.evaluated_at),
  ];
}

/** A signing certificate's agent and organization, its state and its agent's, as the ledger's locking path reads them. */
interface SignerState {
  agent_id: string;
  organization_id: string;
  cert_state: string;
  agent_state: string;
}

/** SQL for decisions. */
export const decisionSql = {
  /**
   * Share-locks the signing agents of a group (ascending agent_id, the order
   * lifecycle transitions lock them in too) and returns each certificate's
   * agent and organization, its current state and its agent's. Held until commit, so a revocation either
   * commits before these decisions (and they see it) or waits for them.
   */
  async lockSigners(q: Queryable, certificateIds: readonly string[]): Promise<Map<string, SignerState>> {
    const { rows } = await q.query<SignerState & { certificate_id: string }>({
      name: "decisions_lock_signers",
      text: `SELECT c.certificate_id, c.agent_id, c.organization_id, c.state AS cert_state, a.state AS agent_state
         FROM certificates c JOIN agents a USING (agent_id)
        WHERE c.certificate_id = ANY($1::text[])
        ORDER BY a.agent_id
        FOR SHARE OF a`,
      values: [certificateIds],
    });
    return new Map(rows.map((r) => [r.certificate_id, r]));
  },

  /**
   * The organization's state, share-locked until commit (the ledger's locking path): a
   * suspension, which takes FOR NO KEY UPDATE, either commits first (and this reads it) or
   * waits for this transaction. Null when there is no such organization.
   */
  async lockOrganizationState(q: Queryable, organizationId: string): Promise<string | null> {
    const { rows } = await q.query<{ state: string }>({
      name: "decisions_lock_organization",
      text: "SELECT state FROM organizations WHERE organization_id = $1 FOR SHARE",
      values: [organizationId],
    });
    return rows[0]?.state ?? null;
  },

  /** Inserts many decisions in one statement (the ledger's locking path); `records` are their evidence, at the same index. */
  async insertMany(q: Queryable, ds: readonly DecisionToWrite[], records: readonly EvidenceRecord[]): Promise<void> {
    await q.query({ name: "decisions_insert_many", text: decisionsInsert(0), values: decisionsInsertValues(ds, records) });
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
    f: DecisionQuery,
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

  /**
   * The latest evaluated decisions with their evaluation's input: the decisions queue index gives
   * the newest first; each one's evidence record is read by its primary key for the input members
   * the Intent path records beside the Intent (null in older records).
   */
  async recordedEvaluations(q: Queryable, organizationId: string, limit: number): Promise<RecordedEvaluation[]> {
    const { rows } = await q.query<RecordedEvaluation>({
      name: "decisions_recorded_evaluations",
      text: `SELECT d.decision_id, d.outcome, d.reason, d.intent, d.evaluated_at,
                    e.payload -> 'now' #>> '{}' AS now, e.payload -> 'agent' AS agent, e.payload -> 'principal' AS principal,
                    json_build_object('principal_id', p.principal_id, 'external_ref', p.external_ref, 'kind', p.kind) AS acting_principal
               FROM (SELECT decision_id, outcome, reason, intent, evaluated_at, evidence_id, agent_id FROM decisions
                      WHERE organization_id = $1 AND bundle_digest <> ''
                      ORDER BY evaluated_at DESC, decision_id DESC LIMIT $2) d
               JOIN LATERAL (SELECT document::jsonb -> 'payload' AS payload FROM evidence_records WHERE evidence_id = d.evidence_id) e ON true
               JOIN agents a ON a.agent_id = d.agent_id
               JOIN principals p ON p.principal_id = a.acting_for_principal_id
              ORDER BY d.evaluated_at DESC, d.decision_id DESC`,
      values: [organizationId, limit],
    });
    return rows.map((r) => ({ ...r, agent: r.agent ?? null, principal: r.principal ?? null, now: r.now ?? null }));
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
      text: `SELECT r.i::int AS i, c.state AS cert_state, a.state AS agent_state, o.state AS organization_state,
              h.bundle_digest, h.policy_versions, h.graph_version,
              (SELECT row_to_json(d) FROM decisions d WHERE d.agent_id = c.agent_id AND d.nonce = r.nonce) AS prior,
              ia.integration_id, cv.version AS contract_version, cv.resource_path, cv.context_bindings, cv.field_types
         FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS r(certificate_id, nonce, action, i)
         JOIN certificates c ON c.certificate_id = r.certificate_id
         JOIN agents a ON a.agent_id = c.agent_id
         JOIN organizations o ON o.organization_id = c.organization_id
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

/** The DecisionStore on Postgres. */
export class PostgresDecisionStore implements DecisionStore {
  constructor(
    private readonly db: Database,
    private readonly chain: EvidenceChain,
  ) {}

  get(organizationId: string, decisionId: string): Promise<DecisionRow | null> {
    return decisionSql.get(this.db.pool, organizationId, decisionId);
  }

  getMany(keys: readonly OrganizationKey[]): Promise<(DecisionRow | null)[]> {
    return decisionSql.getMany(this.db.pool, keys);
  }

  byNonce(agentId: string, nonce: string): Promise<DecisionRow | null> {
    return decisionSql.byNonce(this.db.pool, agentId, nonce);
  }

  list(organizationId: string, query: DecisionQuery): Promise<DecisionRow[]> {
    return decisionSql.list(this.db.pool, organizationId, query);
  }

  intentContexts(lookups: readonly IntentLookup[]): Promise<(IntentContext | null)[]> {
    return decisionSql.intentContexts(this.db.pool, lookups);
  }

  recordedEvaluations(organizationId: string, limit: number): Promise<RecordedEvaluation[]> {
    return decisionSql.recordedEvaluations(this.db.pool, organizationId, limit);
  }

  review(organizationId: string, decisionId: string, step: (current: DecisionRow) => ReviewChange): Promise<DecisionRow> {
    return this.db.transaction(async (tx) => {
      const current = await decisionSql.get(tx, organizationId, decisionId, true);
      if (!current) throw new NotFoundError("Decision");
      const change = step(current);
      await decisionSql.setReview(tx, decisionId, change.status, change.resolution, change.approvals);
      await this.chain.append(tx, [{ organizationId, kind: change.evidence.kind, subjectId: decisionId, payload: change.evidence.payload }]);
      return { ...current, status: change.status, resolution: change.resolution, approvals: change.approvals };
    });
  }
}
