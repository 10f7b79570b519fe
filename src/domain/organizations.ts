import { hash, randomBytes } from "node:crypto";
import type { Limits } from "./limits.js";
import { NotFoundError } from "../storage/errors.js";
import type { ApiKeyRow, NewApiKey, NewOrganization, OrganizationRow, OrganizationStore, SandboxCounts } from "../storage/organizations.js";
import type { InitialPolicy } from "../storage/policies.js";
import { PERMISSIONS, type OrgCaller, type Permission } from "../base/caller.js";
import { MandateError, notFound, rateLimited, validationFailed, type FieldError } from "../base/errors.js";
import { newId } from "./ids.js";

/** The stored shapes this module hands to services. */
export type { ApiKeyRow, OrganizationRow } from "../storage/organizations.js";

/** Hash under which a bearer secret is stored and looked up. */
export function hashSecret(secret: string): Buffer {
  return hash("sha256", secret, "buffer");
}

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

/**
 * The mailbox an address (already trimmed and lower-cased) delivers to, for counting sandbox
 * sign-ups: a `+tag` in the local part is a label, not another mailbox.
 */
function mailboxOf(email: string): string {
  const at = email.lastIndexOf("@");
  const plus = email.indexOf("+");
  return plus > 0 && plus < at ? email.slice(0, plus) + email.slice(at) : email;
}

/** Organizations and their API keys. */
export class Organizations {
  constructor(
    private readonly store: OrganizationStore,
    private readonly limits: Limits,
    /** The policy every new organization starts with (installed in the transaction that creates it). */
    private readonly initialPolicy: () => InitialPolicy,
    /** Told of each committed state change (the Redis mirror of the consume recheck). */
    private readonly stateChanged: (organizationId: string, state: OrganizationRow["state"]) => Promise<void> = async () => undefined,
  ) {}

  /** A new key of the organization with a fresh secret: what to store, and the secret to show once. */
  private static newKey(organizationId: string, name: string, permissions: readonly Permission[]): { key: NewApiKey; secret: string } {
    const secret = `mk_${randomBytes(32).toString("base64url")}`;
    return { key: { key_id: newId("key"), organization_id: organizationId, name, secret_sha256: hashSecret(secret), permissions }, secret };
  }

  /** What creating an organization stores: the organization, its all-permission key, its first policy. */
  private creation(name: string, sandbox: boolean): { org: NewOrganization; key: NewApiKey; secret: string; policy: InitialPolicy } {
    const org = { organization_id: newId("org"), name, sandbox };
    const { key, secret } = Organizations.newKey(org.organization_id, sandbox ? "sandbox" : "initial", PERMISSIONS);
    return { org, key, secret, policy: this.initialPolicy() };
  }

  /** Creates an organization with an all-permission key and the starter policy. */
  async create(name: string): Promise<{ org: OrganizationRow; key: CreatedKey }> {
    requireName(name);
    const c = this.creation(name.trim(), false);
    const created = await this.store.create(c.org, c.key, c.policy);
    return { org: created.org, key: { row: created.key, secret: c.secret } };
  }

  /**
   * Creates a sandbox organization for `email`, enforcing the per-address,
   * per-email and total limits in the same transaction (429 `rate_limited`).
   * The per-email limit counts mailboxes: `Dev+one@Example.com` is `dev@example.com`.
   */
  async createSandbox(email: string, clientAddress: string): Promise<{ org: OrganizationRow; key: CreatedKey }> {
    const normalized = email.trim().toLowerCase();
    if (normalized.length > 254 || !EMAIL.test(normalized)) {
      throw validationFailed([{ field: "email", code: "invalid_format", message: "must be an email address" }]);
    }
    const c = this.creation(`Sandbox for ${normalized}`, true);
    const mailbox = mailboxOf(normalized);
    // Each refusal names the variable that sets its limit, and says (Retry-After) when the
    // window frees: when the oldest signup counted against it leaves the window. The total cap
    // has no window; an hour is a polite interval to come back after.
    const l = this.limits;
    const admit = (counts: SandboxCounts) => {
      if (counts.total >= l.sandboxMaxOrgs) {
        throw rateLimited(`The sandbox is full: ${l.sandboxMaxOrgs} sandbox organizations exist (MANDATE_SANDBOX_MAX_ORGS).`, 3600);
      }
      if (counts.byAddressLastHour >= l.sandboxPerAddressPerHour) {
        throw rateLimited(
          `Too many sandbox organizations from this address: at most ${l.sandboxPerAddressPerHour} per hour (MANDATE_SANDBOX_PER_ADDRESS_PER_HOUR); try again in ${Math.max(1, Math.ceil(counts.addressWindowFreesInSeconds))} s.`,
          counts.addressWindowFreesInSeconds,
        );
      }
      if (counts.byEmailLastDay >= l.sandboxPerEmailPerDay) {
        throw rateLimited(
          `Too many sandbox organizations for this email: at most ${l.sandboxPerEmailPerDay} per day (MANDATE_SANDBOX_PER_EMAIL_PER_DAY); try again in ${Math.max(1, Math.ceil(counts.emailWindowFreesInSeconds))} s.`,
          counts.emailWindowFreesInSeconds,
        );
      }
    };
    const created = await this.store.createSandbox(c.org, c.key, c.policy, { email: mailbox, client_address: clientAddress }, admit);
    return { org: created.org, key: { row: created.key, secret: c.secret } };
  }

  /** The caller's organization. */
  async get(caller: OrgCaller): Promise<OrganizationRow> {
    const org = await this.store.get(caller.organizationId);
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
    const { key, secret } = Organizations.newKey(caller.organizationId, name.trim(), unique);
    return { row: await this.store.createKey(key), secret };
  }

  /** Lists the caller's organization's keys. */
  listKeys(caller: OrgCaller): Promise<ApiKeyRow[]> {
    return this.store.listKeys(caller.organizationId);
  }

  /**
   * Suspends or reactivates an organization (the platform operator's call), with its
   * evidence. While suspended, every Capability it issued fails closed at consume time.
   * 404 for an unknown organization; 409 `invalid_transition` when it is already in `to`.
   */
  async setState(organizationId: string, to: OrganizationRow["state"]): Promise<OrganizationRow> {
    let row: OrganizationRow;
    try {
      row = await this.store.changeState(organizationId, (current) => {
        if (current.state === to) throw new MandateError("invalid_transition", `The organization is already ${to}.`);
        return {
          state: to,
          evidence: { kind: to === "suspended" ? "organization.suspended" : "organization.reactivated", payload: { organization_id: organizationId, state: to } },
        };
      });
    } catch (err) {
      if (err instanceof NotFoundError) throw notFound("Organization");
      throw err;
    }
    await this.stateChanged(organizationId, to);
    return row;
  }

  /** Revokes a key of the caller's organization; 404 for another organization's key. */
  async revokeKey(caller: OrgCaller, keyId: string): Promise<ApiKeyRow> {
    const row = await this.store.revokeKey(caller.organizationId, keyId);
    if (!row) throw notFound("API key");
    return row;
  }
}
