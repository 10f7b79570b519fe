import http2 from "node:http2";
import { fromBinary, toBinary, type DescMethod, type DescService, type Message } from "@bufbuild/protobuf";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { MandateError } from "../domain/errors.js";
import { headersOf, readBody } from "./node-request.js";
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

/** One gRPC length-prefixed message: flag 0 (uncompressed), big-endian length, the bytes. */
function frame(bytes: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(5 + bytes.length);
  out[0] = 0;
  out.writeUInt32BE(bytes.length, 1);
  out.set(bytes, 5);
  return out;
}

/**
 * Unary gRPC calls of the registered services, answered without connect-node. connect's gRPC
 * handling (async-iterable pipelines, a deadline timer and linked abort signals per call) cost
 * about 350 µs of CPU per call more than the same call over /v1, which made gRPC the slower way
 * to submit an Intent. This path takes only the plain case: HTTP/2, binary protobuf, no
 * compression and no deadline header; connect-node serves everything else (other protocols,
 * compressed or JSON messages, deadlines, streaming, reflection). It runs the same pipeline as
 * connect's interceptor, in the same order (decode, authenticate, check text, call), and writes
 * errors with connect's own trailer encoding, so a client cannot tell which path answered.
 */
export function createGrpcUnary(services: readonly RegisteredService[], pipeline: RequestPipeline, bodyLimit: number) {
  const methods = new Map<string, UnaryMethod>();
  for (const { service, impl } of services) {
    for (const method of service.methods) if (method.methodKind === "unary") methods.set(`/${service.typeName}/${method.name}`, { service, method, impl });
  }

  /** The method a request may take the fast path to, or undefined when connect-node must serve it. */
  function route(req: http2.Http2ServerRequest): UnaryMethod | undefined {
    const h = req.headers;
    if (req.method !== "POST" || !CONTENT_TYPES.has(h["content-type"] ?? "") || h["grpc-timeout"] !== undefined) return undefined;
    const encoding = h["grpc-encoding"];
    if (encoding !== undefined && encoding !== "identity") return undefined;
    return methods.get(req.url);
  }

  async function serve(req: http2.Http2ServerRequest, res: http2.Http2ServerResponse, call: UnaryMethod): Promise<void> {
    const started = performance.now();
    const requestId = pipeline.requestId(req.headers["x-request-id"]);
    let code = "ok";
    try {
      const body = await readBody(req, bodyLimit + 5);
      if (body.length < 5 || body[0] !== 0 || body.readUInt32BE(1) !== body.length - 5) {
        throw new MandateError("validation_failed", "The request body is not exactly one uncompressed gRPC message.");
      }
      let message: Message;
      try {
        message = fromBinary(call.method.input, body.subarray(5));
      } catch {
        throw new MandateError("validation_failed", `The request is not a valid ${call.method.input.typeName} message.`);
      }
      const headers = headersOf(req);
      const caller = await pipeline.authenticate(call.service.typeName, call.method.name, headers, req.socket.remoteAddress ?? "");
      const output = await pipeline.invoke(call, message, caller, { protocolName: "grpc", requestMethod: "POST", url: req.url, headers, requestId });
      res.writeHead(200, { "content-type": RESPONSE_TYPE, "x-request-id": requestId });
      res.write(frame(toBinary(call.method.output, output)));
      res.addTrailers({ "grpc-status": "0" });
      res.end();
    } catch (err) {
      const described = describeError(err);
      code = described.code;
      if (described.status >= 500) pipeline.logger.error({ err, request_id: requestId }, "request failed");
      const trailer = new Headers();
      setTrailerStatus(trailer, toConnectError(err, requestId));
      if (res.stream.destroyed) return;
      if (!res.headersSent) res.writeHead(200, { "content-type": RESPONSE_TYPE, "x-request-id": requestId });
      res.addTrailers(Object.fromEntries(trailer));
      res.end();
      // A refusal before the whole body arrived (too large): stop the upload, the answer is complete.
      if (!req.complete) res.stream.close(http2.constants.NGHTTP2_NO_ERROR);
    } finally {
      const ms = performance.now() - started;
      pipeline.metrics.observe("grpc", `${call.service.name}.${call.method.name}`, code, ms);
      pipeline.logger.info({ request_id: requestId, protocol: "grpc", rpc: `${call.service.name}.${call.method.name}`, detail: code, ms: Math.round(ms * 100) / 100 }, "request");
    }
  }

  return { route, serve };
}
