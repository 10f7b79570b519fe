import type { CapabilityDependencies, CapabilityRow, CapabilityStore, ConsumeRefusal, NewCapability } from "../capabilities.js";
import { NotFoundError } from "../errors.js";
import type { OrganizationKey } from "../keys.js";
import { rowsByKey, type Database, type Queryable } from "./database.js";

const CAPABILITY_COLUMNS = "capability_id, organization_id, decision_id, agent_id, integration_id, audience, issued_by, action, resource, constraints, issued_at, expires_at, token_digest";

/** The INSERT of capabilities as 13 array parameters numbered from `offset` + 1, as the rows `c`; `where` conditions it. */
export function capabilitiesInsert(offset: number, where = ""): string {
  const types = ["text", "text", "text", "text", "text", "text", "text", "text", "text", "jsonb", "timestamptz", "timestamptz", "text"];
  const params = types.map((t, i) => `$${offset + i + 1}::${t}[]`).join(", ");
  return `INSERT INTO capabilities (${CAPABILITY_COLUMNS}) SELECT * FROM unnest(${params}) AS c(${CAPABILITY_COLUMNS}) ${where}`;
}

/** The parameters of {@link capabilitiesInsert}. */
export function capabilitiesInsertValues(cs: readonly NewCapability[]): unknown[] {
  const col = <T>(f: (c: NewCapability) => T) => cs.map(f);
  return [
    col((c) => c.capability_id), col((c) => c.organization_id), col((c) => c.decision_id), col((c) => c.agent_id), col((c) => c.integration_id),
    col((c) => c.audience), col((c) => c.issued_by), col((c) => c.action), col((c) => c.resource), col((c) => JSON.stringify(c.constraints)),
    col((c) => c.issued_at), col((c) => c.expires_at), col((c) => c.token_digest),
  ];
}

/** Whether the organization `id` names is active. */
export const ORGANIZATION_ACTIVE = (id: string) => `EXISTS (SELECT 1 FROM organizations o WHERE o.organization_id = ${id} AND o.state = 'active')`;

/**
 * When capability `c` may be consumed now as far as it alone goes: unexpired, not yet
 * consumed, and its agent and any bound integration (and that integration's adapters) still
 * active. Its organization is checked apart ({@link CONSUMABLE}), once per organization where
 * a statement takes many capabilities.
 */
export const CONSUMABLE_IN_ORGANIZATION = `c.consumed_at IS NULL AND c.expires_at > now()
  AND EXISTS (SELECT 1 FROM agents a WHERE a.agent_id = c.agent_id AND a.state = 'active')
  AND (c.integration_id IS NULL OR EXISTS (
        SELECT 1 FROM integrations i WHERE i.integration_id = c.integration_id AND i.state = 'active'
          AND NOT EXISTS (SELECT 1 FROM adapters ad WHERE ad.integration_id = i.integration_id AND ad.state <> 'active' AND ad.role = 'adapter')))`;

/** When capability `c` may be consumed now, its organization being active too. */
const CONSUMABLE = `${CONSUMABLE_IN_ORGANIZATION} AND ${ORGANIZATION_ACTIVE("c.organization_id")}`;

