import type { EventEmitter } from "node:events";
import http from "node:http";
import http2 from "node:http2";
import { Duplex } from "node:stream";
import { create, createFileRegistry } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, file_google_protobuf_struct } from "@bufbuild/protobuf/wkt";
import { createConnectRouter } from "@connectrpc/connect";
import { createAsyncIterable, type UniversalHandler } from "@connectrpc/connect/protocol";

/*
 * Every place where the transport relies on a private detail of Node or connect, and the start-up
 * check that refuses to run when those details differ from what this code expects. Nothing else in
 * src/transport reaches past a public API.
 *
 *  1. HTTP/2 session stream tables (renewStreamTables): Node keeps a session's streams in a Map
 *     and a Set on an internal state object; they are replaced by fresh copies periodically.
 *  2. Handing a stream to a request-handler server (forwardToCompat): `http2.createServer(opts,
 *     handler)` turns a "stream" event into request/response objects through a listener of its
 *     own; the server emits "stream" on such a server without ever letting it listen.
 *  3. The text of "nested too deeply" (isNestedTooDeeplyText): connect reports a message nested
 *     too deeply for its JSON decoder with the decoder's message as the error message (V8's
 *     RangeError for an overflowed stack up to @bufbuild/protobuf 2.9, the decoder's own
 *     recursion limit after), and only that text (no cause) reaches the error shaping after
 *     connect has serialized the error.
 *  4. Header and request deadlines on handed-over connections (trackHandedConnections): an
 *     http.Server applies headersTimeout and requestTimeout only to connections it tracks, and it
 *     starts tracking (and its checking interval) on its own "listening" event; a server that is
 *     handed sockets with "connection" and never listens tracks nothing unless that event is
 *     emitted on it.
 *
 * checkNodeInternals() verifies all four on live objects and is run by listen() before it serves.
 */

/** Raised by the start-up self-check: this Node (or connect) keeps a private detail otherwise. */
export class NodeInternalsError extends Error {
  override readonly name = "NodeInternalsError";
}

function refuse(what: string): never {
  throw new NodeInternalsError(
    `Node ${process.version}: ${what}. src/transport/node-internals.ts relies on this private detail of Node or @connectrpc/connect ` +
      `(checked on the Node versions of package.json "engines"); adapt that module before running the service on this version.`,
  );
}

// --- 1. HTTP/2 session stream tables ---------------------------------------------------------

/** How often a session's stream tables are replaced: well under the interval between two young collections under load. */
const RENEW_MS = 100;

interface StreamTables {
  streams: Map<unknown, unknown>;
  pendingStreams: Set<unknown>;
}

/**
 * The session's stream tables: its internal state object (the own property keyed by the symbol
 * described "state") holding the Map `streams` and the Set `pendingStreams`. Every reader comes
 * through here, so a Node that keeps them otherwise meets NodeInternalsError, naming itself, and
 * never a quiet fallback.
 */
function streamTables(session: object): StreamTables {
  // Exactly one such symbol: with two, which one is the state would be a guess.
  const keys = Object.getOwnPropertySymbols(session).filter((s) => s.description === "state");
  const state: unknown = keys.length === 1 ? (session as Record<symbol, unknown>)[keys[0]!] : undefined;
  if (hasStreamTables(state)) return state;
  return refuse(
    `an HTTP/2 session does not keep its streams where expected (one own symbol-keyed property described "state", ${keys.length} found, holding a Map "streams" and a Set "pendingStreams")`,
  );
}

/** Whether `state` holds the two tables. Node's SafeMap and SafeSet are not `instanceof` Map and Set (their prototypes are cut off from them), so this checks their shape. */
function hasStreamTables(state: unknown): state is StreamTables {
  if (typeof state !== "object" || state === null) return false;
  const { streams, pendingStreams } = state as Record<string, unknown>;
  return isTable(streams, "get") && isTable(pendingStreams, "add");
}

function isTable(value: unknown, method: "get" | "add"): boolean {
  if (typeof value !== "object" || value === null) return false;
  const table = value as Record<string | symbol, unknown>;
  return typeof table[method] === "function" && typeof table.delete === "function" && typeof table.size === "number" && typeof table[Symbol.iterator] === "function";
}

