import type http from "node:http";
import type http2 from "node:http2";
import { MandateError } from "../domain/errors.js";

/** What the /v1 layer and the unary gRPC fast path read from a Node request, outside connect. */

/** The request's headers as a Headers object, without HTTP/2 pseudo-headers. */
export function headersOf(req: http.IncomingMessage | http2.Http2ServerRequest): Headers {
  const headers = new Headers();
  for (const [k, v] of Object.entries(req.headers)) {
    if (typeof v === "string" && !k.startsWith(":")) headers.set(k, v);
  }
  return headers;
}

/** The request body, refused past `limit` bytes (the refusal then closes the connection, leaving the rest unread). */
export function readBody(req: http.IncomingMessage | http2.Http2ServerRequest, limit: number): Promise<Buffer> {
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
    req.once("end", () => resolve(Buffer.concat(chunks)));
    req.once("error", reject);
  });
}
