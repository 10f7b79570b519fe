import type { Permission } from "../base/caller.js";
import type { InitialPolicy } from "./policies.js";

/** An organization as stored. */
export interface OrganizationRow {
  organization_id: string;
  name: string;
  sandbox: boolean;
  state: "active" | "suspended";
  created_at: Date;
}

/** An organization to create. */
export type NewOrganization = Pick<OrganizationRow, "organization_id" | "name" | "sandbox">;

/** An API key as stored and read (never its secret, nor the secret's hash). */
export interface ApiKeyRow {
  key_id: string;
  organization_id: string;
  name: string;
  permissions: Permission[];
  created_at: Date;
  revoked_at: Date | null;
}

/** An unrevoked API key as authentication reads it: with its organization's state now. */
export interface LiveApiKey extends ApiKeyRow {
  organization_state: OrganizationRow["state"];
}

/** An API key to create, by the SHA-256 of its secret. */
export interface NewApiKey {
  key_id: string;
  organization_id: string;
  name: string;
  secret_sha256: Buffer;
  permissions: readonly Permission[];
}

/** Who asks for a sandbox organization. */
export interface SandboxSignup {
  email: string;
  client_address: string;
}

/** Sandbox signups as they stand, counted when a new one is considered. */
export interface SandboxCounts {
  /** From the same client address in the last hour. */
  byAddressLastHour: number;
  /** For the same email in the last day. */
  byEmailLastDay: number;
  /** Ever. */
  total: number;
  /** Seconds until the oldest of `byAddressLastHour` leaves the hour (0 when there is none). */
  addressWindowFreesInSeconds: number;
  /** Seconds until the oldest of `byEmailLastDay` leaves the day (0 when there is none). */
  emailWindowFreesInSeconds: number;
}

/** A state change computed from the organization as it stands under lock. */
export interface OrganizationStateChange {
  state: OrganizationRow["state"];
  /** The kind and payload of the change's evidence record (its subject is the organization). */
  evidence: { kind: string; payload: Record<string, unknown> };
}

/** Organizations, their API keys and the sandbox signup ledger. */
export interface OrganizationStore {
  /**
   * Creates an organization with its first API key and its first policy (installed active, the
   * organization's head pointing at its bundle), all in one transaction; returns the
   * organization and the key. `key` must be the new organization's and `policy`'s bundle already
   * stored (NotFoundError otherwise). Throws CollisionError when an id or the key's secret hash is
   * taken.
   */
  create(org: NewOrganization, key: NewApiKey, policy: InitialPolicy): Promise<{ org: OrganizationRow; key: ApiKeyRow }>;

  /**
   * Creates a sandbox organization as `create` does, recording its signup in the same
   * transaction: signups serialize (across replicas), and `admit` gets the counts as they stand
   * before this one and throws to refuse it, in which case nothing is written.
   */
  createSandbox(
    org: NewOrganization,
    key: NewApiKey,
    policy: InitialPolicy,
    signup: SandboxSignup,
    admit: (counts: SandboxCounts) => void,
  ): Promise<{ org: OrganizationRow; key: ApiKeyRow }>;

  /** The organization, or null when it does not exist. */
  get(organizationId: string): Promise<OrganizationRow | null>;

  /**
   * Changes an organization's state atomically: locks it, hands it to `step` (which returns the
   * change, or throws to refuse it, writing nothing), stores the state and appends the evidence
   * record in the same transaction. Returns the organization as changed. Throws NotFoundError
   * when there is no such organization.
   */
  changeState(organizationId: string, step: (current: OrganizationRow) => OrganizationStateChange): Promise<OrganizationRow>;

  /** Creates an API key; returns it. Throws CollisionError when its id or secret hash is taken, NotFoundError when its organization does not exist. */
  createKey(key: NewApiKey): Promise<ApiKeyRow>;

  /**
   * The unrevoked key of each secret hash with its organization's state, one entry per hash in
   * order; null for an unknown or revoked one.
   */
  liveKeys(secretSha256s: readonly Buffer[]): Promise<(LiveApiKey | null)[]>;

  /** The organization's key `keyId` with the organization's state now, or null when it is revoked or unknown. */
  liveKey(organizationId: string, keyId: string): Promise<LiveApiKey | null>;

  /** The organization's keys, revoked ones included, oldest first. */
  listKeys(organizationId: string): Promise<ApiKeyRow[]>;

  /**
   * Revokes a key (revoking a revoked key keeps its first revocation time); returns it.
   * Returns null when the organization has no such key.
   */
  revokeKey(organizationId: string, keyId: string): Promise<ApiKeyRow | null>;
}
