import type { Cursor } from "../../base/pagination.js";
import type { Queryable } from "./database.js";

/** Agent states (spec "Agent states"). */
export type AgentState = "registered" | "active" | "suspended" | "revoked" | "retired";

/** An agent row with its active (or, once revoked, last) certificate id. */
export interface AgentRow {
  agent_id: string;
  organization_id: string;
  name: string;
  acting_for_principal_id: string;
  public_key: string;
  owner: string;
  business_unit: string;
  environment: string;
  state: AgentState;
  created_at: Date;
  updated_at: Date;
  last_heartbeat_at: Date | null;
  certificate_id: string;
}

/** A certificate with its agent's state, as the signature check needs it. */
export interface CertificateRow {
  certificate_id: string;
  agent_id: string;
  organization_id: string;
  public_key: string;
  state: "active" | "replaced" | "revoked";
  agent_state: AgentState;
  acting_for_principal_id: string;
  /** The acting principal, as policy evaluation needs it. */
  principal_external_ref: string | null;
  principal_kind: string;
  /** The organization's policy head at read time (null before any bundle exists). */
  bundle_digest: string | null;
  policy_versions: Record<string, number> | null;
  graph_version: number | null;
}

const SELECT_AGENT = `
  SELECT a.*, c.certificate_id FROM agents a
  JOIN LATERAL (SELECT certificate_id FROM certificates c WHERE c.agent_id = a.agent_id
                ORDER BY (c.state = 'active') DESC, c.created_at DESC LIMIT 1) c ON true`;

