import type http from "node:http";
import type http2 from "node:http2";
import { MandateError } from "../domain/errors.js";

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
