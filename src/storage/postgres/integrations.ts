import type { Queryable } from "./database.js";

/** An integration row with its contract versions and adapters. */
export interface IntegrationRow {
  integration_id: string;
  organization_id: string;
  name: string;
  actions: string[];
  state: "active" | "suspended" | "revoked";
  created_at: Date;
}

/** A contract version row. */
export interface ContractVersionRow {
  integration_id: string;
  version: number;
  state: "proposed" | "active" | "superseded";
  resource_path: string;
  context_bindings: Record<string, string>;
  author: string;
  approver: string | null;
  created_at: Date;
}

/** An adapter row. */
export interface AdapterRow {
  adapter_id: string;
  integration_id: string;
  name: string;
  public_key: string;
  state: "active" | "suspended" | "revoked";
  role: "adapter" | "destination";
  created_at: Date;
}

/** SQL for integrations, contracts and adapters. */
export const integrationStore = {
  /** Inserts an integration and claims its actions; a unique violation on integration_actions_pkey means an action is taken. */
  async insert(q: Queryable, i: Omit<IntegrationRow, "state" | "created_at">): Promise<void> {
    await q.query("INSERT INTO integrations (integration_id, organization_id, name, actions) VALUES ($1, $2, $3, $4)", [i.integration_id, i.organization_id, i.name, i.actions]);
    await q.query(
      "INSERT INTO integration_actions (organization_id, action, integration_id) SELECT $1, unnest($2::text[]), $3",
      [i.organization_id, i.actions, i.integration_id],
    );
  },

  /** Integrations of the organization (one when `id` is given). */
  async list(q: Queryable, organizationId: string, id?: string): Promise<IntegrationRow[]> {
    const { rows } = await q.query<IntegrationRow>(
      "SELECT * FROM integrations WHERE organization_id = $1 AND ($2::text IS NULL OR integration_id = $2) ORDER BY created_at, integration_id",
      [organizationId, id ?? null],
    );
    return rows;
  },

  /** Contract versions of these integrations. */
  async contracts(q: Queryable, integrationIds: readonly string[]): Promise<ContractVersionRow[]> {
    const { rows } = await q.query<ContractVersionRow>("SELECT * FROM contract_versions WHERE integration_id = ANY($1) ORDER BY integration_id, version", [integrationIds]);
    return rows;
  },

  /** Adapters of these integrations. */
  async adapters(q: Queryable, integrationIds: readonly string[]): Promise<AdapterRow[]> {
    const { rows } = await q.query<AdapterRow>(
      "SELECT adapter_id, integration_id, name, public_key, state, role, created_at FROM adapters WHERE integration_id = ANY($1) ORDER BY created_at",
      [integrationIds],
    );
    return rows;
  },

  /** Sets the integration's state if it is currently in `from`; false otherwise. */
  async setState(q: Queryable, organizationId: string, id: string, from: string, to: string): Promise<boolean> {
    const r = await q.query("UPDATE integrations SET state = $4 WHERE organization_id = $1 AND integration_id = $2 AND state = $3", [organizationId, id, from, to]);
    return r.rowCount === 1;
  },

  /** Adds the next contract version as proposed. */
  async insertContract(q: Queryable, c: { integration_id: string; resource_path: string; context_bindings: Record<string, string>; author: string }): Promise<ContractVersionRow> {
    await q.query("SELECT 1 FROM integrations WHERE integration_id = $1 FOR UPDATE", [c.integration_id]);
    const { rows } = await q.query<ContractVersionRow>(
      `INSERT INTO contract_versions (integration_id, version, state, resource_path, context_bindings, author)
       SELECT $1, coalesce(max(version), 0) + 1, 'proposed', $2, $3, $4 FROM contract_versions WHERE integration_id = $1 RETURNING *`,
      [c.integration_id, c.resource_path, JSON.stringify(c.context_bindings), c.author],
    );
    return rows[0]!;
  },

  /** Locks one contract version, or null. */
  async lockContract(q: Queryable, integrationId: string, version: number): Promise<ContractVersionRow | null> {
    const { rows } = await q.query<ContractVersionRow>("SELECT * FROM contract_versions WHERE integration_id = $1 AND version = $2 FOR UPDATE", [integrationId, version]);
    return rows[0] ?? null;
  },

  /** Makes a contract version active, superseding the previous one. */
  async activateContract(q: Queryable, integrationId: string, version: number, approver: string): Promise<void> {
    await q.query("UPDATE contract_versions SET state = 'superseded' WHERE integration_id = $1 AND state = 'active'", [integrationId]);
    await q.query("UPDATE contract_versions SET state = 'active', approver = $3 WHERE integration_id = $1 AND version = $2", [integrationId, version, approver]);
  },

  /** Registers an adapter; a unique violation means the key is taken. */
  async insertAdapter(
    q: Queryable,
    a: { adapter_id: string; integration_id: string; organization_id: string; name: string; public_key: string; role: AdapterRow["role"] },
  ): Promise<AdapterRow> {
    const { rows } = await q.query<AdapterRow>(
      `INSERT INTO adapters (adapter_id, integration_id, organization_id, name, public_key, role) VALUES ($1, $2, $3, $4, $5, $6)
       RETURNING adapter_id, integration_id, name, public_key, state, role, created_at`,
      [a.adapter_id, a.integration_id, a.organization_id, a.name, a.public_key, a.role],
    );
    return rows[0]!;
  },

  /** Moves an adapter of the integration from one of `from` to `to`; null when it is missing or in another state. */
  async setAdapterState(q: Queryable, organizationId: string, integrationId: string, adapterId: string, from: readonly string[], to: string): Promise<AdapterRow | null> {
    const { rows } = await q.query<AdapterRow>(
      `UPDATE adapters SET state = $5 WHERE organization_id = $1 AND integration_id = $2 AND adapter_id = $3 AND state = ANY($4::text[])
       RETURNING adapter_id, integration_id, name, public_key, state, role, created_at`,
      [organizationId, integrationId, adapterId, from, to],
    );
    return rows[0] ?? null;
  },

  /** An adapter (any organization) by id, with its organization, for signature checks. */
  async adapter(q: Queryable, adapterId: string): Promise<(AdapterRow & { organization_id: string }) | null> {
    const { rows } = await q.query<AdapterRow & { organization_id: string }>("SELECT * FROM adapters WHERE adapter_id = $1", [adapterId]);
    return rows[0] ?? null;
  },
};
