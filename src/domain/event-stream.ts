import type { OrgCaller } from "../base/caller.js";
import { MandateError, validationFailed, type FieldError } from "../base/errors.js";
import type { EventLogStore, EventNotifications } from "../storage/events.js";
import { isEventType, kindsOf, parseEventId, projectEvents, type EventEnvelope, type EventType } from "./events.js";

/** How the live stream is bounded (docs/events.md). */
export interface EventStreamLimits {
  /** Events older than this are not served, and a cursor older than this is refused (MANDATE_EVENT_RETENTION_DAYS). */
  retentionDays: number;
  /** Open streams per organization; one more is 429 `rate_limited`. */
  maxWatchersPerOrganization: number;
  /** A stream silent this long sends a heartbeat. */
  heartbeatMs: number;
  /** How often a waiting stream reads the log even without a wake-up (a lost notification must not lose events). */
  pollMs: number;
  /** Records read per query. */
  pageSize: number;
}

export const DEFAULT_EVENT_STREAM_LIMITS: EventStreamLimits = {
  retentionDays: 7,
  maxWatchersPerOrganization: 16,
  heartbeatMs: 15_000,
  pollMs: 2_000,
  pageSize: 200,
};

/** What a stream yields: an event, or a heartbeat (also the first item, once the stream listens). */
export type StreamItem = { event: EventEnvelope } | { heartbeatAt: Date };

/** A stream's request: event names (all when empty) and the cursor (from now when empty). */
export interface WatchRequest {
  types: readonly string[];
  after: string;
}

const DAY_MS = 86_400_000;
/** Beyond any event index: a cursor at (seq, ALL) has seen every event of record seq. */
const ALL = Number.MAX_SAFE_INTEGER;

/**
 * The live event stream of an organization: reads its evidence log after a cursor, projects each
 * record to events (domain/events.ts), then waits for a wake-up (storage notifications), a poll
 * tick or a heartbeat, and reads again. Exactly once on resume: a cursor is an event id, which
 * names a position (record seq, event index), and the stream sends only what lies after it, in
 * order; records of one organization become visible in seq order (storage/events.ts), so nothing
 * lands behind a position already passed.
 */
export class EventStreams {
  private readonly open = new Map<string, number>();
  /** Set by close(): every stream ends, and no new one opens. */
  private closed = false;
  /** How to wake each open stream (a Set, not listeners on one shared AbortSignal: there may be many). */
  private readonly streams = new Set<() => void>();

  constructor(
    private readonly store: EventLogStore,
    private readonly notifications: EventNotifications,
    private readonly limits: EventStreamLimits = DEFAULT_EVENT_STREAM_LIMITS,
    /** Throws when the caller's credential no longer admits it (Credentials.recheck); asked before anything is sent after the first heartbeat. */
    private readonly recheck: (caller: OrgCaller) => Promise<void> = async () => undefined,
  ) {}

