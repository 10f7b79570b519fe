import pg from "pg";
import type { EventNotifications } from "../events.js";

/** The channel migration 014's trigger notifies, with a comma-separated list of organization ids (or `*`). */
export const EVENTS_CHANNEL = "mandate_events";
/** How the listening connection names itself in pg_stat_activity. */
export const APPLICATION_NAME = "mandate-event-notifications";

/** Backoff between reconnection attempts, doubling from the first to the last. */
const RECONNECT_MIN_MS = 100;
const RECONNECT_MAX_MS = 5000;
/**
 * How often an idle listening connection is checked with a query. A connection cut without a FIN
 * (a partition) reports nothing until written to; until it is found dead, readers only learn of
 * records from their own polling (slower, never lost).
 */
const CHECK_INTERVAL_MS = 30_000;

/**
 * Wake-ups for event readers over Postgres LISTEN/NOTIFY: ONE dedicated connection per process
 * (not a pooled one: LISTEN is session state), fanned out in process to subscribers by
 * organization. The connection is opened on the first subscription, each attempt bounded by
 * `connectTimeoutMs`, and reopened with backoff whenever it fails; after every (re)connection all
 * subscribers are woken, since notifications sent meanwhile are lost.
 */
export class PostgresEventNotifications implements EventNotifications {
  private readonly byOrganization = new Map<string, Set<() => void>>();
  private readonly everyOrganization = new Set<(organizationId: string | null) => void>();
  private client: pg.Client | null = null;
  private connecting = false;
  private closed = false;
  private backoffMs = RECONNECT_MIN_MS;
  private retry: NodeJS.Timeout | undefined;
  private check: NodeJS.Timeout | undefined;

  constructor(
    private readonly connectionString: string,
    private readonly options: { connectTimeoutMs: number; onError?: (err: unknown) => void },
  ) {}

  subscribe(organizationId: string, listener: () => void): () => void {
    let set = this.byOrganization.get(organizationId);
    if (!set) this.byOrganization.set(organizationId, (set = new Set()));
    set.add(listener);
    this.ensureConnected();
    return () => {
      const current = this.byOrganization.get(organizationId);
      if (!current) return;
      current.delete(listener);
      if (current.size === 0) this.byOrganization.delete(organizationId);
    };
  }

  /**
   * Calls `listener` after records of any organization were committed, with its id (null when the
   * wake-up may concern any organization: after a reconnection, or a statement spanning many).
   */
  subscribeAll(listener: (organizationId: string | null) => void): () => void {
    this.everyOrganization.add(listener);
    this.ensureConnected();
    return () => this.everyOrganization.delete(listener);
  }

  /** Whether the listening connection is up now (for tests and readiness, not for correctness). */
  get listening(): boolean {
    return this.client !== null;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    clearInterval(this.check);
    this.byOrganization.clear();
    this.everyOrganization.clear();
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => undefined);
  }

  private ensureConnected(): void {
    if (this.closed || this.client !== null || this.connecting || this.retry !== undefined) return;
    this.connecting = true;
    void this.connect().finally(() => (this.connecting = false));
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.connectionString, application_name: APPLICATION_NAME, connectionTimeoutMillis: this.options.connectTimeoutMs, query_timeout: this.options.connectTimeoutMs, keepAlive: true });
    // Registered before connecting: an error at any point must not be an unhandled 'error' event.
    let failed = false;
    const fail = (err: unknown) => {
      if (failed) return;
      failed = true;
      if (this.client === client) this.client = null;
      clearInterval(this.check);
      client.end().catch(() => undefined);
      if (!this.closed) {
        this.options.onError?.(err);
        this.scheduleReconnect();
      }
    };
    client.on("error", fail);
    client.on("end", () => fail(new Error("event notification connection ended")));
    client.on("notification", (n) => {
      if (n.channel === EVENTS_CHANNEL) this.dispatch(n.payload ?? "*");
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${EVENTS_CHANNEL}`);
    } catch (err) {
      fail(err);
      return;
    }
    if (this.closed || failed) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    this.backoffMs = RECONNECT_MIN_MS;
    this.check = setInterval(() => {
      client.query("SELECT 1").catch(fail);
    }, CHECK_INTERVAL_MS);
    this.check.unref();
    // Whatever was committed while no connection listened went unannounced.
    this.dispatch("*");
  }

  private scheduleReconnect(): void {
    if (this.closed || this.retry !== undefined) return;
    const delay = this.backoffMs;
    this.backoffMs = Math.min(RECONNECT_MAX_MS, this.backoffMs * 2);
    this.retry = setTimeout(() => {
      this.retry = undefined;
      this.ensureConnected();
    }, delay);
    this.retry.unref();
  }

  private dispatch(payload: string): void {
    const call = (f: () => void) => {
      try {
        f();
      } catch (err) {
        this.options.onError?.(err);
      }
    };
    if (payload === "*") {
      for (const set of this.byOrganization.values()) for (const f of set) call(f);
      for (const f of this.everyOrganization) call(() => f(null));
      return;
    }
    for (const organizationId of payload.split(",")) {
      for (const f of this.byOrganization.get(organizationId) ?? []) call(f);
      for (const f of this.everyOrganization) call(() => f(organizationId));
    }
  }
}