/** Replaces both tables by copies: the same classes (Node's own SafeMap and SafeSet), the same entries in the same order. */
function renewTables(tables: StreamTables): void {
  const MapClass = tables.streams.constructor as MapConstructor;
  const SetClass = tables.pendingStreams.constructor as SetConstructor;
  tables.streams = new MapClass(tables.streams);
  tables.pendingStreams = new SetClass(tables.pendingStreams);
}

/**
 * Keeps an HTTP/2 session's stream tables in the young generation, so finished streams do not
 * outlive their call until a full garbage collection.
 *
 * Node keeps a session's streams in a Map, and those still opening in a Set, on its internal
 * state object, adding and deleting an entry per call. Once such a table has lived through a
 * full collection, V8 allocates every rehashed table in the old generation, and each discarded
 * table keeps the streams it held reachable through young collections until the next full one,
 * so every stream of a long-lived connection (with its body, listeners and state) was promoted.
 * Fresh copies every RENEW_MS never live that long. Every use of the tables in Node is
 * synchronous, so a copy made between two events loses nothing.
 *
 * Returns the function that stops the renewal. Throws NodeInternalsError for a session whose
 * internals differ (checkNodeInternals() refuses to start on such a Node, so a running service
 * never gets there; if it does, it fails loudly instead of quietly promoting every stream).
 */
export function renewStreamTables(session: http2.Http2Session): () => void {
  const tables = streamTables(session);
  const timer = setInterval(() => renewTables(tables), RENEW_MS);
  timer.unref();
  return () => clearInterval(timer);
}

/** Refuses unless `session` keeps its stream tables where renewStreamTables expects them. */
export function checkStreamTables(session: object): void {
  streamTables(session);
}

/**
 * Whether `session` has a stream open (or opening), from its stream tables. Throws
 * NodeInternalsError where they are not where expected (see renewStreamTables).
 */
export function hasOpenStreams(session: http2.Http2Session): boolean {
  const tables = streamTables(session);
  return tables.streams.size > 0 || tables.pendingStreams.size > 0;
}

// --- 2. Handing a stream to a request-handler server ------------------------------------------

/** The name of the listener Node's http2.createServer(options, handler) adds for "stream" events. */
const COMPAT_LISTENER = "onServerStream";

/**
 * Serves `stream` as `compat`, a server made by `http2.createServer(options, handler)` that never
 * listens, would serve it: Node's own "stream" listener on it wraps the stream into request and
 * response objects and emits "request" for the handler.
 */
export function forwardToCompat(compat: http2.Http2Server, stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, flags: number, rawHeaders: string[]): void {
  compat.emit("stream", stream, headers, flags, rawHeaders);
}

/** Refuses unless `compat` has exactly one "stream" listener, Node's own, which makes request and response objects. */
export function checkCompatServer(compat: EventEmitter): void {
  const listeners = compat.listeners("stream");
  if (listeners.length !== 1 || !listeners[0]!.name.includes(COMPAT_LISTENER)) {
    refuse(
      `a server made by http2.createServer(options, handler) has ${listeners.length} "stream" listener(s) (${listeners.map((l) => l.name || "anonymous").join(", ") || "none"}), ` +
        `not the one listener "${COMPAT_LISTENER}" that turns a stream into a request`,
    );
  }
}

// --- 3. "Nested too deeply" through connect ----------------------------------------------------

/**
 * Whether an error message connect passed on says its JSON decoder met input nested too deeply:
 * V8's RangeError for the overflowed stack of a recursing decoder, or the decoder's own recursion
 * limit (newer @bufbuild/protobuf, which an installed package may resolve to).
 */
export function isNestedTooDeeplyText(message: string): boolean {
  return /maximum call stack size exceeded|maximum recursion depth/i.test(message);
}

/** A tiny service taking a google.protobuf.Value, for the probe: connect decodes it recursively. */
function probeService() {
  const file = create(FileDescriptorProtoSchema, {
    name: "mandate/internal/self_check.proto",
    package: "mandate.internal",
    syntax: "proto3",
    dependency: ["google/protobuf/struct.proto"],
    service: [{ name: "SelfCheck", method: [{ name: "Echo", inputType: ".google.protobuf.Value", outputType: ".google.protobuf.Value" }] }],
  });
  const registry = createFileRegistry(file, (name) => (name === "google/protobuf/struct.proto" ? file_google_protobuf_struct : undefined));
  return registry.getService("mandate.internal.SelfCheck")!;
}

