import { hash, randomBytes } from "node:crypto";
import type pg from "pg";
import type { Limits } from "../config.js";
import type { Database } from "../storage/postgres/database.js";
import { organizationStore, type ApiKeyRow, type OrganizationRow } from "../storage/postgres/organizations.js";
import { PERMISSIONS, type OrgCaller, type Permission } from "../base/caller.js";
import { MandateError, notFound, validationFailed, type FieldError } from "../base/errors.js";
import type { EvidenceLog } from "./evidence-log.js";
import { newId } from "./ids.js";

/** The stored shapes this module hands to services. */
export type { ApiKeyRow, OrganizationRow } from "../storage/postgres/organizations.js";

/** Hash under which a bearer secret is stored and looked up. */
export function hashSecret(secret: string): Buffer {
  return hash("sha256", secret, "buffer");
}

/** Something that must happen inside the transaction that creates an organization (e.g. its starter policy). */
export type OrganizationInitializer = (tx: pg.PoolClient, organizationId: string) => Promise<void>;

/** A freshly created key, the only time its secret is visible. */
export interface CreatedKey {
  row: ApiKeyRow;
  secret: string;
}

const EMAIL = /^[^\s@"<>()[\]\\,;:]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$/;

function requireName(name: string, field = "name"): void {
  const errors: FieldError[] = [];
  if (name.trim().length === 0) errors.push({ field, code: "required", message: "must not be empty" });
  else if (name.length > 200) errors.push({ field, code: "too_long", message: "at most 200 characters" });
  if (errors.length) throw validationFailed(errors);
}

/** Organizations and their API keys. */
export class Organizations {
  constructor(
    private readonly db: Database,
    private readonly limits: Limits,
    private readonly initialize: OrganizationInitializer,
    private readonly evidence: EvidenceLog,
    /** Told of each committed state change (the Redis mirror of the consume recheck). */
    private readonly stateChanged: (organizationId: string, state: OrganizationRow["state"]) => Promise<void> = async () => undefined,
  ) {}

  private async insertKey(tx: pg.PoolClient, organizationId: string, name: string, permissions: readonly Permission[]): Promise<CreatedKey> {
    const secret = `mk_${randomBytes(32).toString("base64url")}`;
    const row = await organizationStore.insertKey(tx, {
      key_id: newId("key"),
      organization_id: organizationId,
      name,
      secret_sha256: hashSecret(secret),
      permissions,
    });
    return { row, secret };
  }

  private async createWithin(
    tx: pg.PoolClient,
    name: string,
    sandbox: boolean,
    beforeKeys?: (organizationId: string) => Promise<void>,
  ): Promise<{ org: OrganizationRow; key: CreatedKey }> {
    const org = await organizationStore.insert(tx, { organization_id: newId("org"), name, sandbox });
    await beforeKeys?.(org.organization_id);
    await this.initialize(tx, org.organization_id);
    const key = await this.insertKey(tx, org.organization_id, sandbox ? "sandbox" : "initial", PERMISSIONS);
    return { org, key };
  }

  /** Creates an organization with an all-permission key and the starter policy. */
  async create(name: string): Promise<{ org: OrganizationRow; key: CreatedKey }> {
    requireName(name);
    return this.db.transaction((tx) => this.createWithin(tx, name.trim(), false));
  }

  /**
   * Creates a sandbox organization for `email`, enforcing the per-address,
   * per-email and total limits in the same transaction (429 `rate_limited`).
   */
  async createSandbox(email: string, clientAddress: string): Promise<{ org: OrganizationRow; key: CreatedKey }> {
    const normalized = email.trim().toLowerCase();
    if (normalized.length > 254 || !EMAIL.test(normalized)) {
      throw validationFailed([{ field: "email", code: "invalid_format", message: "must be an email address" }]);
    }
    return this.db.transaction((tx) =>
      this.createWithin(tx, `Sandbox for ${normalized}`, true, async (organizationId) => {
        const violated = await organizationStore.recordSandboxSignup(
          tx,
          { organization_id: organizationId, email: normalized, client_address: clientAddress },
          {
            perAddressPerHour: this.limits.sandboxPerAddressPerHour,
            perEmailPerDay: this.limits.sandboxPerEmailPerDay,
            maxOrgs: this.limits.sandboxMaxOrgs,
          },
        );
        if (violated) {
          const why = {
            per_address: "Too many sandbox organizations from this address; try again later.",
            per_email: "Too many sandbox organizations for this email today.",
            total: "The sandbox is full.",
          }[violated];
          throw new MandateError("rate_limited", why);
        }
      }),
    );
  }

  /** The caller's organization. */
  async get(caller: OrgCaller): Promise<OrganizationRow> {
    const org = await organizationStore.get(this.db.pool, caller.organizationId);
    if (!org) throw notFound("Organization");
    return org;
  }

  /** Creates a scoped key; the secret is returned once. */
  async createKey(caller: OrgCaller, name: string, permissions: readonly Permission[]): Promise<CreatedKey> {
    requireName(name);
    if (permissions.length === 0) {
      throw validationFailed([{ field: "permissions", code: "required", message: "at least one permission" }]);
    }
    const unique = [...new Set(permissions)];
    return this.db.transaction((tx) => this.insertKey(tx, caller.organizationId, name.trim(), unique));
  }

  /** Lists the caller's organization's keys. */
  listKeys(caller: OrgCaller): Promise<ApiKeyRow[]> {
    return organizationStore.listKeys(this.db.pool, caller.organizationId);
  }

  /**
   * Suspends or reactivates an organization (the platform operator's call), with its
   * evidence. While suspended, every Capability it issued fails closed at consume time.
   * 404 for an unknown organization; 409 `invalid_transition` when it is already in `to`.
   */
  async setState(organizationId: string, to: OrganizationRow["state"]): Promise<OrganizationRow> {
    const from = to === "suspended" ? "active" : "suspended";
    const row = await this.db.transaction(async (tx) => {
      const changed = await organizationStore.setState(tx, organizationId, from, to);
      if (!changed) {
        if (!(await organizationStore.get(tx, organizationId))) throw notFound("Organization");
        throw new MandateError("invalid_transition", `The organization is already ${to}.`);
      }
      await this.evidence.append(tx, [
        { organizationId, kind: to === "suspended" ? "organization.suspended" : "organization.reactivated", subjectId: organizationId, payload: { organization_id: organizationId, state: to } },
      ]);
      return changed;
    });
    await this.stateChanged(organizationId, to);
    return row;
  }

  /** Revokes a key of the caller's organization; 404 for another organization's key. */
  async revokeKey(caller: OrgCaller, keyId: string): Promise<ApiKeyRow> {
    const row = await organizationStore.revokeKey(this.db.pool, caller.organizationId, keyId);
    if (!row) throw notFound("API key");
    return row;
  }
}
