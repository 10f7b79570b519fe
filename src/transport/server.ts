import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import tls from "node:tls";
import { Code, ConnectError, createConnectRouter, createContextValues } from "@connectrpc/connect";
import { compressionBrotli, compressionGzip, universalRequestFromNodeRequest, universalResponseToNodeResponse } from "@connectrpc/connect-node";
import { MandateError } from "../base/errors.js";
import { reachedPipelineKey, withErrorDetails } from "./connect-errors.js";
import { errorBody, retryHeaders } from "./errors.js";
import type { DescService } from "@bufbuild/protobuf";
import { ServerReflection } from "../gen/grpc/reflection/v1/reflection_pb.js";
import { clientAddressKey } from "../services/context.js";
import { createTrustedProxyCheck } from "./client-address.js";
import { DEFAULT_CONNECTION_LIMITS, createStreamDeadlines, type ConnectionLimits } from "./connection-limits.js";
import { createGrpcUnary } from "./grpc-unary.js";
import { checkNodeInternals, forwardToCompat, hasOpenStreams, renewStreamTables, trackHandedConnections, untrackHandedConnections } from "./node-internals.js";
import { abortedByClient } from "./node-request.js";
import { protocolOf, type RequestPipeline } from "./pipeline.js";
import { createReflectionService } from "./reflection.js";
import { createEventStreamRoute } from "./server-sent-events.js";
import { createTranscoder, type RegisteredService } from "./transcoder.js";

/** A plain GET route outside the API (JWKS, health, metrics): a string answers as text, anything else as JSON. */
export type PlainRoute = () => Promise<unknown>;

/** The listening server and how to stop it. */
export interface RunningServer {
  port: number;
  close(graceMs?: number): Promise<void>;
}

type NodeResponse = http.ServerResponse | http2.Http2ServerResponse;

const HTTP2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n");

/**
 * Serves gRPC (h2c), gRPC-Web, Connect and /v1 JSON on one port. Node's h2c
 * server cannot answer HTTP/1.1, so each connection's first bytes decide:
 * the HTTP/2 preface goes to the HTTP/2 server, anything else to HTTP/1.1.
 * Both share one request handler.
 */