function probeHandler(): UniversalHandler {
  const router = createConnectRouter();
  router.service(probeService(), { echo: (value: unknown) => value } as never);
  return router.handlers[0]!;
}

async function bodyText(body: AsyncIterable<Uint8Array> | Uint8Array | undefined): Promise<string> {
  if (body === undefined) return "";
  if (body instanceof Uint8Array) return Buffer.from(body).toString("utf8");
  const parts: Uint8Array[] = [];
  for await (const chunk of body) parts.push(chunk);
  return Buffer.concat(parts).toString("utf8");
}

/**
 * Refuses unless a Connect JSON request nested far too deeply, sent through `handler` (by default
 * a connect router serving a method that takes a google.protobuf.Value), is answered with
 * invalid_argument and a message isNestedTooDeeplyText recognises.
 */
export async function checkNestedTooDeeplyText(handler: UniversalHandler = probeHandler()): Promise<void> {
  const depth = 100_000;
  const res = await handler({
    httpVersion: "1.1",
    method: "POST",
    url: `http://self-check${handler.requestPath}`,
    header: new Headers({ "content-type": "application/json", "connect-protocol-version": "1" }),
    body: createAsyncIterable([Buffer.from(`${"[".repeat(depth)}${"]".repeat(depth)}`)]),
    signal: new AbortController().signal,
  });
  const text = await bodyText(res.body);
  let error: { code?: unknown; message?: unknown } = {};
  try {
    error = JSON.parse(text) as typeof error;
  } catch {
    // Not an error document: refused below.
  }
  if (res.status !== 400 || error.code !== "invalid_argument" || typeof error.message !== "string" || !isNestedTooDeeplyText(error.message)) {
    refuse(`connect answered a JSON message nested ${depth} deep with HTTP ${res.status} ${JSON.stringify(text.slice(0, 200))}, not invalid_argument saying it is nested too deeply`);
  }
}

// --- 4. Header and request deadlines on handed-over connections ------------------------------

/**
 * Makes `server`, an http.Server that never listens and is handed its sockets with "connection",
 * enforce its headersTimeout and requestTimeout on them, as it does on connections it accepts
 * itself: Node sets up the server's connection list (which every parser made afterwards joins)
 * and the interval that checks it every `connectionsCheckingInterval` when the server emits
 * "listening"; an expired connection is reported as a "clientError" with code
 * ERR_HTTP_REQUEST_TIMEOUT. Nothing else listens for that event on such a server.
 */
export function trackHandedConnections(server: http.Server): void {
  server.emit("listening");
}

/** Stops what trackHandedConnections started (the checking interval). */
export function untrackHandedConnections(server: http.Server): void {
  // Not listening, http.Server.close stops the interval and closes idle connections; the
  // callback gets ERR_SERVER_NOT_RUNNING, which says nothing here.
  server.close(() => undefined);
}

/**
 * Refuses unless a connection handed to `server` (by default a non-listening http.Server with
 * 10 ms deadlines) after trackHandedConnections, and sending nothing, is reported as timed out
 * (clientError ERR_HTTP_REQUEST_TIMEOUT) within `timeoutMs`.
 */
export async function checkHandedConnections(
  timeoutMs: number,
  server: http.Server = http.createServer({ headersTimeout: 10, requestTimeout: 10, connectionsCheckingInterval: 5 }),
): Promise<void> {
  const [serverSide, clientSide] = duplexPair();
  let timer: NodeJS.Timeout | undefined;
  try {
    const code = await new Promise<string>((resolve) => {
      timer = setTimeout(() => resolve("no clientError"), timeoutMs);
      server.on("clientError", (err: NodeJS.ErrnoException, socket: Duplex) => {
        socket.destroy();
        resolve(err.code ?? err.message);
      });
      trackHandedConnections(server);
      server.emit("connection", serverSide);
    });
    if (code !== "ERR_HTTP_REQUEST_TIMEOUT") {
      refuse(`a connection handed to a non-listening http.Server that emitted "listening" and sending nothing was not timed out by its headersTimeout (within ${timeoutMs} ms: ${code})`);
    }
  } finally {
    clearTimeout(timer);
    untrackHandedConnections(server);
    serverSide.destroy();
    clientSide.destroy();
  }
}

// --- The self-check ------------------------------------------------------------------------------

