import { randomBytes } from "node:crypto";
import pg from "pg";
import type { EventNotifications } from "../events.js";

/**
 * The channel replicas announce commits on. A payload is `<origin>|<organization ids, comma-
 * separated>` (or `*` for every organization); `origin` names the sending process, which has
 * woken its own subscribers already and ignores its echo.
 */
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
/** A NOTIFY payload must stay under 8000 bytes; ids are joined up to this many per payload. */
const PAYLOAD_BYTES = 7000;
/** Past this many organizations waiting to be announced, one `*` says it for all. */
const MAX_PENDING = 10_000;

/**
 * Wake-ups for event readers (docs/events.md, Waking). The storage that appends evidence calls
 * `announce` after each commit; this wakes the process's own subscribers at once and tells the
 * other replicas with a NOTIFY on ONE dedicated connection per process (LISTEN is session state,
 * so not a pooled one), which also LISTENs and fans their announcements out to subscribers here.
 *
 * Why not a NOTIFY inside the writing transaction (a trigger on evidence_records): Postgres
 * serializes the commits of every transaction that has notified, WAL flush included, under one
 * cluster-wide lock, and decisions commit concurrently; announcing after the commit, from this
 * connection, keeps that lock off the decision path (docs/events.md has the measurement). The
 * price is that a crash between a commit and its announcement loses the wake-up, which readers'
 * own polling covers, as it covers a dropped connection.
 *
 * At most one NOTIFY is in flight; what is announced meanwhile goes out in the next, merged. The
 * connection is opened on first use, each attempt bounded by `connectTimeoutMs`, and reopened with
 * backoff whenever it fails; after every (re)connection all subscribers are woken, since
 * announcements sent meanwhile are lost.
 */
export class PostgresEventNotifications implements EventNotifications {
  private readonly byOrganization = new Map<string, Set<() => void>>();
  private readonly everyOrganization = new Set<(organizationId: string | null) => void>();
  /** This process, in payloads (its echo is ignored). */
  private readonly origin = randomBytes(8).toString("hex");
  private client: pg.Client | null = null;
  private connecting = false;
  private closed = false;
  private backoffMs = RECONNECT_MIN_MS;
  private retry: NodeJS.Timeout | undefined;
  private check: NodeJS.Timeout | undefined;
  /** Organizations announced here and not yet sent to the other replicas. */
  private readonly pending = new Set<string>();
  private sending = false;

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

  subscribeAll(listener: (organizationId: string | null) => void): () => void {
    this.everyOrganization.add(listener);
    this.ensureConnected();
    return () => this.everyOrganization.delete(listener);
  }

  announce(organizationIds: readonly string[]): void {
    if (this.closed) return;
    for (const id of organizationIds) this.wake(id);
    // Kept while no connection is up (sent once one is: the replicas' polling covers the wait).
    for (const id of organizationIds) this.pending.add(id);
    // Many organizations waiting (a long disconnection): one `*` says it for all, in bounded memory.
    if (this.pending.size > MAX_PENDING) {
      this.pending.clear();
      this.pending.add("*");
    }
    if (this.client === null) this.ensureConnected();
    else if (!this.sending) void this.send(this.client);
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
    this.pending.clear();
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => undefined);
  }

  /** Sends what is pending, one NOTIFY at a time, until nothing is. */
  private async send(client: pg.Client): Promise<void> {
    this.sending = true;
    try {
      while (this.pending.size > 0 && this.client === client) {
        const ids = this.pending.has("*") ? ["*"] : [...this.pending];
        this.pending.clear();
        for (const payload of payloads(ids)) await client.query("SELECT pg_notify($1, $2)", [EVENTS_CHANNEL, `${this.origin}|${payload}`]);
      }
    } catch (err) {
      // The connection failed (its handlers reconnect, and what is pending then goes out with the
      // next connection) or the statement did: the replicas poll meanwhile.
      this.options.onError?.(err);
    } finally {
      this.sending = false;
    }
  }

  private ensureConnected(): void {
    if (this.closed || this.client !== null || this.connecting || this.retry !== undefined) return;
    this.connecting = true;
    void this.connect().finally(() => (this.connecting = false));
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({
      connectionString: this.connectionString,
      application_name: APPLICATION_NAME,
      connectionTimeoutMillis: this.options.connectTimeoutMs,
      query_timeout: this.options.connectTimeoutMs,
      keepAlive: true,
    });
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
      if (n.channel !== EVENTS_CHANNEL) return;
      const payload = n.payload ?? "*";
      const bar = payload.indexOf("|");
      if (bar >= 0 && payload.slice(0, bar) === this.origin) return;
      this.dispatch(bar >= 0 ? payload.slice(bar + 1) : payload);
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
    // Whatever was committed while no connection listened went unannounced, here and elsewhere.
    this.dispatch("*");
    if (this.pending.size > 0 && !this.sending) void this.send(client);
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

  /** Wakes the subscribers of a comma-separated list of organization ids, or of all for `*`. */
  private dispatch(ids: string): void {
    if (ids === "*") {
      for (const set of this.byOrganization.values()) for (const f of set) this.call(f);
      for (const f of this.everyOrganization) this.call(() => f(null));
      return;
    }
    for (const id of ids.split(",")) this.wake(id);
  }

  private wake(organizationId: string): void {
    for (const f of this.byOrganization.get(organizationId) ?? []) this.call(f);
    for (const f of this.everyOrganization) this.call(() => f(organizationId));
  }

  private call(f: () => void): void {
    try {
      f();
    } catch (err) {
      this.options.onError?.(err);
    }
  }
}

/** `ids` joined by commas into payloads of at most PAYLOAD_BYTES each. */
function payloads(ids: readonly string[]): string[] {
  const out: string[] = [];
  let current = "";
  for (const id of ids) {
    if (current !== "" && Buffer.byteLength(current) + 1 + Buffer.byteLength(id) > PAYLOAD_BYTES) {
      out.push(current);
      current = "";
    }
    current = current === "" ? id : `${current},${id}`;
  }
  if (current !== "") out.push(current);
  return out;
}
