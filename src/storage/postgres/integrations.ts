import { NotFoundError } from "../errors.js";
import type {
  AdapterRow,
  ContractApproval,
  ContractVersionRow,
  IntegrationRow,
  IntegrationStore,
  NewAdapter,
  NewIntegration,
  ProposedContract,
  ReporterRow,
  StateChange,
} from "../integrations.js";
import type { EvidenceEntry } from "../evidence.js";
import type { Database, Queryable } from "./database.js";
import type { EvidenceChain } from "./evidence-chain.js";

const ADAPTER_COLUMNS = "adapter_id, integration_id, name, public_key, state, role, created_at";

/** SQL for integrations, contracts and adapters. */
const integrationSql = {
  /** Inserts an integration and claims its actions; a collision on integration_actions_pkey means an action is taken. */
  async insert(q: Queryable, i: NewIntegration): Promise<void> {
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

  /** Locks the organization's integration and returns it, or null. */
  async lock(q: Queryable, organizationId: string, id: string): Promise<IntegrationRow | null> {
    const { rows } = await q.query<IntegrationRow>("SELECT * FROM integrations WHERE organization_id = $1 AND integration_id = $2 FOR UPDATE", [organizationId, id]);
    return rows[0] ?? null;
  },

  /** Contract versions of these integrations. */
  async contracts(q: Queryable, integrationIds: readonly string[]): Promise<ContractVersionRow[]> {
    const { rows } = await q.query<ContractVersionRow>("SELECT * FROM contract_versions WHERE integration_id = ANY($1) ORDER BY integration_id, version", [integrationIds]);
    return rows;
  },

  /** Adapters of these integrations. */
  async adapters(q: Queryable, integrationIds: readonly string[]): Promise<AdapterRow[]> {
    const { rows } = await q.query<AdapterRow>(`SELECT ${ADAPTER_COLUMNS} FROM adapters WHERE integration_id = ANY($1) ORDER BY created_at, adapter_id`, [integrationIds]);
    return rows;
  },

  /** Sets the integration's state and returns it. */
  async setState(q: Queryable, id: string, to: string): Promise<IntegrationRow> {
    const { rows } = await q.query<IntegrationRow>("UPDATE integrations SET state = $2 WHERE integration_id = $1 RETURNING *", [id, to]);
    return rows[0]!;
  },

  /** Adds the next contract version as proposed (the integration row is locked first, so versions never collide). */
  async insertContract(q: Queryable, c: ProposedContract): Promise<ContractVersionRow> {
    const { rows } = await q.query<ContractVersionRow>(
      `INSERT INTO contract_versions (integration_id, version, state, resource_path, context_bindings, field_types, author)
       SELECT $1, coalesce(max(version), 0) + 1, 'proposed', $2, $3, $4, $5 FROM contract_versions WHERE integration_id = $1 RETURNING *`,
      [c.integration_id, c.resource_path, JSON.stringify(c.context_bindings), JSON.stringify(c.field_types), c.author],
    );
    return rows[0]!;
  },

  /** Locks one contract version of the organization's integration, or null. */
  async lockContract(q: Queryable, organizationId: string, integrationId: string, version: number): Promise<ContractVersionRow | null> {
    const { rows } = await q.query<ContractVersionRow>(
      `SELECT cv.* FROM contract_versions cv JOIN integrations i USING (integration_id)
        WHERE i.organization_id = $1 AND cv.integration_id = $2 AND cv.version = $3 FOR UPDATE OF cv`,
      [organizationId, integrationId, version],
    );
    return rows[0] ?? null;
  },

  /** Makes a contract version active, superseding the previous one. */
  async activateContract(q: Queryable, integrationId: string, version: number, approver: string): Promise<void> {
    await q.query("UPDATE contract_versions SET state = 'superseded' WHERE integration_id = $1 AND state = 'active'", [integrationId]);
    await q.query("UPDATE contract_versions SET state = 'active', approver = $3 WHERE integration_id = $1 AND version = $2", [integrationId, version, approver]);
  },

  /** Registers an adapter; a collision means the key is taken. */
  async insertAdapter(q: Queryable, a: NewAdapter): Promise<AdapterRow> {
    const { rows } = await q.query<AdapterRow>(
      `INSERT INTO adapters (adapter_id, integration_id, organization_id, name, public_key, role) VALUES ($1, $2, $3, $4, $5, $6)
       RETURNING ${ADAPTER_COLUMNS}`,
      [a.adapter_id, a.integration_id, a.organization_id, a.name, a.public_key, a.role],
    );
    return rows[0]!;
  },

  /** Locks an adapter of the organization's integration and returns it, or null. */
  async lockAdapter(q: Queryable, organizationId: string, integrationId: string, adapterId: string): Promise<AdapterRow | null> {
    const { rows } = await q.query<AdapterRow>(
      `SELECT ${ADAPTER_COLUMNS} FROM adapters WHERE organization_id = $1 AND integration_id = $2 AND adapter_id = $3 FOR UPDATE`,
      [organizationId, integrationId, adapterId],
    );
    return rows[0] ?? null;
  },

  /** Sets an adapter's state and returns it. */
  async setAdapterState(q: Queryable, adapterId: string, to: string): Promise<AdapterRow> {
    const { rows } = await q.query<AdapterRow>(`UPDATE adapters SET state = $2 WHERE adapter_id = $1 RETURNING ${ADAPTER_COLUMNS}`, [adapterId, to]);
    return rows[0]!;
  },

  /** An adapter (any organization) by id, with its organization, for signature checks. */
  async adapter(q: Queryable, adapterId: string): Promise<ReporterRow | null> {
    const { rows } = await q.query<ReporterRow>("SELECT * FROM adapters WHERE adapter_id = $1", [adapterId]);
    return rows[0] ?? null;
  },
};

/**
 * The IntegrationStore on Postgres. Changes lock their row first and the evidence chain head
 * last (the lock order every writer keeps).
 */
export class PostgresIntegrationStore implements IntegrationStore {
  constructor(
    private readonly db: Database,
    private readonly chain: EvidenceChain,
  ) {}

  create(integration: NewIntegration): Promise<void> {
    return this.db.transaction((tx) => integrationSql.insert(tx, integration));
  }

  list(organizationId: string, integrationId?: string): Promise<IntegrationRow[]> {
    return integrationSql.list(this.db.pool, organizationId, integrationId);
  }

  contracts(integrationIds: readonly string[]): Promise<ContractVersionRow[]> {
    return integrationSql.contracts(this.db.pool, integrationIds);
  }

  adapters(integrationIds: readonly string[]): Promise<AdapterRow[]> {
    return integrationSql.adapters(this.db.pool, integrationIds);
  }

  adapter(adapterId: string): Promise<ReporterRow | null> {
    return integrationSql.adapter(this.db.pool, adapterId);
  }

  setState(organizationId: string, integrationId: string, step: (current: IntegrationRow) => StateChange<IntegrationRow["state"]>): Promise<IntegrationRow> {
    return this.db.transaction(async (tx) => {
      const current = await integrationSql.lock(tx, organizationId, integrationId);
      if (!current) throw new NotFoundError("integration");
      const change = step(current);
      const row = await integrationSql.setState(tx, integrationId, change.state);
      await this.chain.append(tx, [change.evidence]);
      return row;
    });
  }

  proposeContract(organizationId: string, contract: ProposedContract): Promise<ContractVersionRow> {
    return this.db.transaction(async (tx) => {
      if (!(await integrationSql.lock(tx, organizationId, contract.integration_id))) throw new NotFoundError("integration");
      return integrationSql.insertContract(tx, contract);
    });
  }

  approveContract(organizationId: string, integrationId: string, version: number, step: (current: ContractVersionRow) => ContractApproval): Promise<ContractVersionRow> {
    return this.db.transaction(async (tx) => {
      // The integration first, as proposals lock it: approvals of two of its versions then take
      // turns, instead of both superseding the same active one and one failing on the
      // one-active key.
      if (!(await integrationSql.lock(tx, organizationId, integrationId))) throw new NotFoundError("contract version");
      const current = await integrationSql.lockContract(tx, organizationId, integrationId, version);
      if (!current) throw new NotFoundError("contract version");
      const approval = step(current);
      await integrationSql.activateContract(tx, integrationId, version, approval.approver);
      await this.chain.append(tx, [approval.evidence]);
      return { ...current, state: "active", approver: approval.approver };
    });
  }

  registerAdapter(adapter: NewAdapter, evidence: EvidenceEntry): Promise<AdapterRow> {
    return this.db.transaction(async (tx) => {
      const row = await integrationSql.insertAdapter(tx, adapter);
      await this.chain.append(tx, [evidence]);
      return row;
    });
  }

  setAdapterState(organizationId: string, integrationId: string, adapterId: string, step: (current: AdapterRow) => StateChange<AdapterRow["state"]>): Promise<AdapterRow> {
    return this.db.transaction(async (tx) => {
      const current = await integrationSql.lockAdapter(tx, organizationId, integrationId, adapterId);
      if (!current) throw new NotFoundError("adapter");
      const change = step(current);
      const row = await integrationSql.setAdapterState(tx, adapterId, change.state);
      await this.chain.append(tx, [change.evidence]);
      return row;
    });
  }
}
