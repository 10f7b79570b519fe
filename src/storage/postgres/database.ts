import pg from "pg";
import { ConflictError, UnavailableError } from "../errors.js";
import type { OrganizationKey } from "../keys.js";
import { fromPg, timedOut } from "./errors.js";

/**
 * A query runner: the pool outside a transaction, a client inside one. Its errors are
 * already storage errors (./errors.ts): nothing above this folder sees a SQLSTATE.
 */
export interface Queryable {
  query<R extends pg.QueryResultRow = any>(text: string | pg.QueryConfig, values?: unknown[]): Promise<pg.QueryResult<R>>; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/**
 * After a wait on the database timed out, how long every call fails at once (503 `unavailable`)
 * instead of waiting out the bound again: while Postgres is frozen or cut off, one request per
 * such spell pays the bound, not each request, nor each item of a group commit in turn.
 */
const FAIL_FAST_MS = 1000;

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
  /** Until when (performance.now()) calls fail at once: a wait timed out just before (FAIL_FAST_MS). */
  private failFastUntil = 0;
  /** What to run after each open transaction commits, by the transaction's Queryable (see afterCommit). */
  private readonly onCommit = new WeakMap<Queryable, (() => void)[]>();

  constructor(private readonly raw: pg.Pool) {
    this.pool = this.translating(raw, true);
  }

  /** UnavailableError while a recent timeout says the database does not answer. */
  private admit(): void {
    if (performance.now() < this.failFastUntil) throw new UnavailableError();
  }

  /** The storage error `err` stands for; a timeout starts a spell of failing fast. */
  private failure(err: unknown): unknown {
    if (timedOut(err)) this.failFastUntil = performance.now() + FAIL_FAST_MS;
    return fromPg(err);
  }

  /**
   * `q` with its errors translated. The pool's statements are refused at once while failing
   * fast (`admitting`); those of a connection already held are not: it was admitted when taken.
   */
  private translating(q: { query: (...args: any[]) => Promise<any> }, admitting: boolean): Queryable { // eslint-disable-line @typescript-eslint/no-explicit-any
    return {
      query: (text: string | pg.QueryConfig, values?: unknown[]) => {
        try {
          if (admitting) this.admit();
        } catch (err) {
          return Promise.reject(err);
        }
        return q.query(text, values).catch((err: unknown) => Promise.reject(this.failure(err)));
      },
    };
  }

  /** A pooled connection, within the bound (or UnavailableError). */
  private async connect(): Promise<pg.PoolClient> {
    this.admit();
    try {
      return await this.raw.connect();
    } catch (err) {
      const translated = this.failure(err);
      throw translated instanceof UnavailableError ? translated : new UnavailableError(err);
    }
  }

  /**
   * Runs `work` in one transaction, retrying serialization failures and deadlocks.
   * Every failure leaves as a storage error, so no SQLSTATE or driver text reaches callers.
   */
  async transaction<T>(work: (tx: Queryable) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const client = await this.connect();
      const tx = this.translating(client, false);
      // Set to destroy the connection rather than return it to the pool.
      let broken: Error | undefined;
      // A fresh list per attempt: what an attempt that rolled back asked for is dropped with it.
      const committed: (() => void)[] = [];
      this.onCommit.set(tx, committed);
      try {
        await tx.query("BEGIN");
        const result = await work(tx);
        await tx.query("COMMIT");
        // Past the COMMIT nothing may fail the transaction: a hint that throws is dropped.
        for (const f of committed) {
          try {
            f();
          } catch {
            // See afterCommit: hints only.
          }
        }
        return result;
      } catch (err) {
        // Translated by `tx` already, unless `work` threw it.
        const translated = fromPg(err);
        // A connection that broke or timed out (its statement may still be running, in a
        // transaction still open) is never used again, nor sent a ROLLBACK that would wait as long.
        if (translated instanceof UnavailableError) broken = translated;
        else await client.query("ROLLBACK").catch((e: unknown) => (broken = e instanceof Error ? e : new Error(String(e))));
        if (translated instanceof ConflictError && attempt < 5) continue;
        throw translated;
      } finally {
        client.release(broken);
      }
    }
  }

  /**
   * Runs `f` once what `q` wrote is committed: right after the COMMIT of the transaction `q`
   * belongs to (never if it rolls back), or at once when `q` is not a transaction's (a statement
   * on the pool has committed when it returns). For hints to readers elsewhere (event wake-ups,
   * docs/events.md), never for anything that must be atomic with the change. `f` must not throw.
   */
  afterCommit(q: Queryable, f: () => void): void {
    const committed = this.onCommit.get(q);
    if (committed) committed.push(f);
    else f();
  }

  /**
   * Runs `work` on one connection held for its duration, outside any transaction (session
   * state such as advisory locks lives as long as the connection; it is closed after, so no
   * such state outlives `work`).
   */
  async session<T>(work: (q: Queryable) => Promise<T>): Promise<T> {
    const client = await this.connect();
    let failed = false;
    try {
      return await work(this.translating(client, false));
    } catch (err) {
      failed = true;
      throw err;
    } finally {
      client.release(failed);
    }
  }

  /** The pool's connections now: open, idle (open, not in use) and callers waiting for one (metrics). */
  poolStats(): { total: number; idle: number; waiting: number } {
    return { total: this.raw.totalCount, idle: this.raw.idleCount, waiting: this.raw.waitingCount };
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

/** How long one database wait may take by default (MANDATE_DATABASE_TIMEOUT_MS). */
export const DEFAULT_DATABASE_TIMEOUT_MS = 3000;

/**
 * Creates the pool; `max` is sized for a 2-core machine's Postgres. Every wait on the database is
 * bounded by `timeoutMs` (docs/architecture.md, Error model), so that a Postgres that is down or
 * does not answer (a network partition, a frozen server) is a 503 `unavailable` in bounded time
 * and never a hang: opening a connection, waiting for a pooled one, and each statement (the
 * server's `statement_timeout`, and a read timeout a little later for a server that does not
 * answer at all). 0 leaves them unbounded (migrations, which may wait for another replica's).
 */
export function createDatabase(connectionString: string, max = 20, timeoutMs = DEFAULT_DATABASE_TIMEOUT_MS): Database {
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
  const bounds: pg.PoolConfig = timeoutMs > 0 ? { connectionTimeoutMillis: timeoutMs, query_timeout: timeoutMs + 500 } : {};
  const statementTimeout = timeoutMs > 0 ? ` -c statement_timeout=${timeoutMs}` : "";
  const pool = new pg.Pool({ connectionString, max, idleTimeoutMillis: 0, options: `-c plan_cache_mode=force_generic_plan -c enable_seqscan=off${statementTimeout}`, ...bounds });
  // An idle client losing its connection must not crash the process.
  pool.on("error", () => undefined);
  return new Database(pool);
}
