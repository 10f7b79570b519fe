/** Largest group one transaction takes. */
const MAX_BATCH = 256;

interface Queued<T> {
  item: T;
  resolve(): void;
  reject(err: unknown): void;
}

/**
 * Commits concurrent work of one lane together: an organization (appends to
 * its evidence chain serialize on its head row), or a writer that spans
 * organizations in one statement. One statement or transaction per group pays
 * the round trips, the lock and one fsync for many items instead of one each.
 * Nothing waits on a timer: whatever arrives while a group commits forms the
 * next group. `commit` returns the items it refused (with their error); the
 * others resolve once durable. If a whole group fails, each item is retried
 * alone so one bad item cannot fail its neighbours.
 */
export class GroupCommit<T> {
  private readonly queues = new Map<string, Queued<T>[]>();

  constructor(private readonly commit: (batch: readonly T[]) => Promise<Map<T, unknown>>) {}

  /** Queues `item` for its lane's next group; settles when committed or refused. */
  submit(lane: string, item: T): Promise<void> {
    return new Promise((resolve, reject) => {
      const queued = { item, resolve, reject };
      const queue = this.queues.get(lane);
      if (queue) {
        queue.push(queued);
        return;
      }
      this.queues.set(lane, [queued]);
      void this.drain(lane);
    });
  }

  private async settle(group: readonly Queued<T>[]): Promise<void> {
    const refused = await this.commit(group.map((q) => q.item));
    for (const q of group) {
      if (refused.has(q.item)) q.reject(refused.get(q.item));
      else q.resolve();
    }
  }

  private async drain(lane: string): Promise<void> {
    for (;;) {
      const queue = this.queues.get(lane)!;
      if (queue.length === 0) {
        this.queues.delete(lane);
        return;
      }
      const group = queue.splice(0, MAX_BATCH);
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
  }
}
