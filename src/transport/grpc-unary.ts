import http2 from "node:http2";
import { fromBinary, toBinary, type DescMethod, type DescService, type Message } from "@bufbuild/protobuf";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { MandateError } from "../base/errors.js";
import { ClientClosedError, headerReader, headersOf, readBody } from "./node-request.js";
import { describeError, toConnectError } from "./errors.js";
import type { RequestPipeline } from "./pipeline.js";
import type { RegisteredService } from "./transcoder.js";

/** The request content types the fast path takes (binary protobuf). */
const CONTENT_TYPES = new Set(["application/grpc", "application/grpc+proto"]);
/** What it answers with, as connect-node does for both. */
const RESPONSE_TYPE = "application/grpc+proto";

interface UnaryMethod {
  service: DescService;
  method: DescMethod;
  impl: RegisteredService["impl"];
}

/** Milliseconds per grpc-timeout unit (gRPC over HTTP/2: `TimeoutValue TimeoutUnit`, at most 8 digits). */
const TIMEOUT_UNIT_MS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1_000, m: 1, u: 0.001, n: 0.000_001 };

/** A grpc-timeout header in milliseconds: 0 when absent, undefined when malformed (connect-node then refuses it, so the fast path leaves it there). */
export function grpcTimeoutMs(value: string | string[] | undefined): number | undefined {
  if (value === undefined) return 0;
  const m = typeof value === "string" ? /^(\d{1,8})([HMSmun])$/.exec(value) : null;
  return m ? Number(m[1]) * TIMEOUT_UNIT_MS[m[2]!]! : undefined;
}

/** One gRPC length-prefixed message: flag 0 (uncompressed), big-endian length, the bytes. */
function frame(bytes: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(5 + bytes.length);
  out[0] = 0;
  out.writeUInt32BE(bytes.length, 1);
  out.set(bytes, 5);
  return out;
}

/**
 * respond()'s options, with `endStream` given: Node copies them with a spread and then sets
 * `endStream`, and in this V8 a spread followed by a member its source lacks gets a hidden class
 * of its own (in the old generation) per call; with the member present it is only overwritten.
 * (How Node copies them is its own business: where it differs, only this saving is lost.)
 */
const RESPOND_OPTIONS = { endStream: false, waitForTrailers: true } as const;

/** A stream reset by the client emits 'error', which would throw without a listener; the call's outcome is logged anyway. */
function ignore(): void {}

/**
 * Unary gRPC calls of the registered services, answered on the raw HTTP/2 stream without
 * connect-node and without Node's request/response compatibility objects, both of which cost
 * CPU per call that this path avoids (connect's async-iterable pipelines, a deadline timer and
 * linked abort signals per call). This path takes only the plain case: binary protobuf and no
 * compression; connect-node serves everything else (other protocols, compressed or JSON
 * messages, malformed deadlines, streaming, reflection). A well-formed deadline (grpc-timeout,
 * which most clients send on every call) is the client's to enforce: it resets the stream when
 * the deadline passes, and the answer is dropped as for any reset. connect-node does no more for
 * these handlers, which finish what they started (a decision is committed whole or not at all)
 * and answer even past the deadline; a timer per call would change nothing. It runs the same
 * pipeline as connect's interceptor, in the same order (decode, authenticate, check text,
 * call), and writes errors with connect's own trailer encoding, so a client cannot tell which
 * path answered.
 *
 * Left as it is in Node's http2: request header values are external strings, which V8 allocates
 * in the old generation and frees only in a full collection. (The session's stream table, which
 * kept every finished stream alive until a full collection too, is renewed by renewStreamTables
 * in node-internals.ts.)
 */
export function createGrpcUnary(services: readonly RegisteredService[], pipeline: RequestPipeline, bodyLimit: number) {
  const methods = new Map<string, UnaryMethod>();
  for (const { service, impl } of services) {
    for (const method of service.methods) if (method.methodKind === "unary") methods.set(`/${service.typeName}/${method.name}`, { service, method, impl });
  }

  /** The method a stream may take the fast path to, or undefined when connect-node must serve it. */
  function route(headers: http2.IncomingHttpHeaders): UnaryMethod | undefined {
    if (headers[":method"] !== "POST" || !CONTENT_TYPES.has(headers["content-type"] ?? "") || grpcTimeoutMs(headers["grpc-timeout"]) === undefined) return undefined;
    const encoding = headers["grpc-encoding"];
    if (encoding !== undefined && encoding !== "identity") return undefined;
    return methods.get(headers[":path"] ?? "");
  }

  /**
   * Answers with headers, the message if any, and `trailers` (grpc-status and, on error, its
   * details). When the request body has not all arrived (it was refused as too large), the rest
   * of the upload is read and dropped (the stream's request deadline bounds it), as connect-node
   * does. RST_STREAM NO_ERROR after the trailers would stop it sooner and is allowed (RFC 9113
   * §8.1), but Node's own HTTP/2 client (under connect-node's gRPC transport) then
   * reports "Premature close" instead of the answer.
   */
  function answer(stream: http2.ServerHttp2Stream, requestId: string, trailers: http2.OutgoingHttpHeaders, message?: Buffer): void {
    if (stream.destroyed) return;
    if (!stream.headersSent) stream.respond({ ":status": 200, "content-type": RESPONSE_TYPE, "x-request-id": requestId }, RESPOND_OPTIONS);
    stream.once("wantTrailers", () => {
      stream.sendTrailers(trailers);
      if (!stream.readableEnded) stream.resume();
    });
    stream.end(message);
  }

  async function serve(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, call: UnaryMethod): Promise<void> {
    const started = performance.now();
    const requestId = pipeline.requestId(headers["x-request-id"]);
    const path = headers[":path"]!;
    let code = "ok";
    stream.on("error", ignore);
    try {
      const body = await readBody(stream, bodyLimit + 5);
      if (body.length < 5 || body[0] !== 0 || body.readUInt32BE(1) !== body.length - 5) {
        throw new MandateError("validation_failed", "The request body is not exactly one uncompressed gRPC message.");
      }
      let message: Message;
      try {
        message = fromBinary(call.method.input, body.subarray(5));
      } catch {
        throw new MandateError("validation_failed", `The request is not a valid ${call.method.input.typeName} message.`);
      }
      const caller = await pipeline.authenticate(call.service.typeName, call.method.name, headerReader(headers), stream.session?.socket?.remoteAddress ?? "");
      const output = await pipeline.invoke(call, message, caller, { protocolName: "grpc", requestMethod: "POST", url: path, headers: () => headersOf(headers), requestId });
      answer(stream, requestId, { "grpc-status": "0" }, frame(toBinary(call.method.output, output)));
    } catch (err) {
      if (err instanceof ClientClosedError) {
        code = "client_closed";
        return;
      }
      const described = describeError(err);
      code = described.code;
      if (described.status >= 500) pipeline.logger.error({ err, request_id: requestId }, "request failed");
      const trailer = new Headers();
      setTrailerStatus(trailer, toConnectError(err, requestId));
      answer(stream, requestId, Object.fromEntries(trailer));
    } finally {
      const rpc = `${call.service.name}.${call.method.name}`;
      if (code === "client_closed") pipeline.requestClosed("grpc", rpc, requestId, started);
      else {
        const ms = performance.now() - started;
        pipeline.metrics.observe("grpc", rpc, code, ms);
        pipeline.logger.info({ request_id: requestId, protocol: "grpc", rpc, detail: code, ms: Math.round(ms * 100) / 100 }, "request");
      }
    }
  }

  return { route, serve };
}
