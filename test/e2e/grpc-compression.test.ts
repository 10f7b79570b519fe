import http from "node:http";
import http2 from "node:http2";
import zlib from "node:zlib";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ServerReflectionRequestSchema } from "../../src/gen/grpc/reflection/v1/reflection_pb.js";
import { ErrorDetailSchema } from "../../src/gen/mandate/v1/errors_pb.js";
import { SubmitIntentRequestSchema } from "../../src/gen/mandate/v1/intents_pb.js";
import { startService, type TestService } from "../support/service.js";

/*
 * A compressed gRPC frame the service cannot decompress is the client's mistake, never a server
 * error (docs/architecture.md, Error model: errors raised outside our code): INVALID_ARGUMENT with
 * a mandate.v1.ErrorDetail (`validation_failed`, a request id), whichever path serves the call —
 * a unary method (IntentService/SubmitIntent: connect-node takes its gzip and brotli frames, the
 * unary fast path the compressed flag without an encoding), the reflection stream, and the
 * gRPC-Web and Connect protocols.
 */

function frame(bytes: Uint8Array, flags = 0): Buffer {
  const prefix = Buffer.alloc(5);
  prefix[0] = flags;
  prefix.writeUInt32BE(bytes.length, 1);
  return Buffer.concat([prefix, bytes]);
}

interface Answer {
  grpcStatus: string | undefined;
  detail: string | undefined;
  requestId: string | undefined;
}

function detailOf(status: string | undefined, bin: string | undefined): Pick<Answer, "detail" | "requestId"> {
  if (!status || !bin) return { detail: undefined, requestId: undefined };
  const err = findTrailerError(new Headers({ "grpc-status": status, "grpc-status-details-bin": bin }));
  const found = err?.details.find((d) => "type" in d && d.type === "mandate.v1.ErrorDetail");
  if (!found || !("value" in found) || !(found.value instanceof Uint8Array)) return { detail: undefined, requestId: undefined };
  const d = fromBinary(ErrorDetailSchema, found.value);
  return { detail: d.detail, requestId: d.requestId };
}

const intentMessage = toBinary(SubmitIntentRequestSchema, create(SubmitIntentRequestSchema, { intent: Buffer.from(JSON.stringify({ action: "reference_noop", pad: "x".repeat(2000) })) }));
const reflectionMessage = toBinary(ServerReflectionRequestSchema, create(ServerReflectionRequestSchema, { messageRequest: { case: "listServices", value: "" } }));

/** The inputs of issue 19, item 12, for a given message. */
function malformed(message: Uint8Array): { name: string; encoding: string | undefined; body: Buffer }[] {
  const br = zlib.brotliCompressSync(message);
  return [
    // A gzip member cut off after its two magic bytes.
    { name: "gzip, 01 00000002 1f8b", encoding: "gzip", body: Buffer.from("01000000021f8b", "hex") },
    { name: "truncated brotli", encoding: "br", body: frame(br.subarray(0, Math.floor(br.length / 2)), 1) },
    { name: "compressed flag without grpc-encoding", encoding: undefined, body: frame(message, 1) },
  ];
}

