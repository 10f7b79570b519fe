/*
 * Waiting without sleeping on wall time: a test waits for an event it can name
 * (a barrier), or, when the condition is only observable from outside (an expiry
 * lapsing on the service's clock, a client reconnecting), polls it with a deadline.
 * A fixed sleep is never a synchronisation.
 */

/** A promise with its resolve and reject, for one side to open what the other awaits. */
export interface Deferred<T = void> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(err: unknown): void;
}

export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/**
 * Calls `probe` until it returns something other than `undefined` or `false`
 * and returns that; throws naming `what` once `timeoutMs` have passed. The
 * interval only paces the polling, the outcome never depends on it.
 */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined | false> | T | undefined | false,
  { timeoutMs = 10_000, intervalMs = 50 }: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() >= deadline) throw new Error(`waited ${timeoutMs} ms for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** `promise`, or an error naming `what` if it has not settled within `timeoutMs` (a watchdog, not a synchronisation). */
export function within<T>(what: string, promise: Promise<T>, timeoutMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const watchdog = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${timeoutMs} ms`)), timeoutMs);
  });
  return Promise.race([promise, watchdog]).finally(() => clearTimeout(timer));
}
