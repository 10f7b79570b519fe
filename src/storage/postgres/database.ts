import pg from "pg";
import { MandateError } from "../../base/errors.js";

/** A query runner: the pool outside a transaction, a client inside one. */
export type Queryable = Pick<pg.Pool, "query"> | pg.PoolClient;

// Postgres returns int8 (bigint counts, seq) as strings; every value we store fits in 2^53.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));

/** A row wanted by its id within one organization. */
export interface OrganizationKey {
  organizationId: string;
  id: string;
}

/**
 * Rows of `table` by their id column for keys of any organizations, in ONE named statement
 * (for reads batched across concurrent requests): one entry per key, in order; null when absent
 * or of another organization, which for that caller does not exist.
 */
export async function rowsByKey<R extends { organization_id: string }>(
  q: Queryable,
  table: "capabilities" | "decisions",
  idColumn: keyof R & string,
  keys: readonly OrganizationKey[],
): Promise<(R | null)[]> {
  const { rows } = await q.query<R>({ name: `${table}_by_key`, text: `SELECT * FROM ${table} WHERE ${idColumn} = ANY($1::text[])`, values: [keys.map((k) => k.id)] });
  const byId = new Map(rows.map((r) => [r[idColumn] as string, r]));
  return keys.map((k) => {
    const row = byId.get(k.id);
    return row && row.organization_id === k.organizationId ? row : null;
  });
}

/** SQLSTATEs that mean "try the whole transaction again". */
const RETRYABLE = new Set(["40001", "40P01"]);

/** Whether a pg error is a deadlock or serialization failure: the statement wrote nothing and may be tried again. */
export function isConflict(err: unknown): boolean {
  const code = (err as { code?: string })?.code;
  return code !== undefined && RETRYABLE.has(code);
}

/** Whether a pg error is a unique violation (optionally of one named constraint). */
export function isUniqueViolation(err: unknown, constraint?: string): boolean {
  const e = err as { code?: string; constraint?: string };
  return e?.code === "23505" && (constraint === undefined || e.constraint === constraint);
}

/**
 * Whether a pg error says a value holds text Postgres cannot store (U+0000,
 * bad encoding). Input is checked for this where it arrives; this is the
 * backstop that keeps a path we missed a client error rather than a 500.
 */
export function isUnstorableText(err: unknown): boolean {
  const code = (err as { code?: string })?.code;
  return code === "22P05" || code === "22021";
}

/** Owns the pool; every multi-statement change goes through `transaction`. */
export class Database {
  constructor(readonly pool: pg.Pool) {}

  /**
   * Runs `work` in one transaction, retrying serialization failures and deadlocks.
   * Connection failures become `unavailable` so no SQLSTATE or driver text reaches callers.
   */
  async transaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      let client: pg.PoolClient;
      try {
        client = await this.pool.connect();
      } catch (err) {
        throw new MandateError("unavailable", "The database is unavailable.", []);
      }
      try {
        await client.query("BEGIN");
        const result = await work(client);
        await client.query("COMMIT");
        return result;
      } catch (err) {
        await client.query("ROLLBACK").catch(() => undefined);
        const code = (err as { code?: string }).code;
        if (code && RETRYABLE.has(code) && attempt < 5) continue;
        throw err;
      } finally {
        client.release();
      }
    }
  }

  /** Closes every connection. */
  async close(): Promise<void> {
    await this.pool.end();
  }
}

/** Creates the pool; `max` is sized for a 2-core machine's Postgres. */
export function createDatabase(connectionString: string, max = 20): Database {
  // Generic plans for every prepared statement: the hot statements take arrays, and with them
  // Postgres would otherwise judge a fresh custom plan worth making on every execution (about
  // half of its CPU per capability consume). Our statements are key lookups either way, so no
  // sequential scans either where an index serves: a generic plan is made once per connection
  // and kept until the table is next analyzed, and one made while a table was a page or two
  // scans it whole however large it grows meanwhile. Seen in the bench: capabilities grew to
  // 24,000 rows before autovacuum's first visit, 15 million rows were read in a minute, and
  // consumes fell from ~3,000 to ~250/s. A table no index serves is still scanned.
  // (An `options` in DATABASE_URL takes precedence.)
  // Idle connections stay open (pg-pool closes them after 10 s by default): reopening one costs a
  // backend fork, SCRAM authentication and re-preparing every statement, and after a quiet spell
  // the next burst would pay that for many connections at once, stalling the requests in it.
  const pool = new pg.Pool({ connectionString, max, idleTimeoutMillis: 0, options: "-c plan_cache_mode=force_generic_plan -c enable_seqscan=off" });
  // An idle client losing its connection must not crash the process.
  pool.on("error", () => undefined);
  return new Database(pool);
}
