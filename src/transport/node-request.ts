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

/** The request body, refused past `limit` bytes (the refusal then closes the connection or stream, leaving the rest unread). */
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
    req.on("data", onData);
    req.once("end", () => {
      // The request object can outlive the call by a long way (an HTTP/2 stream's is kept until a
      // full garbage collection), so it keeps no reference to the chunks once they are joined.
      req.off("data", onData);
      const body = Buffer.concat(chunks);
      chunks.length = 0;
      resolve(body);
    });
    req.once("error", reject);
  });
}