export async function listen(options: {
  host: string;
  port: number;
  services: readonly RegisteredService[];
  pipeline: RequestPipeline;
  bodyLimit: number;
  plainRoutes: Record<string, PlainRoute>;
  /** The console's static files at /console (and `GET /`): answers and returns true for its paths. */
  console?: (req: http.IncomingMessage | http2.Http2ServerRequest, res: NodeResponse) => boolean;
  connections?: ConnectionLimits;
  /** Serve TLS (HTTPS, ALPN h2 and http/1.1) with this PEM certificate chain and key; unset: cleartext (h2c and HTTP/1.1). */
  tls?: { cert: Buffer; key: Buffer };
  /** The API reference at /docs (api-docs.ts): answers and returns true for its paths. */
  docs?: (req: http.IncomingMessage | http2.Http2ServerRequest, res: NodeResponse) => boolean;
  /** CORS headers and preflights (cors.ts): answers and returns true for a preflight. */
  cors?: (req: http.IncomingMessage | http2.Http2ServerRequest, res: NodeResponse) => boolean;
}): Promise<RunningServer> {
  // Refuses to serve (NodeInternalsError, naming the Node version) where a private detail of Node
  // or connect that the transport relies on differs from what node-internals.ts expects.
  await checkNodeInternals();
  const { services, pipeline } = options;
  const limits = options.connections ?? DEFAULT_CONNECTION_LIMITS;
  const transcoder = createTranscoder(services, pipeline, options.bodyLimit);
  const grpcUnary = createGrpcUnary(services, pipeline, options.bodyLimit);
  // The one /v1alpha route that streams (Server-Sent Events), which the transcoder cannot serve.
  const eventStream = createEventStreamRoute(services, pipeline);
  const descs: DescService[] = services.map((s) => s.service);
  const router = createConnectRouter({
    interceptors: [pipeline.interceptor()],
    readMaxBytes: options.bodyLimit,
    acceptCompression: [compressionGzip, compressionBrotli],
  });
  for (const { service, impl } of services) router.service(service, impl as never);
  router.service(ServerReflection, createReflectionService([...descs, ServerReflection]));
  const rpcs = new Map(router.handlers.map((h) => [h.requestPath, withErrorDetails(h)]));

  const fallback = (req: http.IncomingMessage | http2.Http2ServerRequest, res: NodeResponse) => {
    if (eventStream(req, res)) return;
    if (options.console?.(req, res)) return;
    if (options.docs?.(req, res)) return;
    const path = (req.url ?? "/").split("?")[0]!;
    const plain = options.plainRoutes[path];
    if (plain && req.method === "GET") {
      plain().then(
        (body) => {
          const text = typeof body === "string";
          res.writeHead(200, { "content-type": text ? "text/plain; version=0.0.4" : "application/json", "cache-control": "no-cache" });
          res.end(text ? body : JSON.stringify(body));
        },
        (err) => {
          pipeline.logger.error({ err }, "plain route failed");
          res.writeHead(503, { "content-type": "application/json", ...retryHeaders(503) });
          res.end(JSON.stringify({ detail: "unavailable", message: "Temporarily unavailable.", request_id: pipeline.requestId(undefined) }));
        },
      );
      return;
    }
    void transcoder(req, res);
  };

  // connect-node's adapter, plus one error-shaping wrapper around every RPC handler.
  const handler = (req: http.IncomingMessage | http2.Http2ServerRequest, res: NodeResponse) => {
    // Before any route: a preflight is answered here, and every answer carries the CORS headers.
    if (options.cors?.(req, res)) return;
    const rpc = rpcs.get((req.url ?? "").split("?", 1)[0]!);
    if (!rpc) {
      fallback(req, res);
      return;
    }
    const started = performance.now();
    const values = createContextValues().set(clientAddressKey, req.socket.remoteAddress ?? "");
    // connect reads a unary call's body before any interceptor, so a client that goes away before
    // its body ends never reaches the pipeline, which logs and counts every call (and connect may
    // never finish such a call): it is logged and counted here, once the response is closed.
    res.once("close", () => {
      if (!values.get(reachedPipelineKey) && abortedByClient(req)) {
        pipeline.requestClosed(protocolOf(req.headers["content-type"]), `${rpc.service.name}.${rpc.method.name}`, pipeline.requestId(req.headers["x-request-id"]), started);
      }
    });
    const uReq = universalRequestFromNodeRequest(req, res, undefined, values);
    rpc(uReq)
      .then((uRes) => universalResponseToNodeResponse(uRes, res))
      .catch((err) => {
        if (ConnectError.from(err).code !== Code.Aborted && !abortedByClient(req)) pipeline.logger.warn({ err, rpc: rpc.method.name }, "rpc response failed");
      });
  };

  // Deadlines (slowloris): Node's own headersTimeout and requestTimeout, checked every
  // `connectionsCheckingInterval` (a tenth of the header deadline, within 10 ms..1 s) on the
  // connections handed to h1 (trackHandedConnections; node-internals.ts); its keepAliveTimeout
  // closes a connection idle between requests. No timer runs per request.
  const h1 = http.createServer(
    {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      keepAliveTimeout: limits.idleTimeoutMs,
      connectionsCheckingInterval: Math.min(1000, Math.max(10, Math.floor(limits.headersTimeoutMs / 10))),
    },
    handler,
  );
  trackHandedConnections(h1);
  // A request Node's parser refuses (headers over 16 KiB, malformed HTTP) never reaches the
  // handler; it still gets the error body every other refusal has, then the connection closes.
  h1.on("clientError", (err: NodeJS.ErrnoException, socket: net.Socket) => {
    // A request not received in time (headers or whole) is not answered: the connection closes.
    if (!socket.writable || err.code === "ECONNRESET" || err.code === "ERR_HTTP_REQUEST_TIMEOUT") {
      socket.destroy();
      return;
    }
    const tooLarge = err.code === "HPE_HEADER_OVERFLOW";
    const refusal = tooLarge
      ? new MandateError("payload_too_large", "The request line and headers exceed 16 KiB.")
      : new MandateError("validation_failed", "The request is not well-formed HTTP/1.1.");
    const status = tooLarge ? 431 : 400;
    const text = JSON.stringify(errorBody(refusal, pipeline.requestId(undefined)).body);
    socket.end(
      `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n\r\n${text}`,
    );
  });
  // HTTP/2 streams the unary gRPC fast path takes are served raw; the others become request and
  // response objects, as a server with a request handler makes them, on `h2compat`, which never
  // listens: it only turns the streams `h2` hands it into requests for `handler` (a private
  // listener of Node's: see forwardToCompat in node-internals.ts).
  const h2 = http2.createServer({});
  const h2compat = http2.createServer({}, handler);
  // Every stream, whichever path serves it, is held to the request deadline (connection-limits.ts):
  // the session's idle check spares a session with any stream open, so a stalled stream would
  // otherwise hold its session, and its place under the per-address cap, for ever.
  const streamDeadlines = createStreamDeadlines(limits.requestTimeoutMs);
  h2.on("stream", (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, flags: number, rawHeaders: string[]) => {
    streamDeadlines.watch(stream);
    const fast = grpcUnary.route(headers);
    if (fast) void grpcUnary.serve(stream, headers, fast);
    else forwardToCompat(h2compat, stream, headers, flags, rawHeaders);
  });
  const sessions = new Set<http2.Http2Session>();
  // The header deadline of the connection being handed to h2, whose "session" event is synchronous.
  let handedDeadline: NodeJS.Timeout | undefined;
  h2.on("session", (session) => {
    sessions.add(session);
    const stopRenewing = renewStreamTables(session);
    // The client's SETTINGS follow its whole preface: the header deadline is met.
    const deadline = handedDeadline;
    handedDeadline = undefined;
    if (deadline !== undefined) session.once("remoteSettings", () => clearTimeout(deadline));
    // Node's session timer, refreshed by the session's own activity: a session found with no
    // stream open when it fires is closed (GOAWAY); one with streams open is looked at again
    // an idle period later.
    session.setTimeout(limits.idleTimeoutMs);
    session.on("timeout", () => {
      if (hasOpenStreams(session)) session.setTimeout(limits.idleTimeoutMs);
      else session.close();
    });
    session.on("close", () => {
      sessions.delete(session);
      stopRenewing();
    });
  });
  const sockets = new Set<net.Socket>();
  // HTTP/1.1 requests in flight per socket: draining closes a socket once it is idle.
  // (http.Server's own idle tracking only works for servers that listen themselves.)
  const busy = new Map<net.Socket, number>();
  const h1Sockets = new Set<net.Socket>();
  // The header deadline of each HTTP/1.1 connection that has not yet completed its first request's
  // headers (later ones are h1's headersTimeout alone).
  const awaitingHeaders = new Map<net.Socket, NodeJS.Timeout>();
  const perAddress = new Map<string, number>();
  const isTrustedProxy = createTrustedProxyCheck(limits.trustedProxies);
  // With TLS, each accepted socket goes to `tlsServer` (which never listens itself) after the
  // per-address cap and under the same header deadline (a handshake that never finishes is cut
  // with it); once secure it is handed over by its ALPN protocol, h2 or http/1.1. A TLSSocket made
  // by hand (new tls.TLSSocket) instead carried HTTP/1.1 but lost HTTP/2 responses (curl:
  // "stream was not closed cleanly"); one made by a tls.Server carries both.
  const tlsServer = options.tls
    ? tls.createServer({ cert: options.tls.cert, key: options.tls.key, ALPNProtocols: ["h2", "http/1.1"], handshakeTimeout: limits.headersTimeoutMs })
    : undefined;
  // The header deadline of each connection in its handshake, by its peer's address and port.
  const handshaking = new Map<string, NodeJS.Timeout>();
  const peerOf = (socket: net.Socket) => `${socket.remoteAddress ?? ""}|${socket.remotePort ?? 0}`;
  tlsServer?.on("secureConnection", (secure: tls.TLSSocket) => {
    const deadline = handshaking.get(peerOf(secure));
    if (deadline === undefined) {
      secure.destroy();
      return;
    }
    handshaking.delete(peerOf(secure));
    secure.on("close", () => {
      h1Sockets.delete(secure);
      busy.delete(secure);
      awaitingHeaders.delete(secure);
    });
    handOver(secure, deadline, secure.alpnProtocol === "h2");
  });
  // A failed handshake ends its connection (tls.Server destroys it); it is not the server's error.
  tlsServer?.on("tlsClientError", () => undefined);
  let draining = false;
  const closeIfIdle = (socket: net.Socket) => {
    if (draining && !busy.get(socket)) socket.destroy();
  };
  h1.on("request", (req: http.IncomingMessage, res: http.ServerResponse) => {
    const socket = req.socket;
    const deadline = awaitingHeaders.get(socket);
    if (deadline !== undefined) {
      clearTimeout(deadline);
      awaitingHeaders.delete(socket);
    }
    busy.set(socket, (busy.get(socket) ?? 0) + 1);
    if (draining) res.setHeader("connection", "close");
    // A request answered before its body was read whole (a refusal such as payload_too_large
    // decided from its length) leaves the rest of the body on the connection, where the next
    // request would never be read: such an answer closes the connection instead of keeping it.
    const writeHead = res.writeHead;
    res.writeHead = function (this: http.ServerResponse, ...args: Parameters<typeof writeHead>) {
      if (!req.complete) this.setHeader("connection", "close");
      return writeHead.apply(this, args);
    } as typeof writeHead;
    res.on("close", () => {
      busy.set(socket, (busy.get(socket) ?? 1) - 1);
      closeIfIdle(socket);
    });
  });
  // noDelay: a response is written as it is ready. http.Server sets it on its own sockets, but
  // these are accepted here and handed to HTTP/2 too, where Nagle's algorithm meets the peer's
  // delayed ACK and a small write waits for the delayed-ACK timer.
  const server = net.createServer({ noDelay: true }, (socket) => {
    // The per-address cap: one connection over it is closed at once, before anything is read. A
    // trusted proxy's connections carry all its clients (and it limits them itself): not counted.
    const address = socket.remoteAddress ?? "";
    const capped = !isTrustedProxy(address);
    if (capped) {
      const open = perAddress.get(address) ?? 0;
      if (open >= limits.maxPerAddress) {
        socket.destroy();
        return;
      }
      perAddress.set(address, open + 1);
    }
    sockets.add(socket);
    // The header deadline, from acceptance: until the first request's headers are complete
    // (HTTP/1.1) or the client's SETTINGS after its preface arrive (HTTP/2). One timer per
    // connection; it also bounds a connection that sends nothing or part of what is peeked at.
    const deadline = setTimeout(() => socket.destroy(), limits.headersTimeoutMs);
    deadline.unref();
    socket.on("close", () => {
      clearTimeout(deadline);
      if (capped) {
        const left = (perAddress.get(address) ?? 1) - 1;
        if (left > 0) perAddress.set(address, left);
        else perAddress.delete(address);
      }
      sockets.delete(socket);
      h1Sockets.delete(socket);
      busy.delete(socket);
      awaitingHeaders.delete(socket);
    });
    if (!tlsServer) {
      serve(socket, deadline);
      return;
    }
    const peer = peerOf(socket);
    handshaking.set(peer, deadline);
    socket.on("close", () => handshaking.delete(peer));
    tlsServer.emit("connection", socket);
  });
  /** Hands a cleartext connection to h2 or h1 by its first bytes. */
  const serve = (socket: net.Socket, deadline: NodeJS.Timeout) => {
    // The first bytes decide the protocol; while they are a strict prefix of the HTTP/2 preface
    // ("P" may begin "POST" as well), more are awaited. A socket ending meanwhile closes itself.
    let head: Buffer = Buffer.alloc(0);
    const peek = () => {
      for (let chunk = socket.read() as Buffer | null; chunk !== null; chunk = socket.read() as Buffer | null) {
        head = head.length === 0 ? chunk : Buffer.concat([head, chunk]);
      }
      const n = Math.min(head.length, HTTP2_PREFACE.length);
      const h2like = head.subarray(0, n).equals(HTTP2_PREFACE.subarray(0, n));
      if (h2like && head.length < HTTP2_PREFACE.length) return;
      socket.off("readable", peek);
      socket.unshift(head);
      handOver(socket, deadline, h2like);
    };
    socket.on("readable", peek);
  };
  // Emitting "connection" hands a socket to a server that does not listen itself (documented
  // for http.Server; Http2Server takes it through the same net.Server connection listener).
  const handOver = (socket: net.Socket, deadline: NodeJS.Timeout, toH2: boolean) => {
    if (toH2) {
      handedDeadline = deadline;
      h2.emit("connection", socket);
      handedDeadline = undefined;
    } else {
      h1Sockets.add(socket);
      awaitingHeaders.set(socket, deadline);
      h1.emit("connection", socket);
    }
  };
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host, resolve);
  });
  const { port } = server.address() as net.AddressInfo;
  return {
    port,
    /** Stops accepting, lets requests in flight finish (up to `graceMs`), then cuts what remains. */
    close: (graceMs = 5000) =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        draining = true;
        untrackHandedConnections(h1);
        streamDeadlines.stop();
        for (const session of sessions) session.close();
        const deadline = setTimeout(() => {
          for (const s of sockets) s.destroy();
        }, graceMs);
        deadline.unref();
        const poll = setInterval(() => {
          for (const socket of h1Sockets) closeIfIdle(socket);
          if (sockets.size === 0) {
            clearInterval(poll);
            clearTimeout(deadline);
          }
        }, 50);
        poll.unref();
      }),
  };
}
