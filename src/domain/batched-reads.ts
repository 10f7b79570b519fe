/** Largest number of keys one query takes. */
const MAX_BATCH = 256;

interface Waiting<K, V> {
  key: K;
  resolve(value: V): void;
  reject(err: unknown): void;
}

/**
 * Reads that arrive while earlier ones are in flight go to the database
 * together as one query. A lone read goes at once, so a quiet service adds no
 * latency; under load, one round trip (one write, one parse, one plan) serves
 * every request that arrived meanwhile. Nothing waits on a timer.
 */
export class BatchedReads<K, V> {
  private waiting: Waiting<K, V>[] = [];
  private running = 0;

  /** `fetch` returns one value per key, in order; `parallel` queries may be in flight at once. */
  constructor(
    private readonly fetch: (keys: readonly K[]) => Promise<V[]>,
    private readonly parallel = 2,
  ) {}

  get(key: K): Promise<V> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ key, resolve, reject });
      if (this.running < this.parallel) void this.run();
    });
  }

  private async run(): Promise<void> {
    this.running++;
    try {
      while (this.waiting.length > 0) {
        const batch = this.waiting.splice(0, MAX_BATCH);
        try {
          const values = await this.fetch(batch.map((w) => w.key));
          batch.forEach((w, i) => w.resolve(values[i]!));
        } catch (err) {
          for (const w of batch) w.reject(err);
        }
      }
    } finally {
      this.running--;
    }
  }
}
