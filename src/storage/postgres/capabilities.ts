import type { EvidenceRecord } from "../../evidence/record.js";
import { rowsByKey, type OrganizationKey, type Queryable } from "./database.js";
import { evidenceInsert, evidenceInsertValues, headMoveCtes, headMoveValues, type HeadMove } from "./evidence.js";

/** A capability row (never the token). */
export interface CapabilityRow {
  capability_id: string;
  organization_id: string;
  decision_id: string;
  agent_id: string;
  integration_id: string | null;
  audience: string;
  issued_by: string;
  action: string;
  resource: string;
  constraints: Record<string, string>;
  issued_at: Date;
  expires_at: Date;
  consumed_at: Date | null;
  consumed_by: string | null;
  /** SHA-256 (hex) of the token as issued; null for capabilities issued before it was kept. */
  token_digest: string | null;
}

/** A capability as issued (not yet consumed). */
export type NewCapability = Omit<CapabilityRow, "consumed_at" | "consumed_by">;

const CAPABILITY_COLUMNS = "capability_id, organization_id, decision_id, agent_id, integration_id, audience, issued_by, action, resource, constraints, issued_at, expires_at, token_digest";

/** The INSERT of capabilities as 13 array parameters numbered from `offset` + 1, as the rows `c`; `where` conditions it. */
function capabilitiesInsert(offset: number, where = ""): string {
  const types = ["text", "text", "text", "text", "text", "text", "text", "text", "text", "jsonb", "timestamptz", "timestamptz", "text"];
  const params = types.map((t, i) => `$${offset + i + 1}::${t}[]`).join(", ");
  return `INSERT INTO capabilities (${CAPABILITY_COLUMNS}) SELECT * FROM unnest(${params}) AS c(${CAPABILITY_COLUMNS}) ${where}`;
}

/** The parameters of {@link capabilitiesInsert}. */
function capabilitiesInsertValues(cs: readonly NewCapability[]): unknown[] {
  const col = <T>(f: (c: NewCapability) => T) => cs.map(f);
  return [
    col((c) => c.capability_id), col((c) => c.organization_id), col((c) => c.decision_id), col((c) => c.agent_id), col((c) => c.integration_id),
    col((c) => c.audience), col((c) => c.issued_by), col((c) => c.action), col((c) => c.resource), col((c) => JSON.stringify(c.constraints)),
    col((c) => c.issued_at), col((c) => c.expires_at), col((c) => c.token_digest),
  ];
}

/** Why a consume did not happen, in the order the checks apply. */
export type ConsumeRefusal = "expired" | "dependency_inactive" | "consumed";

/** Whether the organization `id` names is active. */
const ORGANIZATION_ACTIVE = (id: string) => `EXISTS (SELECT 1 FROM organizations o WHERE o.organization_id = ${id} AND o.state = 'active')`;

/**
 * When capability `c` may be consumed now as far as it alone goes: unexpired, not yet
 * consumed, and its agent and any bound integration (and that integration's adapters) still
 * active. Its organization is checked apart ({@link CONSUMABLE}), once per organization where
 * a statement takes many capabilities.
 */
const CONSUMABLE_IN_ORGANIZATION = `c.consumed_at IS NULL AND c.expires_at > now()
  AND EXISTS (SELECT 1 FROM agents a WHERE a.agent_id = c.agent_id AND a.state = 'active')
  AND (c.integration_id IS NULL OR EXISTS (
        SELECT 1 FROM integrations i WHERE i.integration_id = c.integration_id AND i.state = 'active'
          AND NOT EXISTS (SELECT 1 FROM adapters ad WHERE ad.integration_id = i.integration_id AND ad.state <> 'active' AND ad.role = 'adapter')))`;

/** When capability `c` may be consumed now, its organization being active too. */
const CONSUMABLE = `${CONSUMABLE_IN_ORGANIZATION} AND ${ORGANIZATION_ACTIVE("c.organization_id")}`;

