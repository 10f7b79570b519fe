import { create, createFileRegistry, fromBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, file_google_protobuf_struct } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createConnectRouter, createContextValues, type Interceptor } from "@connectrpc/connect";
import { createAsyncIterable, encodeEnvelope, type UniversalHandler } from "@connectrpc/connect/protocol";
import { describe, expect, it } from "vitest";
import { ErrorDetailSchema } from "../../../src/gen/mandate/v1/errors_pb.js";
import { asClientInput, reachedPipelineKey, withErrorDetails } from "../../../src/transport/connect-errors.js";

/** A service whose one unary method takes and returns a google.protobuf.Value. */
const service = (() => {
  const file = create(FileDescriptorProtoSchema, {
    name: "test/probe.proto",
    package: "test",
    syntax: "proto3",
    dependency: ["google/protobuf/struct.proto"],
    service: [{ name: "Probe", method: [{ name: "Echo", inputType: ".google.protobuf.Value", outputType: ".google.protobuf.Value" }] }],
  });
  return createFileRegistry(file, (name) => (name === "google/protobuf/struct.proto" ? file_google_protobuf_struct : undefined)).getService("test.Probe")!;
})();

/** The Echo handler behind withErrorDetails, with `interceptors` standing in for the pipeline's. */
function handler(interceptors: Interceptor[] = []): UniversalHandler {
  const router = createConnectRouter({ interceptors });
  router.service(service, { echo: (value: unknown) => value } as never);
  return withErrorDetails(router.handlers[0]!);
}

/** Marks the call as having reached the pipeline, as RequestPipeline's interceptor does. */
const marks: Interceptor = (next) => (req) => {
  req.contextValues.set(reachedPipelineKey, true);
  return next(req);
};

async function call(h: UniversalHandler, contentType: string, body: Uint8Array) {
  const res = await h({
    httpVersion: "2.0",
    method: "POST",
    url: `http://test${h.requestPath}`,
    header: new Headers({ "content-type": contentType, "connect-protocol-version": "1" }),
    body: createAsyncIterable([body]),
    signal: new AbortController().signal,
    contextValues: createContextValues(),
  });
  const parts: Uint8Array[] = [];
  if (res.body instanceof Uint8Array) parts.push(res.body);
  else if (res.body) for await (const chunk of res.body) parts.push(chunk);
  return { status: res.status, trailer: res.trailer, body: Buffer.concat(parts) };
}

function detailOf(trailer: Headers | undefined) {
  const bin = trailer?.get("grpc-status-details-bin");
  expect(bin).toBeTruthy();
  // google.rpc.Status: field 3 holds the Any whose value is the ErrorDetail.
  const status = Buffer.from(bin!, "base64");
  const any = readField(status, 3)!;
  return fromBinary(ErrorDetailSchema, readField(any, 2)!);
}

/** The first length-delimited field `field` of a protobuf message (enough for Status and Any). */
function readField(buf: Uint8Array, field: number): Uint8Array | undefined {
  let i = 0;
  const varint = () => {
    let n = 0;
    for (let shift = 0; ; shift += 7) {
      const b = buf[i++]!;
      n += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return n;
    }
  };
  while (i < buf.length) {
    const tag = varint();
    if ((tag & 7) === 0) varint();
    else if ((tag & 7) === 2) {
      const len = varint();
      if (tag >> 3 === field) return buf.subarray(i, i + len);
      i += len;
    } else throw new Error(`unexpected wire type ${tag & 7}`);
  }
  return undefined;
}

/** A gRPC message claiming a 5-byte string in field 1 (string_value of Value) but holding one byte. */
const UNDECODABLE = encodeEnvelope(0, new Uint8Array([0x1a, 0x05, 0x61]));

describe("withErrorDetails: errors connect raises, recognised by where they arise", () => {
  it("an undecodable gRPC message (INTERNAL from connect, before the pipeline) is INVALID_ARGUMENT validation_failed", async () => {
    const res = await call(handler([marks]), "application/grpc", UNDECODABLE);
    expect(res.trailer?.get("grpc-status")).toBe(String(Code.InvalidArgument));
    const detail = detailOf(res.trailer);
    expect(detail.detail).toBe("validation_failed");
    expect(detail.message).toMatch(/^parse binary: /);
  });

  it("an undecodable Connect binary message gets a 400 with validation_failed", async () => {
    const res = await call(handler([marks]), "application/proto", new Uint8Array([0x1a, 0x05, 0x61]));
    expect(res.status).toBe(400);
    const json = JSON.parse(res.body.toString("utf8")) as { code: string; details: { value: string }[] };
    expect(json.code).toBe("invalid_argument");
    expect(fromBinary(ErrorDetailSchema, Buffer.from(json.details[0]!.value, "base64")).detail).toBe("validation_failed");
  });

  it("an INTERNAL raised once the call reached the pipeline stays internal", async () => {
    const fails: Interceptor = () => () => {
      throw new ConnectError("parse binary: looks like input but is not", Code.Internal);
    };
    const res = await call(handler([marks, fails]), "application/grpc", encodeEnvelope(0, new Uint8Array()));
    expect(res.trailer?.get("grpc-status")).toBe(String(Code.Internal));
    expect(detailOf(res.trailer)).toMatchObject({ detail: "internal", message: "Internal error." });
  });

  it("Connect JSON nested too deeply for connect's decoder is too_deep", async () => {
    const res = await call(handler([marks]), "application/json", Buffer.from(`${"[".repeat(50_000)}${"]".repeat(50_000)}`));
    expect(res.status).toBe(400);
    const json = JSON.parse(res.body.toString("utf8")) as { details: { value: string }[] };
    const detail = fromBinary(ErrorDetailSchema, Buffer.from(json.details[0]!.value, "base64"));
    expect(detail).toMatchObject({ detail: "validation_failed", message: "The message is nested too deeply." });
    expect(detail.errors.map((e) => e.code)).toEqual(["too_deep"]);
  });
});

describe("asClientInput", () => {
  async function drain(it: AsyncIterable<unknown>): Promise<unknown> {
    try {
      for await (const _ of it) void _;
      return undefined;
    } catch (err) {
      return err;
    }
  }

  it("reports connect's INTERNAL in reading a request stream as INVALID_ARGUMENT, with the same message", async () => {
    async function* requests() {
      yield 1;
      throw new ConnectError("parse binary: premature EOF", Code.Internal);
    }
    const err = await drain(asClientInput(requests()));
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.InvalidArgument);
    expect((err as ConnectError).rawMessage).toBe("parse binary: premature EOF");
  });

  it("passes messages and other errors through unchanged", async () => {
    const seen: number[] = [];
    for await (const n of asClientInput(createAsyncIterable([1, 2, 3]))) seen.push(n);
    expect(seen).toEqual([1, 2, 3]);
    const limit = new ConnectError("too big", Code.ResourceExhausted);
    async function* requests() {
      yield 1;
      throw limit;
    }
    expect(await drain(asClientInput(requests()))).toBe(limit);
  });
});
