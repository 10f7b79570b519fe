import pg from "pg";
import { ConflictError, UnavailableError } from "../errors.js";
import type { OrganizationKey } from "../keys.js";
import { fromPg, rethrowFromPg } from "./errors.js";

/**
 * A query runner: the pool outside a transaction, a client inside one. Its errors are
 * already storage errors (./errors.ts): nothing above this folder sees a SQLSTATE.
 */
export interface Queryable {
  query<R extends pg.QueryResultRow = any>(text: string | pg.QueryConfig, values?: unknown[]): Promise<pg.QueryResult<R>>; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** `q` with its errors translated. */
function translating(q: { query: (...args: any[]) => Promise<any> }): Queryable { // eslint-disable-line @typescript-eslint/no-explicit-any
  return { query: (text: string | pg.QueryConfig, values?: unknown[]) => q.query(text, values).catch(rethrowFromPg) };
}

// Postgres returns int8 (bigint counts, seq) as strings; every value we store fits in 2^53.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));


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

/** Owns the pool; every multi-statement change goes through `transaction`. */
export class Database {
  /** Runs single statements outside a transaction. */
  readonly pool: Queryable;

  constructor(private readonly raw: pg.Pool) {
    this.pool = translating(raw);
  }

  /**
   * Runs `work` in one transaction, retrying serialization failures and deadlocks.
   * Every failure leaves as a storage error, so no SQLSTATE or driver text reaches callers.
   */
  async transaction<T>(work: (tx: Queryable) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      let client: pg.PoolClient;
      try {
        client = await this.raw.connect();
      } catch {
        throw new UnavailableError();
      }
      const tx = translating(client);
      try {
        await tx.query("BEGIN");
        const result = await work(tx);
        await tx.query("COMMIT");
        return result;
      } catch (err) {
        await client.query("ROLLBACK").catch(() => undefined);
        const translated = fromPg(err);
        if (translated instanceof ConflictError && attempt < 5) continue;
        throw translated;
      } finally {
        client.release();
      }
    }
  }

  /**
   * Runs `work` on one connection held for its duration, outside any transaction (session
   * state such as advisory locks lives as long as the connection; it is closed after, so no
   * such state outlives `work`).
   */
  async session<T>(work: (q: Queryable) => Promise<T>): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await this.raw.connect();
    } catch {
      throw new UnavailableError();
    }
    let failed = false;
    try {
      return await work(translating(client));
    } catch (err) {
      failed = true;
      throw err;
    } finally {
      client.release(failed);
    }
  }

  /** Whether the database answers a trivial query (readiness). */
  async ping(): Promise<void> {
    await this.pool.query("SELECT 1");
  }

  /** Closes every connection. */
  async close(): Promise<void> {
    await this.raw.end();
  }
}

/** Creates the pool; `max` is sized for a 2-core machine's Postgres. */
export function createDatabase(connectionString: string, max = 20): Database {
  // Generic plans for every prepared statement: the hot statements take arrays, and with them
  // Postgres would otherwise judge a fresh custom plan worth making on every execution, a large
  // share of its CPU per capability consume. Our statements are key lookups either way, so no
  // sequential scans either where an index serves: a generic plan is made once per connection
  // and kept until the table is next analyzed, and one made while a table was a page or two
  // scans it whole however large it grows meanwhile (measured in docs/performance.md, Postgres).
  // A table no index serves is still scanned.
  // (An `options` in DATABASE_URL takes precedence.)
  // Idle connections stay open (pg-pool closes them after 10 s by default): reopening one costs a
  // backend fork, SCRAM authentication and re-preparing every statement, and after a quiet spell
  // the next burst would pay that for many connections at once, stalling the requests in it.
  const pool = new pg.Pool({ connectionString, max, idleTimeoutMillis: 0, options: "-c plan_cache_mode=force_generic_plan -c enable_seqscan=off" });
  // An idle client losing its connection must not crash the process.
  pool.on("error", () => undefined);
  return new Database(pool);
}
