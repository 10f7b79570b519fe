import type http from "node:http";
import type http2 from "node:http2";
import { cors as connectCors } from "@connectrpc/connect";

type NodeRequest = http.IncomingMessage | http2.Http2ServerRequest;
type NodeResponse = http.ServerResponse | http2.Http2ServerResponse;

/**
 * Request headers a browser on another origin may send: Connect's and gRPC-Web's own (connect's
 * `cors.allowedHeaders`), and every header the API reads (transport/authenticate.ts, the
 * pipeline, the event stream). A header missing here fails the preflight, so the browser never
 * sends the request at all.
 */
export const CORS_ALLOWED_HEADERS: readonly string[] = [
  ...connectCors.allowedHeaders,
  "Authorization",
  "X-Service-Key-Id",
  "X-Service-Signature",
  "X-Service-Timestamp",
  "X-Service-Operator-Key",
  "X-Service-Organization-Id",
  "X-Request-Id",
  "Last-Event-ID",
];

/**
 * Response headers a cross-origin script may read: gRPC-Web's status trailers-in-headers and
 * Connect's (connect's `cors.exposedHeaders`), the retry hints of 429 and 503, and the request id
 * an error report quotes.
 */
export const CORS_EXPOSED_HEADERS: readonly string[] = [...connectCors.exposedHeaders, "Retry-After", "Grpc-Retry-Pushback-Ms", "X-Request-Id"];

/** Every method /v1 routes (transcoder.ts) plus Connect's GET and POST. */
export const CORS_ALLOWED_METHODS: readonly string[] = ["GET", "POST", "PUT", "PATCH", "DELETE"];

/** How long a browser may reuse a preflight: Chromium caps it at two hours anyway. */
export const CORS_MAX_AGE_SECONDS = 7200;

/**
 * Reads MANDATE_CORS_ORIGINS: origins (`scheme://host[:port]`, as a browser sends them in
 * `Origin`) separated by commas, or `*` for any origin. Empty: no cross-origin access, the
 * default. Throws naming the variable for anything that is not an origin (a path, a trailing
 * slash), which would otherwise never match and fail silently in the browser.
 */
export function parseCorsOrigins(raw: string | undefined): string[] {
  const origins = (raw ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
  for (const origin of origins) {
    if (origin === "*") continue;
    let url: URL | undefined;
    try {
      url = new URL(origin);
    } catch {
      url = undefined;
    }
    if (!url || (url.protocol !== "http:" && url.protocol !== "https:") || url.origin !== origin) {
      throw new Error(`MANDATE_CORS_ORIGINS must list origins such as https://app.example.com (scheme, host and port only), got ${JSON.stringify(origin)}`);
    }
  }
  return origins;
}

/**
 * CORS for every route on the port (Connect, gRPC-Web, /v1, the event stream, OpenAPI), in one
 * place in front of them all. An allowed origin gets `Access-Control-Allow-Origin` naming it
 * (never `*`, so caches keep answers per origin with `Vary: Origin`) and the exposed headers; a
 * preflight (OPTIONS with `Access-Control-Request-Method`) is answered 204 here with the allowed
 * methods, headers and max age. An origin not on the list gets no CORS header at all, its
 * preflight included, so the browser refuses. No `Access-Control-Allow-Credentials`: every
 * credential is a header the script sets itself, and no cookie authenticates anything.
 *
 * Returns a handler that sets the headers and returns true when it answered (a preflight).
 */
export function createCors(origins: readonly string[]): (req: NodeRequest, res: NodeResponse) => boolean {
  const any = origins.includes("*");
  const allowed = new Set(origins);
  const exposed = CORS_EXPOSED_HEADERS.join(", ");
  const preflightHeaders = {
    "access-control-allow-methods": CORS_ALLOWED_METHODS.join(", "),
    "access-control-allow-headers": CORS_ALLOWED_HEADERS.join(", "),
    "access-control-max-age": String(CORS_MAX_AGE_SECONDS),
  };
  return (req, res) => {
    const origin = req.headers.origin;
    const preflight = req.method === "OPTIONS" && req.headers["access-control-request-method"] !== undefined;
    const permitted = typeof origin === "string" && (any || allowed.has(origin));
    // The answer depends on Origin whenever a list is configured, allowed or not.
    if (allowed.size > 0 && origin !== undefined) res.setHeader("vary", "Origin");
    if (permitted) res.setHeader("access-control-allow-origin", origin);
    if (!preflight) {
      if (permitted) res.setHeader("access-control-expose-headers", exposed);
      return false;
    }
    // A preflight is answered whatever the origin; without the headers above the browser stops.
    res.writeHead(204, permitted ? preflightHeaders : {});
    res.end();
    return true;
  };
}
