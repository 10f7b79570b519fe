import type { Cursor } from "../../base/pagination.js";
import type { AgentRow, AgentState, AgentStore, AgentTransition, CertificateRow, KeyHolder, KeyRotation, LabelChange, NewAgent } from "../agents.js";
import { NotFoundError } from "../errors.js";
import type { EvidenceEntry } from "../evidence.js";
import type { Database, Queryable } from "./database.js";
import type { EvidenceChain } from "./evidence-chain.js";

const SELECT_AGENT = `
  SELECT a.agent_id, a.organization_id, a.name, a.acting_for_principal_id, a.public_key, a.owner, a.business_unit,
         a.environment, a.state, a.created_at, a.updated_at, a.last_heartbeat_at, c.certificate_id
    FROM agents a
  JOIN LATERAL (SELECT certificate_id FROM certificates c WHERE c.agent_id = a.agent_id
                ORDER BY (c.state = 'active') DESC, c.created_at DESC, c.certificate_id DESC LIMIT 1) c ON true`;

/** SQL for agents and certificates. */
const agentSql = {
  /** Inserts an agent and its first certificate; a collision on certificates_public_key_key or public_key_held_by_adapter means the key is taken. */
  async insert(q: Queryable, a: NewAgent): Promise<void> {
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

  /** Whether the organization has the principal. */
  async principalExists(q: Queryable, organizationId: string, principalId: string): Promise<boolean> {
    const { rows } = await q.query("SELECT 1 FROM principals WHERE organization_id = $1 AND principal_id = $2", [organizationId, principalId]);
    return rows.length > 0;
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
  async certificateByKey(q: Queryable, publicKey: string): Promise<KeyHolder | null> {
    const { rows } = await q.query<KeyHolder>(
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
      text: `SELECT c.certificate_id, c.agent_id, c.organization_id, c.public_key, c.state, a.state AS agent_state, o.state AS organization_state,
              a.acting_for_principal_id, p.external_ref AS principal_external_ref, p.kind AS principal_kind,
              h.bundle_digest, h.policy_versions, h.graph_version
         FROM certificates c JOIN agents a USING (agent_id) JOIN principals p ON p.principal_id = a.acting_for_principal_id
         JOIN organizations o ON o.organization_id = c.organization_id
         LEFT JOIN policy_heads h ON h.organization_id = c.organization_id
        WHERE c.certificate_id = $1`,
      values: [certificateId],
    });
    return rows[0] ?? null;
  },

  /** Locks the agent row for the transaction and returns it, or null. */
  async lock(q: Queryable, organizationId: string, agentId: string): Promise<AgentRow | null> {
    const { rows } = await q.query<AgentRow>(
      `${SELECT_AGENT} WHERE a.organization_id = $1 AND a.agent_id = $2 FOR UPDATE OF a`,
      [organizationId, agentId],
    );
    return rows[0] ?? null;
  },

  /** Sets the agent's state. */
  async setState(q: Queryable, agentId: string, state: AgentState): Promise<void> {
    await q.query("UPDATE agents SET state = $2, updated_at = now() WHERE agent_id = $1", [agentId, state]);
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

  /** Sets ownership labels. */
  async setLabels(q: Queryable, agentId: string, labels: { owner: string; business_unit: string; environment: string }): Promise<void> {
    await q.query("UPDATE agents SET owner = $2, business_unit = $3, environment = $4, updated_at = now() WHERE agent_id = $1", [
      agentId,
      labels.owner,
      labels.business_unit,
      labels.environment,
    ]);
  },

  /** Records a heartbeat if the agent is still active and `sentAt` is later than the last accepted one's; null otherwise. */
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

/**
 * The AgentStore on Postgres. Changes lock the agent row first and the evidence chain head
 * last (the lock order every writer keeps).
 */
export class PostgresAgentStore implements AgentStore {
  constructor(
    private readonly db: Database,
    private readonly chain: EvidenceChain,
  ) {}

  get(organizationId: string, agentId: string): Promise<AgentRow | null> {
    return agentSql.get(this.db.pool, organizationId, agentId);
  }

  list(organizationId: string, after: Cursor | null, limit: number): Promise<AgentRow[]> {
    return agentSql.list(this.db.pool, organizationId, after, limit);
  }

  certificateByKey(publicKey: string): Promise<KeyHolder | null> {
    return agentSql.certificateByKey(this.db.pool, publicKey);
  }

  certificate(certificateId: string): Promise<CertificateRow | null> {
    return agentSql.certificate(this.db.pool, certificateId);
  }

  register(agent: NewAgent, evidence: EvidenceEntry): Promise<AgentRow> {
    return this.db.transaction(async (tx) => {
      if (!(await agentSql.principalExists(tx, agent.organization_id, agent.acting_for_principal_id))) throw new NotFoundError("principal");
      await agentSql.insert(tx, agent);
      const row = (await agentSql.get(tx, agent.organization_id, agent.agent_id))!;
      await this.chain.append(tx, [evidence]);
      return row;
    });
  }

  transition(organizationId: string, agentId: string, step: (current: AgentRow) => AgentTransition): Promise<AgentRow> {
    return this.db.transaction(async (tx) => {
      const current = await this.mustLock(tx, organizationId, agentId);
      const change = step(current);
      await agentSql.setState(tx, agentId, change.state);
      if (change.revokeCertificates) await agentSql.revokeCertificates(tx, agentId);
      await this.chain.append(tx, [change.evidence]);
      return (await agentSql.get(tx, organizationId, agentId))!;
    });
  }

  rotateKey(organizationId: string, agentId: string, step: (current: AgentRow) => KeyRotation): Promise<AgentRow> {
    return this.db.transaction(async (tx) => {
      const current = await this.mustLock(tx, organizationId, agentId);
      const change = step(current);
      await agentSql.rotate(tx, agentId, organizationId, change.certificateId, change.publicKey);
      await this.chain.append(tx, [change.evidence]);
      return (await agentSql.get(tx, organizationId, agentId))!;
    });
  }

  relabel(organizationId: string, agentId: string, step: (current: AgentRow) => LabelChange | null): Promise<AgentRow> {
    return this.db.transaction(async (tx) => {
      const current = await this.mustLock(tx, organizationId, agentId);
      const change = step(current);
      if (change === null) return current;
      await agentSql.setLabels(tx, agentId, change.labels);
      await this.chain.append(tx, [change.evidence]);
      return (await agentSql.get(tx, organizationId, agentId))!;
    });
  }

  heartbeat(agentId: string, sentAt: Date): Promise<Date | null> {
    return agentSql.heartbeat(this.db.pool, agentId, sentAt);
  }

  state(agentId: string): Promise<AgentState | null> {
    return agentSql.state(this.db.pool, agentId);
  }

  private async mustLock(tx: Queryable, organizationId: string, agentId: string): Promise<AgentRow> {
    const row = await agentSql.lock(tx, organizationId, agentId);
    if (!row) throw new NotFoundError("agent");
    return row;
  }
}
