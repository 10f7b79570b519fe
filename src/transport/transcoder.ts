import type { connectNodeAdapter } from "@connectrpc/connect-node";
import { create, getOption, hasOption, type DescField, type DescMethod, type DescService, type Message } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import { http } from "../gen/google/api/annotations_pb.js";
import { MandateError, validationFailed } from "../base/errors.js";
import { parseJson } from "../base/text.js";
import { fieldFromText, messageFromWire, messageToWire } from "./json-wire.js";
import { ClientClosedError, headerReader, headersOf, readBody } from "./node-request.js";
import { errorBody, retryHeaders } from "./errors.js";
import type { RequestPipeline } from "./pipeline.js";

type NodeHandler = ReturnType<typeof connectNodeAdapter>;

type NodeRequest = Parameters<NodeHandler>[0];
type NodeResponse = Parameters<NodeHandler>[1];

/** A service and its implementation, as registered with connect. */
export interface RegisteredService {
  service: DescService;
  impl: Record<string, (req: Message, ctx: HandlerContext) => unknown>;
}

/** One /v1 route compiled from a `google.api.http` annotation. */
export interface HttpRoute {
  httpMethod: string;
  template: string;
  pattern: RegExp;
  variables: string[];
  /** "" (no body), "*" (the whole message), or the name of the field the body fills. */
  body: string;
  service: DescService;
  method: DescMethod;
}

/** Compiles a path template such as `/v1/agents/{agent_id}/activate` or `/v1/policies:evaluate`. */
function compileTemplate(template: string): { pattern: RegExp; variables: string[] } {
  const variables: string[] = [];
  let source = "";
  let last = 0;
  for (const m of template.matchAll(/\{([a-z_][a-z0-9_]*)(?:=\*)?\}/g)) {
    source += template.slice(last, m.index).replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    source += "([^/:]+)";
    variables.push(m[1]!);
    last = m.index! + m[0].length;
  }
  source += template.slice(last).replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return { pattern: new RegExp(`^${source}$`), variables };
}

/** Every /v1 route of the given services, read from their `google.api.http` annotations. */
export function httpRoutes(services: readonly DescService[]): HttpRoute[] {
  const routes: HttpRoute[] = [];
  for (const service of services) {
    for (const method of service.methods) {
      if (!hasOption(method, http)) continue;
      const rule = getOption(method, http);
      const { case: verb, value } = rule.pattern;
      if (verb === undefined || verb === "custom") continue;
      const { pattern, variables } = compileTemplate(value);
      routes.push({ httpMethod: verb.toUpperCase(), template: value, pattern, variables, body: rule.body, service, method });
    }
  }
  return routes;
}

/** An empty body is an empty message. */
function jsonBody(body: Buffer): unknown {
  return body.length === 0 ? {} : parseJson(body);
}

function fieldByName(method: DescMethod, name: string): DescField {
  const field = method.input.fields.find((f) => f.name === name);
  if (!field) throw new Error(`${method.name}: annotation names unknown field ${name}`);
  return field;
}

/** Builds the request message from the body, path variables and query string. */
function buildRequest(route: HttpRoute, match: RegExpExecArray, url: URL, body: Buffer): Message {
  const input = route.method.input;
  let message: Message;
  if (route.body === "*") {
    message = messageFromWire(input, jsonBody(body));
  } else if (route.body !== "") {
    const field = fieldByName(route.method, route.body);
    // A bytes body field receives the raw bytes: signed documents must reach the verifier untouched.
    const value = field.fieldKind === "scalar" && field.scalar === 12 /* BYTES */ ? new Uint8Array(body) : undefined;
    message = value ? create(input, { [field.localName]: value }) : messageFromWire(input, { [route.body]: jsonBody(body) });
  } else {
    const init: Record<string, unknown> = {};
    const errors = [];
    for (const [key, text] of url.searchParams) {
      const field = input.fields.find((f) => f.name === key);
      if (!field || route.variables.includes(key)) {
        errors.push({ field: key, code: "unknown_field", message: "unknown query parameter" });
        continue;
      }
      const value = fieldFromText(field, key, text);
      if (field.fieldKind === "list") init[field.localName] = [...((init[field.localName] as unknown[]) ?? []), value];
      else init[field.localName] = value;
    }
    if (errors.length) throw validationFailed(errors);
    message = create(input, init);
  }
  route.variables.forEach((name, i) => {
    const field = fieldByName(route.method, name);
    let text: string;
    try {
      text = decodeURIComponent(match[i + 1]!);
    } catch {
      throw validationFailed([{ field: name, code: "invalid_format", message: "malformed path segment" }]);
    }
    (message as unknown as Record<string, unknown>)[field.localName] = fieldFromText(field, name, text);
  });
  return message;
}

