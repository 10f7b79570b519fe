import type http from "node:http";
import type { Readable } from "node:stream";
import { MandateError } from "../base/errors.js";
import type { HeaderSource } from "./authenticate.js";

/** What the /v1 layer and the unary gRPC fast path read from a Node request, outside connect. */

/** Request headers as Node parses them (HTTP/1.1 or HTTP/2). */
type NodeHeaders = http.IncomingHttpHeaders;

/** The headers as a Headers object, without HTTP/2 pseudo-headers. */
export function headersOf(headers: NodeHeaders): Headers {
  const out = new Headers();
  for (const [k, v] of Object.entries(headers)) {
    if (typeof v === "string" && !k.startsWith(":")) out.set(k, v);
  }
  return out;
}

/**
 * One header's value, read as `headersOf(headers).get(name)` would for the lower-case names
 * the service reads, without building the Headers object (every request authenticates with it).
 */
export function headerReader(headers: NodeHeaders): HeaderSource {
  return {
    get: (name) => {
      const value = name.startsWith(":") ? undefined : headers[name];
      return typeof value === "string" ? value : null;
    },
  };
}

/**
 * The client went away before its request body ended (it closed the connection or reset the
 * stream): no answer can reach it, and it is no server error (docs/architecture.md, Error model).
 * Logged at info and counted as `client_closed`.
 */
export class ClientClosedError extends Error {
  constructor() {
    super("The client closed the request before its body ended.");
    this.name = "ClientClosedError";
  }
}

/**
 * Whether the client aborted `req` (an HTTP/1.1 request or an HTTP/2 stream, raw or wrapped):
 * Node sets `aborted` when the connection closes or the stream is reset before the exchange
 * completed.
 */
export function abortedByClient(req: Readable): boolean {
  return (req as Readable & { aborted?: boolean }).aborted === true;
}

/**
 * The request body, refused past `limit` bytes (the refusal then closes the connection or stream,
 * leaving the rest unread); ClientClosedError when the client goes away before the body ends.
 */
export function readBody(req: Readable, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) chunks.push(chunk);
      else {
        req.off("data", onData);
        req.pause();
        reject(new MandateError("payload_too_large", `The request body exceeds ${limit} bytes.`));
      }
    };
    // Whichever of these Node emits first (it differs between HTTP/1.1, a reset HTTP/2 stream
    // and a closed HTTP/2 connection); an HTTP/2 stream also ends its body when it is reset.
    const closed = () => {
      req.off("data", onData);
      chunks.length = 0;
      reject(new ClientClosedError());
    };
    const closedEarly = () => {
      if (!req.readableEnded) closed();
    };
    req.on("data", onData);
    req.once("end", () => {
      // The request object can outlive the call by a long way (an HTTP/2 stream's is kept until a
      // full garbage collection), so it keeps no reference to the chunks once they are joined.
      req.off("data", onData);
      req.off("aborted", closed);
      req.off("close", closedEarly);
      if (abortedByClient(req)) return closed();
      const body = Buffer.concat(chunks);
      chunks.length = 0;
      resolve(body);
    });
    req.once("aborted", closed);
    req.once("close", closedEarly);
    // An error of the request stream while its body is read is its connection failing.
    req.once("error", (err: NodeJS.ErrnoException) => (abortedByClient(req) || err.code === "ECONNRESET" || err.code === "ERR_HTTP2_STREAM_ERROR" ? closed() : reject(err)));
  });
}