/** SQL for capabilities. */
export const capabilitySql = {
  /** Inserts in one statement (the locking path); a unique violation on capabilities_decision_id_key means a decision already had one. */
  async insertMany(q: Queryable, cs: readonly NewCapability[]): Promise<void> {
    await q.query({ name: "capabilities_insert_many", text: capabilitiesInsert(0), values: capabilitiesInsertValues(cs) });
  },

  /** The capability of the organization, or null. */
  async get(q: Queryable, organizationId: string, capabilityId: string): Promise<CapabilityRow | null> {
    const { rows } = await q.query<CapabilityRow>("SELECT * FROM capabilities WHERE organization_id = $1 AND capability_id = $2", [organizationId, capabilityId]);
    return rows[0] ?? null;
  },

  /** Many capabilities by (organization, id) in one query; one entry per key, in order, null when absent. */
  getMany(q: Queryable, keys: readonly OrganizationKey[]): Promise<(CapabilityRow | null)[]> {
    return rowsByKey<CapabilityRow>(q, "capabilities", "capability_id", keys);
  },

  /** The decision's capability (there is at most one), or null. */
  async byDecision(q: Queryable, organizationId: string, decisionId: string): Promise<CapabilityRow | null> {
    const { rows } = await q.query<CapabilityRow>("SELECT * FROM capabilities WHERE organization_id = $1 AND decision_id = $2", [organizationId, decisionId]);
    return rows[0] ?? null;
  },

  /**
   * Consumes in ONE statement each listed capability that is unexpired, whose
   * agent, organization and any bound integration (and its adapters) are still
   * active, and that is not yet consumed. Concurrent consumes serialize on the
   * rows; exactly one ever sees `consumed_at IS NULL`. Returns the consumed rows.
   */
  async consume(q: Queryable, capabilityIds: readonly string[], by: readonly string[]): Promise<CapabilityRow[]> {
    const { rows } = await q.query<CapabilityRow>({
      name: "capabilities_consume",
      text: `UPDATE capabilities c SET consumed_at = date_trunc('milliseconds', now()), consumed_by = w.by
               FROM (SELECT DISTINCT ON (id) id, by FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS w(id, by, n) ORDER BY id, n) w
              WHERE c.capability_id = w.id AND ${CONSUMABLE}
              RETURNING c.*`,
      values: [capabilityIds, by],
    });
    return rows;
  },

  /** Why `consume` refused, checked in the order of docs/architecture.md, Consume paths (expiry, live dependencies, single use). */
  async refusal(q: Queryable, capabilityId: string): Promise<ConsumeRefusal> {
    const { rows } = await q.query<{ expired: boolean; inactive: boolean; consumed: boolean }>(
      `SELECT c.expires_at <= now() AS expired,
              NOT (EXISTS (SELECT 1 FROM agents a WHERE a.agent_id = c.agent_id AND a.state = 'active')
                   AND EXISTS (SELECT 1 FROM organizations o WHERE o.organization_id = c.organization_id AND o.state = 'active')
                   AND (c.integration_id IS NULL OR EXISTS (
                        SELECT 1 FROM integrations i WHERE i.integration_id = c.integration_id AND i.state = 'active'
                          AND NOT EXISTS (SELECT 1 FROM adapters ad WHERE ad.integration_id = i.integration_id AND ad.state <> 'active' AND ad.role = 'adapter')))) AS inactive,
              c.consumed_at IS NOT NULL AS consumed
         FROM capabilities c WHERE c.capability_id = $1`,
      [capabilityId],
    );
    const r = rows[0]!;
    return r.expired ? "expired" : r.inactive ? "dependency_inactive" : "consumed";
  },

  /** The live states a capability depends on, as the Redis mirror stores them. */
  async liveStates(q: Queryable, capabilityId: string): Promise<CapabilityDependencies | null> {
    const { rows } = await q.query<CapabilityDependencies>(
      `SELECT o.state AS organization, a.state AS agent,
              CASE WHEN c.integration_id IS NULL THEN NULL
                   WHEN i.state = 'active' AND NOT EXISTS (SELECT 1 FROM adapters ad WHERE ad.integration_id = i.integration_id AND ad.state <> 'active' AND ad.role = 'adapter')
                   THEN 'active' ELSE 'inactive' END AS integration
         FROM capabilities c JOIN organizations o USING (organization_id) JOIN agents a ON a.agent_id = c.agent_id
         LEFT JOIN integrations i ON i.integration_id = c.integration_id
        WHERE c.capability_id = $1`,
      [capabilityId],
    );
    return rows[0] ?? null;
  },

  /** Contract bindings of a decision's integration contract version, or null. */
  async contractBindings(q: Queryable, integrationId: string, version: number): Promise<{ resource_path: string; context_bindings: Record<string, string> } | null> {
    const { rows } = await q.query("SELECT resource_path, context_bindings FROM contract_versions WHERE integration_id = $1 AND version = $2", [integrationId, version]);
    return rows[0] ?? null;
  },
};

/** The CapabilityStore on Postgres. */
export class PostgresCapabilityStore implements CapabilityStore {
  constructor(private readonly db: Database) {}

  get(organizationId: string, capabilityId: string): Promise<CapabilityRow | null> {
    return capabilitySql.get(this.db.pool, organizationId, capabilityId);
  }

  getMany(keys: readonly OrganizationKey[]): Promise<(CapabilityRow | null)[]> {
    return capabilitySql.getMany(this.db.pool, keys);
  }

  byDecision(organizationId: string, decisionId: string): Promise<CapabilityRow | null> {
    return capabilitySql.byDecision(this.db.pool, organizationId, decisionId);
  }

  async dependencies(capabilityId: string): Promise<CapabilityDependencies> {
    const states = await capabilitySql.liveStates(this.db.pool, capabilityId);
    if (!states) throw new NotFoundError("Capability");
    return states;
  }

  contractBindings(integrationId: string, version: number): Promise<{ resource_path: string; context_bindings: Record<string, string> } | null> {
    return capabilitySql.contractBindings(this.db.pool, integrationId, version);
  }
}
