/** Largest group one commit takes. */
const MAX_BATCH = 256;
/** While groups follow one another, a next group smaller than this first waits (when the writer asks for it) for company. */
const LINGER_BELOW = 8;

/** The wait a writer may pass to GroupCommit to let a small group gather company: 1 ms. */
export const waitForCompany = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 1));

interface Queued<T, R> {
  item: T;
  resolve(result: R): void;
  reject(err: unknown): void;
}

/**
 * Commits concurrent items of one writer together: one statement or transaction per group
 * pays the round trips, the locks and one fsync for many items instead of one each. A lone
 * item goes at once, so a quiet service adds no latency; whatever arrives while a group
 * commits forms the next group. `commit` returns one settled result per item, in order, and
 * each item's promise settles as its own did. If a whole group fails, each item is tried alone, so
 * one bad item cannot fail its neighbours.
 *
 * A writer may pass `linger` (waitForCompany): then, under a steady stream, a next group of
 * fewer than LINGER_BELOW items first waits for company, as Postgres's commit_delay does for
 * WAL flushes: fewer, larger groups cost less CPU per item for a little latency (measured in
 * docs/performance.md).
 *
 * The waiting items are a plain array swapped per group, not entries added to and deleted from
 * a long-lived Map, which would keep what it held alive until a full collection.
 */
export class GroupCommit<T, R> {
  private waiting: Queued<T, R>[] = [];
  private draining = false;

  constructor(
    private readonly commit: (batch: readonly T[]) => Promise<PromiseSettledResult<R>[]>,
    /** How a small group that follows another waits for company; null: it does not wait. */
    private readonly linger: (() => Promise<void>) | null = null,
  ) {}

  /** Queues `item` for the next group; resolves with its result once committed. */
  submit(item: T): Promise<R> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      if (!this.draining) void this.drain();
    });
  }

  private async settle(group: readonly Queued<T, R>[]): Promise<void> {
    const results = await this.commit(group.map((q) => q.item));
    group.forEach((q, i) => {
      const result = results[i]!;
      if (result.status === "fulfilled") q.resolve(result.value);
      else q.reject(result.reason);
    });
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
