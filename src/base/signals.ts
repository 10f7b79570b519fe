/**
 * The signals that stop the service gracefully: it drains requests in flight, then stops what it
 * started (the embedded Postgres last). SIGHUP is among them because a closed terminal sends it.
 * `mandate serve` passes them on, and the embedded Postgres package's own exit hook is taken off
 * exactly these, so the list lives in one place.
 */
export const STOP_SIGNALS = ["SIGTERM", "SIGINT", "SIGHUP"] as const;

export type StopSignal = (typeof STOP_SIGNALS)[number];

/** Whether `signal` is one of STOP_SIGNALS. */
export function isStopSignal(signal: string | null): signal is StopSignal {
  return (STOP_SIGNALS as readonly (string | null)[]).includes(signal);
}