/** The type name of google.api.HttpBody: an RPC answering one is answered on /v1 with its bytes, not JSON. */
export const HTTP_BODY = "google.api.HttpBody";

// An HttpBody answer: its data as the body, under its content type.
function sendHttpBody(res: NodeResponse, output: Message, requestId: string): void {
  const { contentType, data } = output as unknown as { contentType: string; data: Uint8Array };
  res.writeHead(200, {
    "content-type": contentType || "application/octet-stream",
    "content-length": data.byteLength,
    "x-request-id": requestId,
  });
  res.end(data);
}

function send(res: NodeResponse, status: number, body: unknown, requestId: string, close = false, retry: Record<string, string> = retryHeaders(status)): void {
  const text = JSON.stringify(body);
  const headers: Record<string, string | number> = {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
    "x-request-id": requestId,
    ...retry,
  };
  // The unread rest of an oversized body would be parsed as the next request: end the connection.
  if (close && !("stream" in res)) headers.connection = "close";
  res.writeHead(status, headers);
  res.end(text);
}

/**
 * The generic /v1 JSON layer: matches a request against the routes, builds the
 * request message, authenticates through the shared pipeline and calls the
 * same service implementation connect calls.
 */
export function createTranscoder(services: readonly RegisteredService[], pipeline: RequestPipeline, bodyLimit: number) {
  const impls = new Map(services.map((s) => [s.service.typeName, s.impl]));
  const routes = httpRoutes(services.map((s) => s.service));
  const routesByMethod = new Map<string, HttpRoute[]>();
  for (const r of routes) routesByMethod.set(r.httpMethod, [...(routesByMethod.get(r.httpMethod) ?? []), r]);

  return async function transcode(req: NodeRequest, res: NodeResponse): Promise<void> {
    const started = performance.now();
    const requestId = pipeline.requestId(req.headers["x-request-id"]);
    const url = new URL(req.url ?? "/", "http://localhost");
    let status = 200;
    let clientClosed = false;
    let route: HttpRoute | undefined;
    try {
      let match: RegExpExecArray | null = null;
      for (const r of routesByMethod.get(req.method ?? "") ?? []) {
        match = r.pattern.exec(url.pathname);
        if (match) {
          route = r;
          break;
        }
      }
      if (!route || !match) {
        throw routes.some((r) => r.pattern.test(url.pathname))
          ? new MandateError("method_not_allowed", `${req.method} is not allowed on ${url.pathname}.`)
          : new MandateError("not_found", `No route for ${req.method} ${url.pathname}.`);
      }
      const body = await readBody(req, bodyLimit);
      const clientAddress = req.socket.remoteAddress ?? "";
      // Authenticated before the body is interpreted: a caller without access learns nothing from its errors.
      const caller = await pipeline.authenticate(route.service.typeName, route.method.name, headerReader(req.headers), clientAddress);
      const message = buildRequest(route, match, url, body);
      const call = { service: route.service, method: route.method, impl: impls.get(route.service.typeName)! };
      const output = await pipeline.invoke(call, message, caller, { protocolName: "v1", requestMethod: req.method ?? "GET", url: url.toString(), headers: () => headersOf(req.headers), requestId, jsonBody: route.body === "*" && body.length > 0 ? body : undefined });
      if (route.method.output.typeName === HTTP_BODY) sendHttpBody(res, output as Message, requestId);
      else send(res, 200, messageToWire(route.method.output, output), requestId);
    } catch (err) {
      if (err instanceof ClientClosedError) {
        // Nobody is left to answer (docs/architecture.md, Error model).
        clientClosed = true;
        return;
      }
      const { status: errStatus, body, headers } = errorBody(err, requestId);
      status = errStatus;
      if (status >= 500) pipeline.logger.error({ err, request_id: requestId }, "request failed");
      send(res, status, body, requestId, status === 413, headers);
    } finally {
      const ms = performance.now() - started;
      const rpc = route ? `${route.service.name}.${route.method.name}` : "unrouted";
      pipeline.metrics.observe("v1", rpc, clientClosed ? "client_closed" : status < 400 ? "ok" : String(status), ms);
      pipeline.logger.info(
        {
          request_id: requestId,
          protocol: "v1",
          method: req.method,
          path: url.pathname,
          rpc: route ? rpc : undefined,
          ...(clientClosed ? { detail: "client_closed" } : { status }),
          ms: Math.round(ms * 100) / 100,
        },
        "request",
      );
    }
  };
}
