import type { EvidenceEntry } from "./evidence.js";

/** A stored integration. */
export interface IntegrationRow {
  integration_id: string;
  organization_id: string;
  name: string;
  actions: string[];
  state: "active" | "suspended" | "revoked";
  created_at: Date;
}

/** An integration as created (state `active`); each of its actions is claimed for it. */
export type NewIntegration = Omit<IntegrationRow, "state" | "created_at">;

/** The declared type of one Intent field, as a contract version stores it (the domain validates it before it is stored). */
export interface DeclaredFieldType {
  type: "number" | "string" | "boolean" | "timestamp" | "enum";
  required?: boolean;
  /** The allowed values of an enum. */
  values?: string[];
}

/** A stored contract version of an integration. */
export interface ContractVersionRow {
  integration_id: string;
  version: number;
  state: "proposed" | "active" | "superseded";
  resource_path: string;
  context_bindings: Record<string, string>;
  /** Declared types of Intent fields, by field path (`amount`, `context.tier`); empty when none are declared. */
  field_types: Record<string, DeclaredFieldType>;
  author: string;
  approver: string | null;
  created_at: Date;
}

/** A contract version as proposed; the store numbers it. */
export interface ProposedContract {
  integration_id: string;
  resource_path: string;
  context_bindings: Record<string, string>;
  field_types: Record<string, DeclaredFieldType>;
  author: string;
}

/** A stored adapter (or destination identity) of an integration. */
export interface AdapterRow {
  adapter_id: string;
  integration_id: string;
  name: string;
  public_key: string;
  state: "active" | "suspended" | "revoked";
  role: "adapter" | "destination";
  created_at: Date;
}

/** An adapter as registered (state `active`). */
export type NewAdapter = Pick<AdapterRow, "adapter_id" | "integration_id" | "name" | "public_key" | "role"> & { organization_id: string };

/** An adapter with its organization, as signature checks find it by id alone. */
export type ReporterRow = AdapterRow & { organization_id: string };

/** A state change (of an integration or an adapter) computed from the row as it stands under lock. */
export interface StateChange<S extends string> {
  state: S;
  /** The evidence record stating the change. */
  evidence: EvidenceEntry;
}

/** An approval computed from the contract version as it stands under lock. */
export interface ContractApproval {
  approver: string;
  /** The evidence record stating the approval. */
  evidence: EvidenceEntry;
}

/**
 * Integrations, their contract versions and their trusted adapters. Every change that leaves
 * evidence writes the change and its evidence record in one transaction (both or neither).
 * Changes whose rules are the domain's take a `step` that is handed the row as it stands under
 * a row lock and returns the change, or throws to refuse it: then nothing is written and the
 * error reaches the caller as thrown. `step` runs synchronously inside the transaction and may
 * be called again if the transaction is retried after a conflict.
 */
export interface IntegrationStore {
  /**
   * Stores a new integration (state `active`) and claims each of its actions for it.
   * Throws CollisionError when an action is already claimed by another integration of the
   * organization (key `integration_actions_pkey`).
   */
  create(integration: NewIntegration): Promise<void>;

  /**
   * The organization's integrations, oldest first; only the one with `integrationId` when it
   * is given (empty when the organization has no such integration).
   */
  list(organizationId: string, integrationId?: string): Promise<IntegrationRow[]>;

  /** The contract versions of these integrations, by integration and version. */
  contracts(integrationIds: readonly string[]): Promise<ContractVersionRow[]>;

  /** The adapters of these integrations, oldest first. */
  adapters(integrationIds: readonly string[]): Promise<AdapterRow[]>;

  /** An adapter by id (of any organization, in any state) with its organization, or null when there is none. */
  adapter(adapterId: string): Promise<ReporterRow | null>;

  /**
   * Changes the integration's state: locks it, hands it to `step`, stores the state it returns
   * and its evidence record. Returns the integration as changed. Throws NotFoundError when
   * the organization has no such integration.
   */
  setState(organizationId: string, integrationId: string, step: (current: IntegrationRow) => StateChange<IntegrationRow["state"]>): Promise<IntegrationRow>;

  /**
   * Adds the integration's next contract version (numbered after the highest so far), state
   * `proposed`, and returns it. Throws NotFoundError when the organization has no such
   * integration.
   */
  proposeContract(organizationId: string, contract: ProposedContract): Promise<ContractVersionRow>;

  /**
   * Approves a contract version: locks it, hands it to `step`, makes it the integration's
   * active version (superseding the active one, if any) with the approver `step` returns,
   * and stores its evidence record. Returns the version as approved. Throws NotFoundError when
   * the organization's integration has no such version.
   */
  approveContract(organizationId: string, integrationId: string, version: number, step: (current: ContractVersionRow) => ContractApproval): Promise<ContractVersionRow>;

  /**
   * Stores a new adapter (state `active`) of an existing integration, and `evidence`,
   * together; returns it. Throws CollisionError when the public key is already registered to
   * an adapter (key `adapters_public_key_key`) or held by an agent's certificate (key
   * `public_key_held_by_certificate`); another key only on an id collision.
   */
  registerAdapter(adapter: NewAdapter, evidence: EvidenceEntry): Promise<AdapterRow>;

  /**
   * Changes an adapter's state: locks it, hands it to `step`, stores the state it returns and
   * its evidence record. Returns the adapter as changed. Throws NotFoundError when the
   * organization's integration has no such adapter (or the integration does not exist).
   */
  setAdapterState(organizationId: string, integrationId: string, adapterId: string, step: (current: AdapterRow) => StateChange<AdapterRow["state"]>): Promise<AdapterRow>;
}