  /**
   * A stream of the caller's organization; its first item is a heartbeat, once it listens. Or a
   * refusal, thrown by the first `next()` before anything is sent: 422
   * `validation_failed` for an unknown event name (`types[i]`) or a cursor that is malformed, not
   * this organization's, or older than the retention window (`after`); 429 `rate_limited` when the
   * organization already has its maximum of open streams. The stream ends when `signal` aborts
   * (the client left) and fails with 503 `unavailable` when the service shuts down, or the log
   * cannot be read; the client resumes with the last event_id it received. It fails as a new
   * request would (401, 403) before sending anything read after its key was revoked or its
   * organization suspended.
   */
  async *watch(caller: OrgCaller, request: WatchRequest, signal: AbortSignal): AsyncGenerator<StreamItem, void, undefined> {
    // Everything, refusals included, happens on the first `next()`: a stream that is never read
    // holds no slot (an async generator's `finally` runs only once its body has started).
    const organizationId = caller.organizationId;
    const errors: FieldError[] = [];
    const types = new Set<EventType>();
    request.types.forEach((t, i) => {
      if (isEventType(t)) types.add(t);
      else errors.push({ field: `types[${i}]`, code: "invalid_enum", message: `unknown event name ${JSON.stringify(t.slice(0, 64))}` });
    });
    if (errors.length) throw validationFailed(errors);
    const since = () => new Date(Date.now() - this.limits.retentionDays * DAY_MS);
    let start: { seq: number; index: number };
    if (request.after === "") {
      start = { seq: await this.store.head(organizationId), index: ALL };
    } else {
      const position = parseEventId(request.after);
      const found = position ? await this.store.position(organizationId, position.evidenceId) : null;
      if (!position || !found || found.seq !== position.seq) {
        throw validationFailed([{ field: "after", code: "unknown_cursor", message: "not an event_id of this organization" }]);
      }
      if (found.createdAt < since()) {
        throw validationFailed([{ field: "after", code: "cursor_expired", message: `older than the ${this.limits.retentionDays}-day event retention; start again without a cursor` }]);
      }
      start = { seq: position.seq, index: position.index };
    }
    if (this.closed) throw new MandateError("unavailable", "The service is shutting down; connect again.");
    const count = this.open.get(organizationId) ?? 0;
    if (count >= this.limits.maxWatchersPerOrganization) {
      throw new MandateError("rate_limited", `At most ${this.limits.maxWatchersPerOrganization} event streams may be open per organization.`);
    }
    this.open.set(organizationId, count + 1);
    try {
      yield* this.run(caller, start, types.size > 0 ? types : null, since, signal);
    } finally {
      const left = (this.open.get(organizationId) ?? 1) - 1;
      if (left > 0) this.open.set(organizationId, left);
      else this.open.delete(organizationId);
    }
  }

  /** Ends every open stream (503 `unavailable`, so clients resume elsewhere): the service is shutting down. */
  close(): void {
    this.closed = true;
    for (const wake of this.streams) wake();
  }

  /** Open streams of one organization (metrics, tests). */
  openStreams(organizationId: string): number {
    return this.open.get(organizationId) ?? 0;
  }

  private async *run(
    caller: OrgCaller,
    start: { seq: number; index: number },
    types: ReadonlySet<EventType> | null,
    since: () => Date,
    signal: AbortSignal,
  ): AsyncGenerator<StreamItem, void, undefined> {
    const organizationId = caller.organizationId;
    const { pageSize, pollMs, heartbeatMs } = this.limits;
    const kinds = types ? kindsOf(types) : undefined;
    // A wake-up that arrives while reading is kept, so the next wait returns at once.
    const waiting: { woken: boolean; wake: (() => void) | null } = { woken: false, wake: null };
    const rouse = () => {
      waiting.woken = true;
      waiting.wake?.();
    };
    const unsubscribe = this.notifications.subscribe(organizationId, rouse);
    signal.addEventListener("abort", rouse);
    this.streams.add(rouse);
    let cursor = start;
    try {
      let lastSent = Date.now();
      yield { heartbeatAt: new Date(lastSent) };
      for (;;) {
        if (signal.aborted) return;
        if (this.closed) throw new MandateError("unavailable", "The service is shutting down; resume after the last event_id received.");
        waiting.woken = false;
        // A cursor in the middle of a record's events reads that record again for its rest.
        const afterSeq = cursor.index === ALL ? cursor.seq : cursor.seq - 1;
        const records = await this.store.after(organizationId, afterSeq, since(), pageSize, kinds);
        // Asked after the read: a revocation committed before anything read here was recorded is seen.
        if (records.length > 0) await this.recheck(caller);
        for (const record of records) {
          for (const [index, event] of projectEvents(record).entries()) {
            if (record.seq === cursor.seq && index <= cursor.index) continue;
            if (types && !types.has(event.event)) continue;
            yield { event };
            lastSent = Date.now();
            if (signal.aborted) return;
          }
          cursor = { seq: record.seq, index: ALL };
        }
        if (records.length === pageSize) continue;
        const silentFor = Date.now() - lastSent;
        if (silentFor >= heartbeatMs) {
          await this.recheck(caller);
          lastSent = Date.now();
          yield { heartbeatAt: new Date(lastSent) };
          continue;
        }
        if (waiting.woken || signal.aborted || this.closed) continue;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, Math.min(pollMs, heartbeatMs - silentFor));
          waiting.wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        waiting.wake = null;
      }
    } finally {
      unsubscribe();
      signal.removeEventListener("abort", rouse);
      this.streams.delete(rouse);
    }
  }
}
