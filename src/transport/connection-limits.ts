/** How long a connection may take over each part of its life, and how many one address may hold. */
export interface ConnectionLimits {
  /** From accepting a connection (or starting a request on a kept-alive one) until its request headers are complete. */
  headersTimeoutMs: number;
  /** From the start of a request until it has been received whole (the body included); not the answer. */
  requestTimeoutMs: number;
  /** An HTTP/1.1 connection between requests, an HTTP/2 connection with no stream open. */
  idleTimeoutMs: number;
  /** Open connections per client address; one more is closed as soon as it is accepted. */
  maxPerAddress: number;
}

export const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = { headersTimeoutMs: 10_000, requestTimeoutMs: 30_000, idleTimeoutMs: 60_000, maxPerAddress: 256 };