describe("malformed compressed gRPC frames → INVALID_ARGUMENT with an ErrorDetail", () => {
  let svc: TestService;
  let session: http2.ClientHttp2Session;

  beforeAll(async () => {
    svc = await startService();
    session = http2.connect(svc.baseUrl);
  });
  afterAll(async () => {
    session?.close();
    await svc?.close();
  });

  function grpc(path: string, body: Buffer, headers: Record<string, string>): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const req = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers", "grpc-accept-encoding": "identity", ...headers });
      let head: http2.IncomingHttpHeaders = {};
      let trailers: http2.IncomingHttpHeaders = {};
      req.on("response", (h) => (head = h));
      req.on("trailers", (t) => (trailers = t));
      req.on("data", () => undefined);
      req.on("end", () => {
        const pick = (k: string) => (trailers[k] ?? head[k]) as string | undefined;
        resolve({ grpcStatus: pick("grpc-status"), ...detailOf(pick("grpc-status"), pick("grpc-status-details-bin")) });
      });
      req.on("error", reject);
      req.end(body);
    });
  }

  const submitIntent = "/mandate.v1.IntentService/SubmitIntent";
  const reflection = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo";
  const targets: { name: string; path: string; message: Uint8Array; headers: Record<string, string> }[] = [
    { name: "SubmitIntent", path: submitIntent, message: intentMessage, headers: {} },
    { name: "the reflection stream", path: reflection, message: reflectionMessage, headers: {} },
  ];

  for (const target of targets) {
    for (const input of malformed(target.message)) {
      it(`gRPC, ${target.name}: ${input.name}`, async () => {
        const headers: Record<string, string> = { ...target.headers, ...(input.encoding && { "grpc-encoding": input.encoding }) };
        const answer = await grpc(target.path, input.body, headers);
        expect(answer.grpcStatus, JSON.stringify(answer)).toBe("3");
        expect(answer.detail).toBe("validation_failed");
        expect(answer.requestId).toBeTruthy();
      });
    }
  }

  // The Connect protocol's streaming form (connect-node serves it over HTTP/2 only): the status
  // travels in the end-stream message (flag 2) as JSON, whose error must carry the ErrorDetail too.
  async function connectStream(encoding: string | undefined, body: Buffer) {
    const answer = await new Promise<Buffer>((resolve, reject) => {
      const req = session.request({ ":method": "POST", ":path": reflection, "content-type": "application/connect+proto", ...(encoding && { "connect-content-encoding": encoding }) });
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => resolve(Buffer.concat(chunks)));
      req.on("error", reject);
      req.end(body);
    });
    let messages = 0;
    let endStream: { error?: { code: string; details?: { type: string; value: string }[] } } | undefined;
    for (let at = 0; at + 5 <= answer.length; at += 5 + answer.readUInt32BE(at + 1)) {
      if (answer[at]! & 0x02) endStream = JSON.parse(answer.subarray(at + 5, at + 5 + answer.readUInt32BE(at + 1)).toString("utf8"));
      else messages++;
    }
    return { messages, endStream };
  }

  it("Connect streaming, the reflection stream: a well-formed call still answers", async () => {
    expect(await connectStream(undefined, frame(reflectionMessage))).toEqual({ messages: 1, endStream: {} });
  });

  for (const input of malformed(reflectionMessage)) {
    it(`Connect streaming, the reflection stream: ${input.name}`, async () => {
      const { endStream } = await connectStream(input.encoding, input.body);
      expect(endStream?.error?.code, JSON.stringify(endStream)).toBe("invalid_argument");
      const d = endStream?.error?.details?.find((x) => x.type === "mandate.v1.ErrorDetail");
      expect(d && fromBinary(ErrorDetailSchema, Buffer.from(d.value, "base64")).detail, JSON.stringify(endStream)).toBe("validation_failed");
    });
  }

  /** One HTTP/1.1 request; status, headers and body. */
  function h1(path: string, headers: Record<string, string>, body: Buffer): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }> {
    return new Promise((resolve, reject) => {
      const req = http.request(new URL(path, svc.baseUrl), { method: "POST", headers: { ...headers, "content-length": String(body.length) }, agent: false }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
        res.on("error", reject);
      });
      req.on("error", reject);
      req.end(body);
    });
  }

  for (const input of malformed(intentMessage)) {
    it(`gRPC-Web, SubmitIntent: ${input.name}`, async () => {
      const res = await h1(submitIntent, { "content-type": "application/grpc-web+proto", ...(input.encoding && { "grpc-encoding": input.encoding }) }, input.body);
      // The status travels in the trailer frame at the end of the body (or in the headers of a trailers-only answer).
      let status = res.headers["grpc-status"] as string | undefined;
      let bin = res.headers["grpc-status-details-bin"] as string | undefined;
      for (let at = 0; at + 5 <= res.body.length; ) {
        const flags = res.body[at]!;
        const length = res.body.readUInt32BE(at + 1);
        if (flags & 0x80) {
          for (const line of res.body.subarray(at + 5, at + 5 + length).toString("latin1").split("\r\n")) {
            const [k, ...v] = line.split(":");
            if (k?.trim().toLowerCase() === "grpc-status") status = v.join(":").trim();
            if (k?.trim().toLowerCase() === "grpc-status-details-bin") bin = v.join(":").trim();
          }
        }
        at += 5 + length;
      }
      expect(status).toBe("3");
      expect(detailOf(status, bin).detail).toBe("validation_failed");
    });
  }

  it.each([
    { name: "gzip cut off after its magic bytes", encoding: "gzip", body: Buffer.from("1f8b", "hex") },
    { name: "truncated brotli", encoding: "br", body: zlib.brotliCompressSync(intentMessage).subarray(0, 20) },
  ])("Connect, SubmitIntent: $name → 400 invalid_argument with an ErrorDetail", async ({ encoding, body }) => {
    const res = await h1(submitIntent, { "content-type": "application/proto", "connect-protocol-version": "1", "content-encoding": encoding }, body);
    const json = JSON.parse(res.body.toString("utf8")) as { code: string; details?: { type: string; value: string }[] };
    expect([res.status, json.code]).toEqual([400, "invalid_argument"]);
    const d = json.details?.find((x) => x.type === "mandate.v1.ErrorDetail");
    expect(d && fromBinary(ErrorDetailSchema, Buffer.from(d.value, "base64")).detail).toBe("validation_failed");
  });
});
