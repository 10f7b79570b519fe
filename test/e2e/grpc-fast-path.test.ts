import http2 from "node:http2";
import { create, fromBinary, toBinary, toJson, type DescMessage } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { ErrorDetailSchema } from "../../src/gen/mandate/v1/errors_pb.js";
import { ApiKeySchema, CreateApiKeyRequestSchema, CreateApiKeyResponseSchema, GetOrganizationRequestSchema, OrganizationSchema } from "../../src/gen/mandate/v1/organizations_pb.js";
import { startService, type TestOrg, type TestService } from "../support/service.js";

/*
 * Plain unary gRPC calls (binary protobuf, no compression, no deadline) are answered by the
 * service's own fast path; everything else by connect-node (src/transport/grpc-unary.ts). A
 * `grpc-encoding: gzip` header (on messages flagged uncompressed, which gRPC allows) sends the
 * same call down connect-node's path, so each case here is made both ways and the answers must
 * be the same: HTTP status, grpc-status, the ErrorDetail's code and field errors, and the
 * response message.
 */

interface Answer {
  httpStatus: number;
  grpcStatus: string | undefined;
  contentType: string | undefined;
  message: Buffer;
  detail: { detail: string; fields: string[]; hasRequestId: boolean } | null;
}

function frame(bytes: Uint8Array, flags = 0, length = bytes.length): Buffer {
  const prefix = Buffer.alloc(5);
  prefix[0] = flags;
  prefix.writeUInt32BE(length, 1);
  return Buffer.concat([prefix, bytes]);
}

function unframe(body: Buffer): Buffer {
  return body.length >= 5 ? body.subarray(5, 5 + body.readUInt32BE(1)) : Buffer.alloc(0);
}

function decodeDetail(status: string | undefined, bin: string | undefined): Answer["detail"] {
  if (!status || !bin) return null;
  const err = findTrailerError(new Headers({ "grpc-status": status, "grpc-status-details-bin": bin }));
  const found = err?.details.find((d) => "type" in d && d.type === "mandate.v1.ErrorDetail");
  if (!found || !("value" in found) || !(found.value instanceof Uint8Array)) return null;
  const d = fromBinary(ErrorDetailSchema, found.value);
  return { detail: d.detail, fields: d.errors.map((f) => `${f.field}:${f.code}`), hasRequestId: d.requestId.length > 0 };
}

