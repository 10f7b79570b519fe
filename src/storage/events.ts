/*
 * Reading an organization's evidence log as its event stream (docs/events.md). There is no event
 * table: events are projected from the evidence records (src/domain/events.ts), which every change
 * writes in its own transaction, so this contract only reads, and wakes readers when records land.
 */

/** One evidence record as the event projection reads it. */
export interface EventSourceRecord {
  evidence_id: string;
  seq: number;
  kind: string;
  /** ISO 8601 UTC with three fractional digits (the record's own created_at). */
  created_at: string;
  digest: string;
  payload: Record<string, unknown>;
}

/** Where a record sits in its organization's chain, and when it was made. */
export interface RecordPosition {
  seq: number;
  createdAt: Date;
}

/**
 * An organization's evidence records in chain order, for the event stream and webhook delivery.
 *
 * Guarantees, for any implementation:
 * - **No gap.** Records of one organization become visible in `seq` order: once a reader has seen
 *   seq n, no record with a smaller seq appears later. (Postgres: appends of one organization
 *   serialize on the chain head, and records and head commit together.)
 * - **Only committed records.** A change that rolled back left no record, hence no event.
 * - **Immutable.** A record read once reads the same for ever; the evidence itself is never
 *   deleted. The retention window (`since`) only bounds what is served as events.
 *
 * Every method throws UnavailableError (storage/errors.ts) when the store cannot be reached.
 */
export interface EventLogStore {
  /**
   * Up to `limit` records of the organization with seq > `afterSeq` and created at or after
   * `since`, in seq order; when `kinds` is given, only records of those kinds (the others are
   * skipped, never returned). An empty array when none exist yet.
   */
  after(organizationId: string, afterSeq: number, since: Date, limit: number, kinds?: readonly string[]): Promise<EventSourceRecord[]>;
  /** The seq of the organization's last committed record now (0 when it has none). */
  head(organizationId: string): Promise<number>;
  /** The seq and time of the organization's record `evidenceId`; null when it has no such record. */
  position(organizationId: string, evidenceId: string): Promise<RecordPosition | null>;
}

/**
 * Wake-ups when records are committed: a hint, never the data (a reader always reads the store
 * after waking). Delivery is best effort: a wake-up may be lost (a dropped connection, a crash
 * right after a commit) or spurious, so a reader also re-reads on a timer of its own.
 */
export interface EventNotifications {
  /**
   * Says that records of these organizations were just committed: wakes this process's
   * subscribers at once and other processes' (replicas) as soon as it can. Called by the storage
   * that appended them, after the commit and outside it; never throws.
   */
  announce(organizationIds: readonly string[]): void;
  /**
   * Calls `listener` (synchronously, without arguments; it must not throw) after records of
   * `organizationId` were committed, and also whenever wake-ups may have been missed (after a
   * reconnection). Returns the function that unsubscribes.
   */
  subscribe(organizationId: string, listener: () => void): () => void;
  /**
   * As `subscribe`, for every organization: `listener` gets the organization's id, or null when
   * the wake-up may concern any organization (after a reconnection, or one write spanning many).
   */
  subscribeAll(listener: (organizationId: string | null) => void): () => void;
  /** Stops listening; subscribers are no longer called. */
  close(): Promise<void>;
}
