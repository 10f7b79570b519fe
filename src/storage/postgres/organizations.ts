import { NotFoundError } from "../errors.js";
import type {
  ApiKeyRow,
  LiveApiKey,
  NewApiKey,
  NewOrganization,
  OrganizationRow,
  OrganizationStateChange,
  OrganizationStore,
  SandboxCounts,
  SandboxSignup,
} from "../organizations.js";
import type { InitialPolicy } from "../policies.js";
import type { Database, Queryable } from "./database.js";
import type { EvidenceChain } from "./evidence-chain.js";
import { policySql } from "./policies.js";

/** The advisory lock that serializes sandbox signups across replicas (transaction-scoped). */
const SANDBOX_SIGNUP_LOCK = 727274002;

/** The columns of an API key that are ever read back (never the secret's hash). */
const KEY_COLUMNS = "key_id, organization_id, name, permissions, created_at, revoked_at";
/** A LiveApiKey's columns (`k` the key, `o` its organization) and where they come from. */
const LIVE_KEYS = "SELECT k.key_id, k.organization_id, k.name, k.permissions, k.created_at, k.revoked_at, o.state AS organization_state";
const LIVE_KEYS_FROM = "FROM api_keys k JOIN organizations o ON o.organization_id = k.organization_id";

/** SQL for organizations, API keys and the sandbox ledger. */
export const organizationSql = {
  async insert(q: Queryable, org: NewOrganization): Promise<OrganizationRow> {
    const { rows } = await q.query<OrganizationRow>(
      "INSERT INTO organizations (organization_id, name, sandbox) VALUES ($1, $2, $3) RETURNING *",
      [org.organization_id, org.name, org.sandbox],
    );
    return rows[0]!;
  },

  /** The organization, or null; `lock` holds it for the transaction. */
  async get(q: Queryable, organizationId: string, lock = false): Promise<OrganizationRow | null> {
    // FOR NO KEY UPDATE, the lock an UPDATE of a non-key column takes: it does not wait for (nor
    // block) writers of rows that reference the organization, which take FOR KEY SHARE.
    const { rows } = await q.query<OrganizationRow>(`SELECT * FROM organizations WHERE organization_id = $1${lock ? " FOR NO KEY UPDATE" : ""}`, [organizationId]);
    return rows[0] ?? null;
  },

  async setState(q: Queryable, organizationId: string, state: OrganizationRow["state"]): Promise<OrganizationRow> {
    const { rows } = await q.query<OrganizationRow>("UPDATE organizations SET state = $2 WHERE organization_id = $1 RETURNING *", [organizationId, state]);
    return rows[0]!;
  },

  async insertKey(q: Queryable, key: NewApiKey): Promise<ApiKeyRow> {
    const { rows } = await q.query<ApiKeyRow>(
      `INSERT INTO api_keys (key_id, organization_id, name, secret_sha256, permissions)
       VALUES ($1, $2, $3, $4, $5)
       RETURNING ${KEY_COLUMNS}`,
      [key.key_id, key.organization_id, key.name, key.secret_sha256, key.permissions],
    );
    return rows[0]!;
  },

  async findLiveKeys(q: Queryable, secretSha256s: readonly Buffer[]): Promise<(LiveApiKey | null)[]> {
    const { rows } = await q.query<LiveApiKey & { secret_sha256: Buffer }>({
      name: "api_keys_find_live",
      text: `${LIVE_KEYS}, k.secret_sha256 ${LIVE_KEYS_FROM} WHERE k.secret_sha256 = ANY($1::bytea[]) AND k.revoked_at IS NULL`,
      values: [secretSha256s],
    });
    const byHash = new Map(rows.map(({ secret_sha256, ...row }) => [secret_sha256.toString("hex"), row]));
    return secretSha256s.map((h) => byHash.get(h.toString("hex")) ?? null);
  },

  async findLiveKey(q: Queryable, organizationId: string, keyId: string): Promise<LiveApiKey | null> {
    const { rows } = await q.query<LiveApiKey>({
      name: "api_keys_find_live_by_id",
      text: `${LIVE_KEYS} ${LIVE_KEYS_FROM} WHERE k.organization_id = $1 AND k.key_id = $2 AND k.revoked_at IS NULL`,
      values: [organizationId, keyId],
    });
    return rows[0] ?? null;
  },

  async listKeys(q: Queryable, organizationId: string): Promise<ApiKeyRow[]> {
    const { rows } = await q.query<ApiKeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE organization_id = $1 ORDER BY created_at, key_id`, [organizationId]);
    return rows;
  },

  async revokeKey(q: Queryable, organizationId: string, keyId: string): Promise<ApiKeyRow | null> {
    const { rows } = await q.query<ApiKeyRow>(
      `UPDATE api_keys SET revoked_at = coalesce(revoked_at, now())
        WHERE organization_id = $1 AND key_id = $2
        RETURNING ${KEY_COLUMNS}`,
      [organizationId, keyId],
    );
    return rows[0] ?? null;
  },

  /** Takes the sandbox signup lock until the transaction ends, then counts the signups as they stand. */
  async lockSandboxCounts(q: Queryable, signup: SandboxSignup): Promise<SandboxCounts> {
    await q.query(`SELECT pg_advisory_xact_lock(${SANDBOX_SIGNUP_LOCK})`);
    const { rows } = await q.query<SandboxCounts>(
      `SELECT
         (SELECT count(*) FROM sandbox_signups WHERE client_address = $1 AND created_at > now() - interval '1 hour')::int AS "byAddressLastHour",
         (SELECT count(*) FROM sandbox_signups WHERE email = $2 AND created_at > now() - interval '1 day')::int AS "byEmailLastDay",
         (SELECT count(*) FROM sandbox_signups)::int AS total,
         COALESCE((SELECT extract(epoch FROM min(created_at) + interval '1 hour' - now()) FROM sandbox_signups WHERE client_address = $1 AND created_at > now() - interval '1 hour'), 0)::float8 AS "addressWindowFreesInSeconds",
         COALESCE((SELECT extract(epoch FROM min(created_at) + interval '1 day' - now()) FROM sandbox_signups WHERE email = $2 AND created_at > now() - interval '1 day'), 0)::float8 AS "emailWindowFreesInSeconds"`,
      [signup.client_address, signup.email],
    );
    return rows[0]!;
  },

  async insertSandboxSignup(q: Queryable, organizationId: string, signup: SandboxSignup): Promise<void> {
    await q.query("INSERT INTO sandbox_signups (organization_id, email, client_address) VALUES ($1, $2, $3)", [organizationId, signup.email, signup.client_address]);
  },
};

/**
 * The OrganizationStore on Postgres. A new organization's first policy is installed with the
 * policy store's SQL in the creating transaction; state changes append their evidence to `chain`.
 */
export class PostgresOrganizationStore implements OrganizationStore {
  constructor(
    private readonly db: Database,
    private readonly chain: EvidenceChain,
  ) {}

  create(org: NewOrganization, key: NewApiKey, policy: InitialPolicy): Promise<{ org: OrganizationRow; key: ApiKeyRow }> {
    return this.db.transaction((tx) => this.createWithin(tx, org, key, policy));
  }

  createSandbox(
    org: NewOrganization,
    key: NewApiKey,
    policy: InitialPolicy,
    signup: SandboxSignup,
    admit: (counts: SandboxCounts) => void,
  ): Promise<{ org: OrganizationRow; key: ApiKeyRow }> {
    return this.db.transaction((tx) =>
      this.createWithin(tx, org, key, policy, async () => {
        admit(await organizationSql.lockSandboxCounts(tx, signup));
        await organizationSql.insertSandboxSignup(tx, org.organization_id, signup);
      }),
    );
  }

  /** The organization, then (for a sandbox) its signup, its first policy, its first key. */
  private async createWithin(
    tx: Queryable,
    org: NewOrganization,
    key: NewApiKey,
    policy: InitialPolicy,
    signUp?: () => Promise<void>,
  ): Promise<{ org: OrganizationRow; key: ApiKeyRow }> {
    const created = await organizationSql.insert(tx, org);
    await signUp?.();
    await policySql.installInitial(tx, org.organization_id, policy);
    return { org: created, key: await organizationSql.insertKey(tx, key) };
  }

  get(organizationId: string): Promise<OrganizationRow | null> {
    return organizationSql.get(this.db.pool, organizationId);
  }

  changeState(organizationId: string, step: (current: OrganizationRow) => OrganizationStateChange): Promise<OrganizationRow> {
    return this.db.transaction(async (tx) => {
      const current = await organizationSql.get(tx, organizationId, true);
      if (!current) throw new NotFoundError("organization");
      const change = step(current);
      const changed = await organizationSql.setState(tx, organizationId, change.state);
      await this.chain.append(tx, [{ organizationId, subjectId: organizationId, ...change.evidence }]);
      return changed;
    });
  }

  createKey(key: NewApiKey): Promise<ApiKeyRow> {
    return organizationSql.insertKey(this.db.pool, key);
  }

  liveKeys(secretSha256s: readonly Buffer[]): Promise<(LiveApiKey | null)[]> {
    return organizationSql.findLiveKeys(this.db.pool, secretSha256s);
  }

  liveKey(organizationId: string, keyId: string): Promise<LiveApiKey | null> {
    return organizationSql.findLiveKey(this.db.pool, organizationId, keyId);
  }

  listKeys(organizationId: string): Promise<ApiKeyRow[]> {
    return organizationSql.listKeys(this.db.pool, organizationId);
  }

  revokeKey(organizationId: string, keyId: string): Promise<ApiKeyRow | null> {
    return organizationSql.revokeKey(this.db.pool, organizationId, keyId);
  }
}