/** SQL for capabilities. */
export const capabilityStore = {
  /** Inserts in one statement (the issue's locking path); a unique violation on capabilities_decision_id_key means a decision already had one. */
  async insertMany(q: Queryable, cs: readonly NewCapability[]): Promise<void> {
    await q.query({ name: "capabilities_insert_many", text: capabilitiesInsert(0), values: capabilitiesInsertValues(cs) });
  },

  /**
   * The issue's usual path, ONE autocommitted statement for capabilities of one or more
   * organizations: for each organization whose chain head is still where its move expects it,
   * inserts its capabilities, stores its evidence records and moves its head on; the other
   * organizations get nothing written. Returns the organizations written. A decision that
   * already has its capability fails the whole statement with a unique violation, as
   * {@link insertMany} does.
   */
  async insertWithEvidence(q: Queryable, moves: readonly HeadMove[], records: readonly EvidenceRecord[], cs: readonly NewCapability[]): Promise<Set<string>> {
    const { rows } = await q.query<{ organization_id: string }>({
      name: "capabilities_insert_with_evidence",
      text: `WITH ${headMoveCtes(21)},
             records AS (${evidenceInsert("WHERE r.organization_id IN (SELECT organization_id FROM head)")}),
             capabilities AS (${capabilitiesInsert(7, "WHERE c.organization_id IN (SELECT organization_id FROM head)")})
             SELECT organization_id FROM head`,
      values: [...evidenceInsertValues(records), ...capabilitiesInsertValues(cs), ...headMoveValues(moves)],
    });
    return new Set(rows.map((r) => r.organization_id));
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

  /**
   * The consume's fast path, ONE autocommitted statement for capabilities of one or more
   * organizations (distinct ids, `consumedAt` as their time): for each organization that is
   * active, whose chain head is still where its move expects it and all of whose listed
   * capabilities are consumable, consumes them, stores its evidence records and moves its head on; the other
   * organizations get nothing written. Returns the ids of the capabilities consumed. The rows are locked (in id
   * order) before the heads (in organization order), as the locking path does, so two such
   * statements never deadlock.
   */
  async consumeWithEvidence(
    q: Queryable,
    moves: readonly HeadMove[],
    records: readonly EvidenceRecord[],
    capabilityIds: readonly string[],
    by: readonly string[],
    organizationIds: readonly string[],
    consumedAt: Date,
  ): Promise<{ capability_id: string; organization_id: string }[]> {
    const { rows } = await q.query<{ capability_id: string; organization_id: string }>({
      name: "capabilities_consume_with_evidence",
      text: `WITH consumable AS (
               SELECT c.capability_id, c.organization_id FROM capabilities c
                WHERE c.capability_id = ANY($8::text[]) AND ${CONSUMABLE_IN_ORGANIZATION}
                ORDER BY c.capability_id
                  FOR UPDATE OF c
             ),
             ${headMoveCtes(
               11,
               `${ORGANIZATION_ACTIVE("m.organization_id")}
                  AND (SELECT count(*) FROM consumable k WHERE k.organization_id = m.organization_id)
                    = (SELECT count(*) FROM unnest($16::text[]) AS o(id) WHERE o.id = m.organization_id)`,
             )},
             records AS (${evidenceInsert("WHERE r.organization_id IN (SELECT organization_id FROM head)")})
             UPDATE capabilities c SET consumed_at = $10, consumed_by = ($9::text[])[array_position($8::text[], c.capability_id)]
              WHERE c.capability_id = ANY($8::text[]) AND c.organization_id IN (SELECT organization_id FROM head)
              RETURNING c.capability_id, c.organization_id`,
      values: [
        ...evidenceInsertValues(records),
        capabilityIds,
        by,
        consumedAt,
        ...headMoveValues(moves),
        organizationIds,
      ],
    });
    return rows;
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

  /** Why `consume` refused, checked in DESIGN §7 order (expiry, live dependencies, single use). */
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
  async liveStates(q: Queryable, capabilityId: string): Promise<{ organization: string; agent: string; integration: string | null }> {
    const { rows } = await q.query<{ organization: string; agent: string; integration: string | null }>(
      `SELECT o.state AS organization, a.state AS agent,
              CASE WHEN c.integration_id IS NULL THEN NULL
                   WHEN i.state = 'active' AND NOT EXISTS (SELECT 1 FROM adapters ad WHERE ad.integration_id = i.integration_id AND ad.state <> 'active' AND ad.role = 'adapter')
                   THEN 'active' ELSE 'inactive' END AS integration
         FROM capabilities c JOIN organizations o USING (organization_id) JOIN agents a ON a.agent_id = c.agent_id
         LEFT JOIN integrations i ON i.integration_id = c.integration_id
        WHERE c.capability_id = $1`,
      [capabilityId],
    );
    return rows[0]!;
  },

  /** Contract bindings of a decision's integration contract version, or null. */
  async contractBindings(q: Queryable, integrationId: string, version: number): Promise<{ resource_path: string; context_bindings: Record<string, string> } | null> {
    const { rows } = await q.query("SELECT resource_path, context_bindings FROM contract_versions WHERE integration_id = $1 AND version = $2", [integrationId, version]);
    return rows[0] ?? null;
  },
};
