import type { Permission } from "../../base/caller.js";
import type { Queryable } from "./database.js";

/** An organization row. */
export interface OrganizationRow {
  organization_id: string;
  name: string;
  sandbox: boolean;
  state: "active" | "suspended";
  created_at: Date;
}

/** An API key row (never the secret). */
export interface ApiKeyRow {
  key_id: string;
  organization_id: string;
  name: string;
  permissions: Permission[];
  created_at: Date;
  revoked_at: Date | null;
}

/** SQL for organizations, API keys and the sandbox ledger. */
export const organizationStore = {
  /** Inserts an organization. */
  async insert(q: Queryable, org: { organization_id: string; name: string; sandbox: boolean }): Promise<OrganizationRow> {
    const { rows } = await q.query<OrganizationRow>(
      "INSERT INTO organizations (organization_id, name, sandbox) VALUES ($1, $2, $3) RETURNING *",
      [org.organization_id, org.name, org.sandbox],
    );
    return rows[0]!;
  },

  /** Returns the organization, or null when it does not exist. */
  async get(q: Queryable, organizationId: string): Promise<OrganizationRow | null> {
    const { rows } = await q.query<OrganizationRow>("SELECT * FROM organizations WHERE organization_id = $1", [organizationId]);
    return rows[0] ?? null;
  },

  /** Moves an organization from `from` to `to`; null when it is not in `from` (or does not exist). */
  async setState(q: Queryable, organizationId: string, from: OrganizationRow["state"], to: OrganizationRow["state"]): Promise<OrganizationRow | null> {
    const { rows } = await q.query<OrganizationRow>("UPDATE organizations SET state = $3 WHERE organization_id = $1 AND state = $2 RETURNING *", [organizationId, from, to]);
    return rows[0] ?? null;
  },

  /** Inserts an API key by the SHA-256 of its secret. */
  async insertKey(
    q: Queryable,
    key: { key_id: string; organization_id: string; name: string; secret_sha256: Buffer; permissions: readonly Permission[] },
  ): Promise<ApiKeyRow> {
    const { rows } = await q.query<ApiKeyRow>(
      `INSERT INTO api_keys (key_id, organization_id, name, secret_sha256, permissions)
       VALUES ($1, $2, $3, $4, $5)
       RETURNING key_id, organization_id, name, permissions, created_at, revoked_at`,
      [key.key_id, key.organization_id, key.name, key.secret_sha256, key.permissions],
    );
    return rows[0]!;
  },

  /** The unrevoked key of each secret hash, in order; null for an unknown or revoked one. */
  async findLiveKeys(q: Queryable, secretSha256s: readonly Buffer[]): Promise<(ApiKeyRow | null)[]> {
    const { rows } = await q.query<ApiKeyRow & { secret_sha256: Buffer }>({
      name: "api_keys_find_live",
      text: `SELECT key_id, organization_id, name, permissions, created_at, revoked_at, secret_sha256
               FROM api_keys WHERE secret_sha256 = ANY($1::bytea[]) AND revoked_at IS NULL`,
      values: [secretSha256s],
    });
    const byHash = new Map(rows.map(({ secret_sha256, ...row }) => [secret_sha256.toString("hex"), row]));
    return secretSha256s.map((h) => byHash.get(h.toString("hex")) ?? null);
  },

  /** Lists an organization's keys, oldest first. */
  async listKeys(q: Queryable, organizationId: string): Promise<ApiKeyRow[]> {
    const { rows } = await q.query<ApiKeyRow>(
      `SELECT key_id, organization_id, name, permissions, created_at, revoked_at
         FROM api_keys WHERE organization_id = $1 ORDER BY created_at, key_id`,
      [organizationId],
    );
    return rows;
  },

  /** Revokes a key of the organization (idempotent); null when no such key in that organization. */
  async revokeKey(q: Queryable, organizationId: string, keyId: string): Promise<ApiKeyRow | null> {
    const { rows } = await q.query<ApiKeyRow>(
      `UPDATE api_keys SET revoked_at = coalesce(revoked_at, now())
        WHERE organization_id = $1 AND key_id = $2
        RETURNING key_id, organization_id, name, permissions, created_at, revoked_at`,
      [organizationId, keyId],
    );
    return rows[0] ?? null;
  },

  /**
   * Records a sandbox signup if every limit still holds, atomically across
   * replicas: a transaction-scoped advisory lock serializes signups, so the
   * counts and the insert cannot interleave. Returns the violated limit, or null.
   */
  async recordSandboxSignup(
    q: Queryable,
    signup: { organization_id: string; email: string; client_address: string },
    limits: { perAddressPerHour: number; perEmailPerDay: number; maxOrgs: number },
  ): Promise<"per_address" | "per_email" | "total" | null> {
    await q.query("SELECT pg_advisory_xact_lock(727274002)");
    const { rows } = await q.query<{ by_address: number; by_email: number; total: number }>(
      `SELECT
         (SELECT count(*) FROM sandbox_signups WHERE client_address = $1 AND created_at > now() - interval '1 hour')::int AS by_address,
         (SELECT count(*) FROM sandbox_signups WHERE email = $2 AND created_at > now() - interval '1 day')::int AS by_email,
         (SELECT count(*) FROM sandbox_signups)::int AS total`,
      [signup.client_address, signup.email],
    );
    const counts = rows[0]!;
    if (counts.total >= limits.maxOrgs) return "total";
    if (counts.by_address >= limits.perAddressPerHour) return "per_address";
    if (counts.by_email >= limits.perEmailPerDay) return "per_email";
    await q.query("INSERT INTO sandbox_signups (organization_id, email, client_address) VALUES ($1, $2, $3)", [
      signup.organization_id,
      signup.email,
      signup.client_address,
    ]);
    return null;
  },
};