/** SQL for agents and certificates. */
export const agentStore = {
  /** Inserts an agent and its first certificate; a unique violation on certificates_public_key_key means the key is taken. */
  async insert(
    q: Queryable,
    a: Omit<AgentRow, "created_at" | "updated_at" | "last_heartbeat_at" | "state">,
  ): Promise<void> {
    await q.query(
      `INSERT INTO agents (agent_id, organization_id, name, acting_for_principal_id, public_key, owner, business_unit, environment, state)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'registered')`,
      [a.agent_id, a.organization_id, a.name, a.acting_for_principal_id, a.public_key, a.owner, a.business_unit, a.environment],
    );
    await q.query(
      "INSERT INTO certificates (certificate_id, agent_id, organization_id, public_key, state) VALUES ($1, $2, $3, $4, 'active')",
      [a.certificate_id, a.agent_id, a.organization_id, a.public_key],
    );
  },

  /** The agent if it belongs to the organization, else null. */
  async get(q: Queryable, organizationId: string, agentId: string): Promise<AgentRow | null> {
    const { rows } = await q.query<AgentRow>(`${SELECT_AGENT} WHERE a.organization_id = $1 AND a.agent_id = $2`, [organizationId, agentId]);
    return rows[0] ?? null;
  },

  /** A page in (created_at, agent_id) order after `after`. */
  async list(q: Queryable, organizationId: string, after: Cursor | null, limit: number): Promise<AgentRow[]> {
    const { rows } = await q.query<AgentRow>(
      `${SELECT_AGENT} WHERE a.organization_id = $1
         AND ($2::timestamptz IS NULL OR (a.created_at, a.agent_id) > ($2, $3))
       ORDER BY a.created_at, a.agent_id LIMIT $4`,
      [organizationId, after?.createdAt ?? null, after?.id ?? "", limit],
    );
    return rows;
  },

  /** The certificate holding this public key (any organization, any state), or null. */
  async certificateByKey(q: Queryable, publicKey: string): Promise<Pick<CertificateRow, "certificate_id" | "agent_id" | "organization_id" | "state"> | null> {
    const { rows } = await q.query<CertificateRow>(
      "SELECT c.certificate_id, c.agent_id, c.organization_id, c.state FROM certificates c WHERE c.public_key = $1",
      [publicKey],
    );
    return rows[0] ?? null;
  },

  /** A certificate by id with its agent's state, or null. */
  async certificate(q: Queryable, certificateId: string): Promise<CertificateRow | null> {
    // One round trip gives the signed-request path everything it needs before evaluation.
    const { rows } = await q.query<CertificateRow>({
      name: "certificate_with_signer",
      text: `SELECT c.certificate_id, c.agent_id, c.organization_id, c.public_key, c.state, a.state AS agent_state, a.acting_for_principal_id,
              p.external_ref AS principal_external_ref, p.kind AS principal_kind,
              h.bundle_digest, h.policy_versions, h.graph_version
         FROM certificates c JOIN agents a USING (agent_id) JOIN principals p ON p.principal_id = a.acting_for_principal_id
         LEFT JOIN policy_heads h ON h.organization_id = c.organization_id
        WHERE c.certificate_id = $1`,
      values: [certificateId],
    });
    return rows[0] ?? null;
  },

  /**
   * Moves the agent to `to` only if its current state is in `from` (a
   * conditional update: concurrent transitions serialize on the row and each
   * re-checks the state it finds). Returns the previous state, or null when
   * the agent is missing or in another state.
   */
  async transition(q: Queryable, organizationId: string, agentId: string, from: readonly AgentState[], to: AgentState): Promise<AgentState | null> {
    const { rows } = await q.query<{ previous: AgentState }>(
      `UPDATE agents a SET state = $4, updated_at = now()
         FROM (SELECT agent_id, state AS previous FROM agents WHERE organization_id = $1 AND agent_id = $2 FOR UPDATE) old
        WHERE a.agent_id = old.agent_id AND old.previous = ANY($3::text[])
        RETURNING old.previous`,
      [organizationId, agentId, from, to],
    );
    return rows[0]?.previous ?? null;
  },

  /** Permanently revokes every certificate of the agent still in use. */
  async revokeCertificates(q: Queryable, agentId: string): Promise<void> {
    await q.query("UPDATE certificates SET state = 'revoked', ended_at = now() WHERE agent_id = $1 AND state = 'active'", [agentId]);
  },

  /** Replaces the agent's active certificate with a new one for `publicKey`. */
  async rotate(q: Queryable, agentId: string, organizationId: string, certificateId: string, publicKey: string): Promise<void> {
    await q.query("UPDATE certificates SET state = 'replaced', ended_at = now() WHERE agent_id = $1 AND state = 'active'", [agentId]);
    await q.query(
      "INSERT INTO certificates (certificate_id, agent_id, organization_id, public_key, state) VALUES ($1, $2, $3, $4, 'active')",
      [certificateId, agentId, organizationId, publicKey],
    );
    await q.query("UPDATE agents SET public_key = $2, updated_at = now() WHERE agent_id = $1", [agentId, publicKey]);
  },

  /** Locks the agent row for the transaction and returns it, or null. */
  async lock(q: Queryable, organizationId: string, agentId: string): Promise<AgentRow | null> {
    const { rows } = await q.query<AgentRow>(
      `${SELECT_AGENT} WHERE a.organization_id = $1 AND a.agent_id = $2 FOR UPDATE OF a`,
      [organizationId, agentId],
    );
    return rows[0] ?? null;
  },

  /** Sets ownership labels. */
  async setLabels(q: Queryable, agentId: string, labels: { owner: string; business_unit: string; environment: string }): Promise<void> {
    await q.query("UPDATE agents SET owner = $2, business_unit = $3, environment = $4, updated_at = now() WHERE agent_id = $1", [
      agentId,
      labels.owner,
      labels.business_unit,
      labels.environment,
    ]);
  },

  /**
   * Records a heartbeat if the agent is still active and `sentAt` is later than
   * the last accepted heartbeat's; returns null otherwise (see `state` to tell which).
   */
  async heartbeat(q: Queryable, agentId: string, sentAt: Date): Promise<Date | null> {
    const { rows } = await q.query<{ last_heartbeat_at: Date }>(
      `UPDATE agents SET last_heartbeat_at = date_trunc('milliseconds', now()), last_heartbeat_sent_at = $2
        WHERE agent_id = $1 AND state = 'active' AND (last_heartbeat_sent_at IS NULL OR last_heartbeat_sent_at < $2)
        RETURNING last_heartbeat_at`,
      [agentId, sentAt],
    );
    return rows[0]?.last_heartbeat_at ?? null;
  },

  /** The agent's current state, or null. */
  async state(q: Queryable, agentId: string): Promise<AgentState | null> {
    const { rows } = await q.query<{ state: AgentState }>("SELECT state FROM agents WHERE agent_id = $1", [agentId]);
    return rows[0]?.state ?? null;
  },
};