describe("unary gRPC: the fast path answers as connect-node does", () => {
  let svc: TestService;
  let org: TestOrg;
  let session: http2.ClientHttp2Session;

  beforeAll(async () => {
    svc = await startService();
    org = await svc.newOrg();
    session = http2.connect(svc.baseUrl);
  });
  afterAll(async () => {
    session?.close();
    await svc?.close();
  });

  function call(path: string, body: Buffer, headers: Record<string, string>, viaConnect: boolean): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const req = session.request({
        ":method": "POST",
        ":path": path,
        "content-type": "application/grpc",
        te: "trailers",
        ...headers,
        ...(viaConnect && { "grpc-encoding": "gzip" }),
      });
      let head: http2.IncomingHttpHeaders = {};
      let trailers: http2.IncomingHttpHeaders = {};
      const chunks: Buffer[] = [];
      req.on("response", (h) => (head = h));
      req.on("trailers", (t) => (trailers = t));
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const pick = (k: string) => (trailers[k] ?? head[k]) as string | undefined;
        resolve({
          httpStatus: Number(head[":status"]),
          grpcStatus: pick("grpc-status"),
          contentType: head["content-type"],
          message: unframe(Buffer.concat(chunks)),
          detail: decodeDetail(pick("grpc-status"), pick("grpc-status-details-bin")),
        });
      });
      req.on("error", reject);
      req.end(body);
    });
  }

  /** The call both ways; the answers, with the response message compared as JSON of `output`. */
  async function bothWays(path: string, body: Buffer, headers: Record<string, string>, output?: DescMessage) {
    const [fast, viaConnect] = [await call(path, body, headers, false), await call(path, body, headers, true)];
    const comparable = (a: Answer) => ({ ...a, message: output && a.grpcStatus === "0" ? toJson(output, fromBinary(output, a.message)) : a.message.length });
    expect(comparable(fast)).toEqual(comparable(viaConnect));
    return fast;
  }

  const bearer = () => ({ authorization: `Bearer ${org.apiKey}` });
  const getOrganization = "/mandate.v1.OrganizationService/GetOrganization";
  const createApiKey = "/mandate.v1.OrganizationService/CreateApiKey";

  it("a successful call: the same message", async () => {
    const body = frame(toBinary(GetOrganizationRequestSchema, create(GetOrganizationRequestSchema)));
    const fast = await bothWays(getOrganization, body, bearer(), OrganizationSchema);
    expect(fast.grpcStatus).toBe("0");
    expect(fromBinary(OrganizationSchema, fast.message).organizationId).toBe(org.organizationId);
  });

  it("a call that creates something: each way creates one, with the same shape", async () => {
    const body = frame(toBinary(CreateApiKeyRequestSchema, create(CreateApiKeyRequestSchema, { name: "k", permissions: [1] })));
    const [fast, viaConnect] = [await call(createApiKey, body, bearer(), false), await call(createApiKey, body, bearer(), true)];
    expect([fast.grpcStatus, viaConnect.grpcStatus]).toEqual(["0", "0"]);
    const [a, b] = [fast, viaConnect].map((x) => fromBinary(CreateApiKeyResponseSchema, x.message));
    expect(a!.apiKey).not.toBe(b!.apiKey);
    expect(Object.keys(toJson(CreateApiKeyResponseSchema, a!) as object).sort()).toEqual(Object.keys(toJson(CreateApiKeyResponseSchema, b!) as object).sort());
    expect(ApiKeySchema.typeName).toBe("mandate.v1.ApiKey");
  });

  it("refusals: unauthenticated, field errors, text Postgres cannot store, a message that does not decode", async () => {
    const getBody = frame(toBinary(GetOrganizationRequestSchema, create(GetOrganizationRequestSchema)));
    expect((await bothWays(getOrganization, getBody, {})).grpcStatus).toBe("16");
    expect((await bothWays(getOrganization, getBody, { authorization: "Bearer nope" })).grpcStatus).toBe("16");

    const invalid = await bothWays(createApiKey, frame(toBinary(CreateApiKeyRequestSchema, create(CreateApiKeyRequestSchema, { name: "" }))), bearer());
    expect(invalid.grpcStatus).toBe("3");
    expect(invalid.detail?.fields.length).toBeGreaterThan(0);

    const nul = await bothWays(createApiKey, frame(toBinary(CreateApiKeyRequestSchema, create(CreateApiKeyRequestSchema, { name: "a\u0000b", permissions: [1] }))), bearer());
    expect(nul.detail?.fields).toEqual(["name:invalid_character"]);

    const junk = await bothWays(createApiKey, frame(Buffer.from([0xff, 0xff, 0xff])), bearer());
    expect([junk.grpcStatus, junk.detail?.detail, junk.detail?.hasRequestId]).toEqual(["3", "validation_failed", true]);
  });

  it("a message over the body limit: both ways refuse it with RESOURCE_EXHAUSTED, and the connection keeps serving", async () => {
    const big = frame(toBinary(CreateApiKeyRequestSchema, create(CreateApiKeyRequestSchema, { name: "x".repeat(2 << 20), permissions: [1] })));
    const refused = await bothWays(createApiKey, big, bearer());
    expect([refused.grpcStatus, refused.detail?.detail]).toEqual(["8", "payload_too_large"]);
    const body = frame(toBinary(GetOrganizationRequestSchema, create(GetOrganizationRequestSchema)));
    expect((await call(getOrganization, body, bearer(), false)).grpcStatus).toBe("0");
  });

  it("a call the client cancels before its body ends leaves the service answering on the same connection", async () => {
    const body = frame(toBinary(GetOrganizationRequestSchema, create(GetOrganizationRequestSchema)));
    const cancelled = session.request({ ":method": "POST", ":path": getOrganization, "content-type": "application/grpc", te: "trailers", ...bearer() });
    const closed = new Promise<void>((resolve) => cancelled.on("close", () => resolve()));
    cancelled.on("error", () => undefined);
    // Part of the body is written out (the write's callback) before the cancel, rather than after a sleep.
    await new Promise<void>((resolve, reject) => cancelled.write(body.subarray(0, 3), (err) => (err ? reject(err) : resolve())));
    cancelled.close(http2.constants.NGHTTP2_CANCEL);
    await closed;
    const after = await call(getOrganization, body, bearer(), false);
    expect([after.grpcStatus, fromBinary(OrganizationSchema, after.message).organizationId]).toEqual(["0", org.organizationId]);
  });

  it("deadlines: a call with grpc-timeout takes the fast path and is answered as connect-node answers it, past its deadline too; a malformed one is connect-node's refusal", async () => {
    const body = frame(toBinary(GetOrganizationRequestSchema, create(GetOrganizationRequestSchema)));
    expect((await bothWays(getOrganization, body, { ...bearer(), "grpc-timeout": "30S" }, OrganizationSchema)).grpcStatus).toBe("0");
    // Only the fast path refuses a frame shorter than its declared length (below): this call took it.
    const short = frame(toBinary(GetOrganizationRequestSchema, create(GetOrganizationRequestSchema)), 0, body.length + 5);
    expect((await call(getOrganization, short, { ...bearer(), "grpc-timeout": "30S" }, false)).detail?.detail).toBe("validation_failed");
    // Past its deadline (one nanosecond) when ready: answered all the same both ways (a client
    // that still waits gets the result; one that gave up reset the stream).
    expect((await bothWays(getOrganization, body, { ...bearer(), "grpc-timeout": "1n" }, OrganizationSchema)).grpcStatus).toBe("0");
    expect((await bothWays(getOrganization, body, { ...bearer(), "grpc-timeout": "soon" })).grpcStatus).toBe("3");
  });

  // Here the paths may differ: connect-node takes a frame shorter than its declared length as
  // the message it holds; the fast path refuses anything but exactly one whole plain message.
  // (Compressed frames that do not decompress: grpc-compression.test.ts.)
  it("broken framing: the fast path refuses it with INVALID_ARGUMENT; connect-node's answers carry an ErrorDetail too", async () => {
    const message = toBinary(GetOrganizationRequestSchema, create(GetOrganizationRequestSchema));
    const broken = [frame(message, 0, message.length + 10), frame(message).subarray(0, 3), Buffer.concat([frame(message), frame(message)]), frame(message, 1)];
    for (const body of broken) {
      const fast = await call(getOrganization, body, bearer(), false);
      expect([fast.grpcStatus, fast.detail?.detail], body.toString("hex")).toEqual(["3", "validation_failed"]);
      const viaConnect = await call(getOrganization, body, bearer(), true);
      expect(["2", undefined], body.toString("hex")).not.toContain(viaConnect.grpcStatus);
      if (viaConnect.grpcStatus !== "0") expect(viaConnect.detail?.hasRequestId, body.toString("hex")).toBe(true);
    }
  });
});