/** Two connected in-memory streams: what one writes, the other reads. */
function duplexPair(): [Duplex, Duplex] {
  const sides: Duplex[] = [];
  const side = (peer: () => Duplex) =>
    new Duplex({
      read() {},
      write(chunk, _encoding, done) {
        peer().push(chunk);
        done();
      },
      final(done) {
        peer().push(null);
        done();
      },
    });
  sides.push(
    side(() => sides[1]!),
    side(() => sides[0]!),
  );
  return [sides[0]!, sides[1]!];
}

/**
 * One HTTP/2 request over an in-memory connection, served the way listen() serves streams: the
 * connection handed to a non-listening server with "connection", the stream forwarded to a
 * request-handler server, the session's stream tables replaced while the stream is open. Checks
 * the session's tables and that the forwarded stream is answered through a "request" event.
 */
async function probeHttp2(timeoutMs: number): Promise<void> {
  const [serverSide, clientSide] = duplexPair();
  const h2 = http2.createServer({});
  const compat = http2.createServer({}, (_req, res) => {
    res.writeHead(204);
    res.end();
  });
  checkCompatServer(compat);
  let session: http2.ServerHttp2Session | undefined;
  h2.on("session", (s) => (session = s));
  // Renewing while a stream is open, as the service does; a failure is raised after the request.
  let renewFailure: unknown;
  h2.on("stream", (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, flags: number, rawHeaders: string[]) => {
    try {
      renewTables(streamTables(stream.session!));
    } catch (err) {
      renewFailure = err;
    }
    forwardToCompat(compat, stream, headers, flags, rawHeaders);
  });
  h2.emit("connection", serverSide);
  const client = http2.connect("http://self-check", { createConnection: () => clientSide });
  client.on("error", () => {});
  let timer: NodeJS.Timeout | undefined;
  try {
    const status = await new Promise<number | "timeout">((resolve, reject) => {
      timer = setTimeout(() => resolve("timeout"), timeoutMs);
      const req = client.request({ ":path": "/self-check" }, { endStream: true });
      req.on("response", (headers) => resolve(Number(headers[":status"])));
      req.on("error", reject);
      req.resume();
    }).catch((err: unknown) => refuse(`a request over an in-memory HTTP/2 connection failed (${err instanceof Error ? err.message : String(err)})`));
    if (session === undefined) refuse("an HTTP/2 server given a connection with the \"connection\" event made no session");
    if (renewFailure !== undefined) throw renewFailure;
    checkStreamTables(session);
    if (status !== 204) {
      refuse(`a stream forwarded to a request-handler server with the "stream" event was ${status === "timeout" ? `not answered within ${timeoutMs} ms` : `answered with ${status}`}, not by its request handler`);
    }
  } finally {
    clearTimeout(timer);
    client.destroy();
    session?.destroy();
    serverSide.destroy();
    clientSide.destroy();
  }
}

/** Objects to check in place of the live ones the self-check makes (tests inject fakes). */
export interface InternalsProbe {
  /** An HTTP/2 session, checked for its stream tables. */
  session?: object;
  /** A server made by http2.createServer(options, handler), checked for Node's own "stream" listener. */
  compatServer?: EventEmitter;
  /** A connect handler, sent a JSON message nested too deeply for connect's decoder. */
  connectHandler?: UniversalHandler;
  /** A non-listening http.Server (with short deadlines), handed a connection that sends nothing. */
  httpServer?: http.Server;
}

/**
 * The start-up self-check: resolves when every private detail this module relies on is as
 * expected on this Node and connect, and rejects with a NodeInternalsError naming the Node
 * version otherwise. It runs on live objects (an in-memory HTTP/2 connection, a connect router);
 * objects given in `probe` are checked as well, first.
 */
export async function checkNodeInternals(probe: InternalsProbe = {}, timeoutMs = 2000): Promise<void> {
  if (probe.session !== undefined) checkStreamTables(probe.session);
  if (probe.compatServer !== undefined) checkCompatServer(probe.compatServer);
  if (probe.connectHandler !== undefined) await checkNestedTooDeeplyText(probe.connectHandler);
  if (probe.httpServer !== undefined) await checkHandedConnections(timeoutMs, probe.httpServer);
  await probeHttp2(timeoutMs);
  await checkHandedConnections(timeoutMs);
  await checkNestedTooDeeplyText();
}
