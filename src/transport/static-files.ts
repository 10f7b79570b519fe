import type http from "node:http";
import type http2 from "node:http2";
import { gzipSync } from "node:zlib";

/*
 * What the console (console-assets.ts) and the API reference (api-docs.ts) share: files held in
 * memory from start-up, answered to GET and HEAD with their security headers, gzip when the
 * client takes it, and plain-text refusals (they are pages, not API calls).
 */

export type NodeRequest = http.IncomingMessage | http2.Http2ServerRequest;
export type NodeResponse = http.ServerResponse | http2.Http2ServerResponse;

/** A file as served: its bytes, gzipped too where that is worth it, its type and caching. */
export interface StaticFile {
  body: Buffer;
  gzip: Buffer | undefined;
  type: string;
  cacheControl: string;
}

/** `body` as a StaticFile, gzipped when `compress`. */
export function staticFile(body: Buffer | string, type: string, cacheControl: string, compress = true): StaticFile {
  const bytes = Buffer.from(body);
  return { body: bytes, gzip: compress ? gzipSync(bytes) : undefined, type, cacheControl };
}

/** The headers every page answer carries, with its Content-Security-Policy. */
export function securityHeaders(csp: string): Record<string, string> {
  return { "content-security-policy": csp, "x-content-type-options": "nosniff", "referrer-policy": "no-referrer", "cross-origin-opener-policy": "same-origin" };
}

/** Answers `status` with `body` (no body to HEAD) and its length. */
export function answer(req: NodeRequest, res: NodeResponse, status: number, headers: Record<string, string>, body: Buffer | string): void {
  const bytes = Buffer.from(body);
  res.writeHead(status, { ...headers, "content-length": String(bytes.length) });
  if (req.method === "HEAD") res.end();
  else res.end(bytes);
}

/** Answers 405 to anything but GET and HEAD; true when it did. */
export function refusedMethod(req: NodeRequest, res: NodeResponse): boolean {
  if (req.method === "GET" || req.method === "HEAD") return false;
  answer(req, res, 405, { "content-type": "text/plain; charset=utf-8", allow: "GET, HEAD" }, "Method not allowed.\n");
  return true;
}

/** Answers 200 with `file`, gzipped when the client accepts it; Vary keeps what CORS may have set. */
export function sendStaticFile(req: NodeRequest, res: NodeResponse, file: StaticFile, headers: Record<string, string>): void {
  const gzip = file.gzip !== undefined && /\bgzip\b/.test(String(req.headers["accept-encoding"] ?? ""));
  answer(
    req,
    res,
    200,
    {
      ...headers,
      "content-type": file.type,
      "cache-control": file.cacheControl,
      vary: [res.getHeader("vary"), "accept-encoding"].filter(Boolean).join(", "),
      ...(gzip ? { "content-encoding": "gzip" } : {}),
    },
    gzip ? file.gzip! : file.body,
  );
}
