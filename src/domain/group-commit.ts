/** Largest group one transaction takes. */
const MAX_BATCH = 256;
/** While groups follow one another, a next group smaller than this first waits (when the writer asks for it) for company. */
const LINGER_BELOW = 8;

/** The wait writers pass to GroupCommit to let a small group gather company: 1 ms. */
export const waitForCompany = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 1));

interface Queued<T> {
  item: T;
  resolve(): void;
  reject(err: unknown): void;
}

/**
 * Commits concurrent work of one writer together (every writer spans
 * organizations; see commitAcrossOrganizations). One statement or transaction
 * per group pays the round trips, the locks and one fsync for many items
 * instead of one each. A lone item goes at once, so a quiet service adds no
 * latency; whatever arrives while a group commits forms the next group. `commit`
 * returns the items it refused (with their error); the others resolve once
 * durable. If a whole group fails, each item is retried alone so one bad item
 * cannot fail its neighbours.
 *
 * A writer may pass `linger` (the decision writer passes waitForCompany): then,
 * under a steady stream, a next group of fewer than LINGER_BELOW items first
 * waits for company, as Postgres's commit_delay does for WAL flushes:
 * at 1,000 Intents/s groups were ~2.5 decisions and the cost per statement
 * dominated. With the wait, CPU per decision at that rate (gRPC) fell from 845
 * to 763 µs in the service and from 390 to 315 µs in Postgres, for a p50 ~2 ms
 * higher (~5 against ~3.5 ms). The headroom is what it buys: on this 2-core
 * machine a pause (a full garbage collection) takes the longer to catch up on
 * the busier the machine is. The tail did not clearly follow: the bench's gRPC
 * p99 at 1,000/s met 20 ms in four of six runs with the wait and four of eight
 * without, all measured while full collections still came every second or two
 * (before h2-stream-tables.ts and the spread-free Intents.record). Capability
 * issues and consumes do not wait: with it, consumes at max concurrency fell
 * from ~3,450 to ~3,000/s (bench, Redis path).
 *
 * The waiting items are a plain array swapped per group, not entries added to
 * and deleted from a long-lived Map: V8 keeps what such a Map held alive until
 * a full collection (see transport/h2-stream-tables.ts).
 */
export class GroupCommit<T> {
  private waiting: Queued<T>[] = [];
  private draining = false;

  constructor(
    private readonly commit: (batch: readonly T[]) => Promise<Map<T, unknown>>,
    /** How a small group that follows another waits for company; null: it does not wait. */
    private readonly linger: (() => Promise<void>) | null = null,
  ) {}

  /** Queues `item` for the next group; settles when committed or refused. */
  submit(item: T): Promise<void> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      if (!this.draining) void this.drain();
    });
  }

  private async settle(group: readonly Queued<T>[]): Promise<void> {
    const refused = await this.commit(group.map((q) => q.item));
    for (const q of group) {
      if (refused.has(q.item)) q.reject(refused.get(q.item));
      else q.resolve();
    }
  }

  private async drain(): Promise<void> {
    this.draining = true;
    for (let streak = false; this.waiting.length > 0; streak = true) {
      if (this.linger && streak && this.waiting.length < LINGER_BELOW) await this.linger();
      const group = this.waiting.length <= MAX_BATCH ? this.waiting : this.waiting.slice(0, MAX_BATCH);
      this.waiting = group === this.waiting ? [] : this.waiting.slice(MAX_BATCH);
      try {
        await this.settle(group);
      } catch (err) {
        if (group.length === 1) {
          group[0]!.reject(err);
          continue;
        }
        for (const q of group) await this.settle([q]).catch((e: unknown) => q.reject(e));
      }
    }
    this.draining = false;
  }
}

/** How a writer whose group spans organizations commits it (see commitAcrossOrganizations). */
export interface AcrossOrganizations<T> {
  organizationOf(item: T): string;
  /** ONE statement for the items of every organization; resolves with the items of the organizations it did not write. */
  checked(items: readonly T[]): Promise<T[]>;
  /** A transaction for the items of one organization, under its chain lock; resolves with the items it refused and why. */
  locking(items: readonly T[]): Promise<Map<T, unknown>>;
}

/**
 * Commits a group of items of any organizations: `checked` for all of them, once more for the
 * organizations it did not write (another writer moved a head, a check failed), then `locking`
 * for each organization still left, and for the items in `lockOnly` from the start. A failure
 * before anything is written rejects the whole group (GroupCommit then tries each item alone);
 * after that it is contained, so an organization already written never goes round again: a
 * failed checked retry sends its items to `locking`, and a failed `locking` of several items
 * is tried item by item. Returns the refused items with their error.
 */
export async function commitAcrossOrganizations<T>(batch: readonly T[], lockOnly: ReadonlySet<T>, w: AcrossOrganizations<T>): Promise<Map<T, unknown>> {
  let pending = batch.filter((item) => !lockOnly.has(item));
  for (let attempt = 0; attempt < 2 && pending.length > 0; attempt++) {
    try {
      pending = await w.checked(pending);
    } catch (err) {
      if (attempt === 0) throw err;
      break;
    }
  }
  const byOrganization = new Map<string, T[]>();
  for (const item of [...lockOnly, ...pending]) {
    const items = byOrganization.get(w.organizationOf(item));
    if (items) items.push(item);
    else byOrganization.set(w.organizationOf(item), [item]);
  }
  const refused = new Map<T, unknown>();
  const lockEach = async (items: readonly T[]) => {
    try {
      for (const [item, err] of await w.locking(items)) refused.set(item, err);
    } catch (err) {
      if (items.length === 1) refused.set(items[0]!, err);
      else for (const item of items) await lockEach([item]);
    }
  };
  await Promise.all([...byOrganization.values()].map(lockEach));
  return refused;
}
