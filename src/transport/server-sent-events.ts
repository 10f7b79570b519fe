import type http from "node:http";
import type http2 from "node:http2";
import { create, type DescMessage, type Message } from "@bufbuild/protobuf";
import { MandateError, validationFailed, type FieldError } from "../base/errors.js";
import { EventService } from "../gen/mandate/v1alpha/events_pb.js";
import { errorBody } from "./errors.js";
import { messageToWire } from "./json-wire.js";
import { headerReader, headersOf } from "./node-request.js";
import type { RequestPipeline } from "./pipeline.js";
import { httpRoutes, type RegisteredService } from "./transcoder.js";

type NodeRequest = http.IncomingMessage | http2.Http2ServerRequest;
type NodeResponse = http.ServerResponse | http2.Http2ServerResponse;

/** Query parameters the stream accepts; `types` may repeat and may hold a comma-separated list. */
const PARAMETERS = new Set(["types", "after"]);

/**
 * `GET /v1alpha/events:watch` (the path is WatchEvents' own `google.api.http` binding) as
 * Server-Sent Events: the /v1 layer answers one message per request and cannot stream, so this
 * route serves the same EventService implementation as gRPC and Connect do, authenticated by the
 * same pipeline. Each event is one SSE message: `id:` its event_id (what `EventSource` sends back
 * as Last-Event-ID when it reconnects), `event:` its name, `data:` the envelope JSON; a heartbeat
 * is a comment line. Refusals (401, 403, 422, 429) come before the stream starts, as /v1 JSON
 * error bodies with their status; once it has started, a failure (the service shutting down)
 * ends the response and the client resumes with its cursor.
 *
 * Returns the route's handler, which answers true when it took the request.
 */
export function createEventStreamRoute(services: readonly RegisteredService[], pipeline: RequestPipeline) {
  const registered = services.find((s) => s.service.typeName === EventService.typeName);
  const route = httpRoutes([EventService]).find((r) => r.method.name === "WatchEvents" && r.httpMethod === "GET");
  if (!registered || !route) return () => false;
  const call = { service: route.service, method: route.method, impl: registered.impl };

  return function serve(req: NodeRequest, res: NodeResponse): boolean {
    if (req.method !== "GET") return false;
    const url = new URL(req.url ?? "/", "http://localhost");
    if (url.pathname !== route.template) return false;
    void stream(req, res, url);
    return true;
  };

  async function stream(req: NodeRequest, res: NodeResponse, url: URL): Promise<void> {
    const started = performance.now();
    const requestId = pipeline.requestId(req.headers["x-request-id"]);
    const rpc = `${route!.service.name}.${route!.method.name}`;
    const aborted = new AbortController();
    res.once("close", () => aborted.abort());
    let status = 200;
    let messages: AsyncGenerator<Message> | undefined;
    try {
      const caller = await pipeline.authenticate(route!.service.typeName, route!.method.name, headerReader(req.headers), req.socket.remoteAddress ?? "");
      const errors: FieldError[] = [];
      const types: string[] = [];
      let after = "";
      for (const [key, value] of url.searchParams) {
        if (!PARAMETERS.has(key)) errors.push({ field: key, code: "unknown_field", message: "unknown query parameter" });
        else if (key === "types") types.push(...value.split(",").map((t) => t.trim()).filter((t) => t !== ""));
        else after = value;
      }
      if (errors.length) throw validationFailed(errors);
      const message = create(route!.method.input, { types, after } as never);
      messages = pipeline.invokeStream(call, message, caller, {
        protocolName: "sse",
        requestMethod: "GET",
        url: url.toString(),
        headers: () => headersOf(req.headers),
        requestId,
        signal: aborted.signal,
      });
      // The first message (a heartbeat, once the stream listens) or the refusal decides the status.
      const first = await messages.next();
      res.writeHead(200, {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache",
        "x-request-id": requestId,
        // Proxies that buffer answers (nginx) would hold events back.
        "x-accel-buffering": "no",
      });
      if (!first.done) await write(res, frame(route!.method.output, first.value));
      for (let next = await messages.next(); !next.done && !aborted.signal.aborted; next = await messages.next()) {
        await write(res, frame(route!.method.output, next.value));
      }
    } catch (err) {
      if (aborted.signal.aborted) return;
      if (res.headersSent) {
        // The stream had started: SSE has no status to give; the client resumes with its cursor.
        const { status: s } = errorBody(err, requestId);
        if (s >= 500 && !(err instanceof MandateError)) pipeline.logger.error({ err, request_id: requestId }, "event stream failed");
        return;
      }
      const { status: errStatus, body, headers: retry } = errorBody(err, requestId);
      status = errStatus;
      if (status >= 500 && !(err instanceof MandateError)) pipeline.logger.error({ err, request_id: requestId }, "request failed");
      const text = JSON.stringify(body);
      res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), "x-request-id": requestId, ...retry });
      res.end(text);
    } finally {
      await messages?.return(undefined).catch(() => undefined);
      if (!res.writableEnded) res.end();
      const ms = performance.now() - started;
      pipeline.metrics.observe("sse", rpc, aborted.signal.aborted && status === 200 ? "client_closed" : status < 400 ? "ok" : String(status), ms);
      pipeline.logger.info({ request_id: requestId, protocol: "sse", method: "GET", path: url.pathname, rpc, status, ms: Math.round(ms * 100) / 100 }, "request");
    }
  }
}

/** One SSE message of an Event: a comment for a heartbeat, else id, event and the envelope. */
function frame(desc: DescMessage, message: Message): string {
  const wire = messageToWire(desc, message) as Record<string, unknown>;
  if (typeof wire.heartbeat_at === "string") return `: heartbeat ${wire.heartbeat_at}\n\n`;
  const envelope = { event: wire.event, event_id: wire.event_id, occurred_at: wire.occurred_at, data: wire.data ?? {} };
  // JSON.stringify escapes line breaks, so the envelope is one `data:` line.
  return `id: ${String(wire.event_id)}\nevent: ${String(wire.event)}\ndata: ${JSON.stringify(envelope)}\n\n`;
}

/** Writes `text`, waiting for the socket to drain when its buffer is full (a slow reader holds the stream back, not memory). */
function write(res: NodeResponse, text: string): Promise<void> {
  return new Promise((resolve) => {
    const ok = (res as http.ServerResponse).write(text);
    if (ok) resolve();
    else {
      const done = () => {
        res.off("drain", done);
        res.off("close", done);
        resolve();
      };
      res.once("drain", done);
      res.once("close", done);
    }
  });
}
