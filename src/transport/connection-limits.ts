import http2 from "node:http2";

/** How long a connection may take over each part of its life, and how many one address may hold. */
export interface ConnectionLimits {
  /** From accepting a connection (or starting a request on a kept-alive one) until its request headers are complete. */
  headersTimeoutMs: number;
  /** From the start of a request (an HTTP/2 stream included) until it has been received whole (the body included); not the answer. */
  requestTimeoutMs: number;
  /** An HTTP/1.1 connection between requests, an HTTP/2 connection with no stream open. */
  idleTimeoutMs: number;
  /** Open connections per client address; one more is closed as soon as it is accepted. */
  maxPerAddress: number;
  /**
   * Peers `maxPerAddress` does not apply to (addresses or CIDR ranges): the trusted reverse proxies
   * of MANDATE_TRUSTED_PROXIES, whose connections carry every client's requests and which limit
   * their own clients; capping them would throttle every user at once.
   */
  trustedProxies: readonly string[];
}

export const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = {
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  idleTimeoutMs: 60_000,
  maxPerAddress: 256,
  trustedProxies: [],
};

/** Holds HTTP/2 streams to the request deadline; `stop` ends its checking (the server is closing). */
export interface StreamDeadlines {
  watch(stream: http2.ServerHttp2Stream): void;
  stop(): void;
}

/** A stream still being received, in a list kept oldest first (insertion order is start order). */
class Receiving {
  prev: Receiving | null = null;
  next: Receiving | null = null;
  constructor(
    public stream: http2.ServerHttp2Stream | null,
    readonly due: number,
  ) {}
}

/**
 * The request deadline of HTTP/2 streams (`requestTimeoutMs`), as Node's `requestTimeout` is for
 * HTTP/1.1: a stream whose request has not been received whole (the client has not ended its side)
 * within the deadline of its HEADERS is reset with RST_STREAM CANCEL; the session and its other
 * streams go on. A stream whose request has arrived whole is not cut, however long its answer
 * takes: the deadline covers what the client owes, not the service's work.
 *
 * CANCEL, not an answer: what gRPC's HTTP/2 mapping prescribes for a server that cancels a call
 * whose request bytes are incomplete (clients report CANCELLED; connect-node Canceled; a plain
 * HTTP/2 client a reset stream), and the counterpart of HTTP/1.1, where a late request's
 * connection is closed unanswered. An answer (408, DEADLINE_EXCEEDED) would race the handler that
 * owns the response and may already have started it, as a bidirectional reflection stream has.
 *
 * No timer per stream: one interval (a tenth of the deadline, 10 ms..1 s, as Node's HTTP/1.1
 * connection checking) walks a doubly linked list from its oldest entry and stops at the first not
 * yet due, so a sweep costs only what is due. A stream leaves the list when it closes; unlinked
 * entries drop their links, so a long-lived entry never keeps a finished one reachable. (A Set
 * would live long and, as docs/architecture.md says of Node's stream tables, keep every stream it
 * ever held reachable until a full collection.)
 */
export function createStreamDeadlines(requestTimeoutMs: number): StreamDeadlines {
  // The list's sentinel: head.next is the oldest entry, head.prev the newest.
  const head = new Receiving(null, 0);
  head.prev = head.next = head;
  const unlink = (entry: Receiving) => {
    if (entry.prev === null) return;
    entry.prev.next = entry.next;
    entry.next!.prev = entry.prev;
    entry.prev = entry.next = null;
    entry.stream = null;
  };
  const sweep = setInterval(
    () => {
      const now = performance.now();
      for (let entry = head.next!; entry !== head && entry.due <= now; entry = head.next!) {
        const stream = entry.stream!;
        unlink(entry);
        // state.remoteClose: the client has ended its side, so the request is whole (read or not).
        if (!stream.closed && !stream.destroyed && !stream.state.remoteClose) stream.close(http2.constants.NGHTTP2_CANCEL);
      }
    },
    Math.min(1000, Math.max(10, Math.floor(requestTimeoutMs / 10))),
  );
  sweep.unref();
  return {
    watch(stream) {
      // HEADERS with END_STREAM: the request is whole already.
      if (stream.endAfterHeaders) return;
      const entry = new Receiving(stream, performance.now() + requestTimeoutMs);
      entry.prev = head.prev;
      entry.next = head;
      head.prev!.next = entry;
      head.prev = entry;
      stream.on("close", () => unlink(entry));
    },
    stop: () => clearInterval(sweep),
  };
}
