import type { OrganizationKey } from "./keys.js";

/** A stored capability (never its token). */
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

/** Why a consume did not happen, in the order the checks apply: expiry, live dependencies, single use. */
export type ConsumeRefusal = "expired" | "dependency_inactive" | "consumed";

/** The live states a capability depends on, as the Redis mirror keeps them. */
export interface CapabilityDependencies {
  organization: string;
  agent: string;
  /** null when no integration is bound; "active" or "inactive" (the integration or one of its adapters is not active). */
  integration: string | null;
}

/**
 * Capabilities as stored. They are issued and consumed only through the Ledger
 * (storage/ledger.ts); this reads them.
 */
export interface CapabilityStore {
  /** The capability of the organization, or null. */
  get(organizationId: string, capabilityId: string): Promise<CapabilityRow | null>;
  /** Capabilities by (organization, id), one entry per key in order, null when absent or of another organization. */
  getMany(keys: readonly OrganizationKey[]): Promise<(CapabilityRow | null)[]>;
  /** The decision's capability (there is at most one), or null. */
  byDecision(organizationId: string, decisionId: string): Promise<CapabilityRow | null>;
  /** The live states the capability depends on now. Throws NotFoundError for an unknown capability. */
  dependencies(capabilityId: string): Promise<CapabilityDependencies>;
  /** What an integration contract version binds: the resource path and context bindings, or null when there is no such version. */
  contractBindings(integrationId: string, version: number): Promise<{ resource_path: string; context_bindings: Record<string, string> } | null>;
}
