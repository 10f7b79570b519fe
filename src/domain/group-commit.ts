/** Largest group one transaction takes. */
const MAX_BATCH = 256;

interface Queued<T> {
  item: T;
  resolve(): void;
  reject(err: unknown): void;
}

/**
 * Commits concurrent work of one organization together. Appends to an
 * organization's evidence chain serialize on its head row, so one transaction
 * per group pays that lock and one fsync for many items instead of one each.
 * Nothing waits on a timer: whatever arrives while a group commits forms the
 * next group. `commit` returns the items it refused (with their error); the
 * others resolve once durable. If a whole group fails, each item is retried
 * alone so one bad item cannot fail its neighbours.
 */
export class GroupCommit<T> {
  private readonly queues = new Map<string, Queued<T>[]>();

  constructor(private readonly commit: (batch: readonly T[]) => Promise<Map<T, unknown>>) {}

  /** Queues `item` for its organization's next group; settles when committed or refused. */
  submit(organizationId: string, item: T): Promise<void> {
    return new Promise((resolve, reject) => {
      const queued = { item, resolve, reject };
      const queue = this.queues.get(organizationId);
      if (queue) {
        queue.push(queued);
        return;
      }
      this.queues.set(organizationId, [queued]);
      void this.drain(organizationId);
    });
  }

  private async settle(group: readonly Queued<T>[]): Promise<void> {
    const refused = await this.commit(group.map((q) => q.item));
    for (const q of group) {
      if (refused.has(q.item)) q.reject(refused.get(q.item));
      else q.resolve();
    }
  }

  private async drain(organizationId: string): Promise<void> {
    for (;;) {
      const queue = this.queues.get(organizationId)!;
      if (queue.length === 0) {
        this.queues.delete(organizationId);
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
