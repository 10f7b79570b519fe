import http2 from "node:http2";
import { fromBinary } from "@bufbuild/protobuf";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorDetailSchema } from "../../src/gen/mandate/v1/errors_pb.js";
import { startService, VIA_CONNECT_NODE, type TestOrg, type TestService } from "../support/service.js";

/*
 * Issue 2's "done when": at least 1,000 malformed bodies and headers thrown at
 * every endpoint of the foundation, answered without a single 5xx, and every
 * refusal carrying a `detail` code and a request id. The same holds for the
 * Connect and gRPC protocols (an ErrorDetail on every error, never INTERNAL).
 */

let svc: TestService;
let org: TestOrg;
let revokedKey: string;
let readerKey: string;
let keyId: string;

beforeAll(async () => {
  svc = await startService();
  org = await svc.newOrg();
  const mk = async (name: string, permissions: string[]) =>
    (await svc.v1("POST", "/v1/organization/api-keys", { bearer: org.apiKey, body: { name, permissions } })).body as { key_id: string; api_key: string };
  const revoked = await mk("to-revoke", ["ORG_ADMIN"]);
  await svc.v1("POST", `/v1/organization/api-keys/${revoked.key_id}/revoke`, { bearer: org.apiKey });
  revokedKey = revoked.api_key;
  const reader = await mk("reader", ["DECISION_READ"]);
  readerKey = reader.api_key;
  keyId = (await mk("target", ["REVIEWER"])).key_id;
});
afterAll(() => svc?.close());

// --- arbitraries --------------------------------------------------------------

/** Header-safe text (what an HTTP client can put in a header value): printable ASCII and Latin-1. */
const headerText = (maxLength = 80) =>
  fc.string({
    unit: fc.oneof(fc.integer({ min: 0x20, max: 0x7e }), fc.integer({ min: 0xa0, max: 0xff })).map((c) => String.fromCharCode(c)),
    maxLength,
  });

/** The five routes of issue 2 (path variables filled by the body arbitrary's sibling). */
const route = fc.oneof(
  fc.constant({ method: "POST", path: "/v1/sandbox/organizations", fields: ["email"] }),
  fc.constant({ method: "POST", path: "/v1/organizations", fields: ["name"] }),
  fc.constant({ method: "GET", path: "/v1/organization", fields: [] }),
  fc.constant({ method: "POST", path: "/v1/organization/api-keys", fields: ["name", "permissions"] }),
  fc.constant({ method: "GET", path: "/v1/organization/api-keys", fields: [] }),
  fc
    .oneof(
      fc.constant("KEY_ID"),
      fc.string({ minLength: 1, maxLength: 40 }).map(encodeURIComponent),
      fc.constantFrom("%", "%ZZ", "%C0%AF", "..", "key_", "%00", "%E2%82"),
    )
    .map((id) => ({ method: "POST", path: `/v1/organization/api-keys/${id}/revoke`, fields: ["key_id"] })),
);

const permissionish = fc.oneof(
  fc.constantFrom("ORG_ADMIN", "REVIEWER", "PERMISSION_ORG_ADMIN", "org_admin", "", "ORG_ADMIN "),
  fc.jsonValue({ maxDepth: 1 }),
);

/** Values for a known field: plausible, wrong-typed, huge or odd. */
const fieldValue = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  fc.emailAddress(),
  fc.string({ unit: "binary", maxLength: 200 }),
  fc.array(permissionish, { maxLength: 12 }),
  fc.constantFrom("", " ", "\u0000", "a@b.co", "𝓪@𝓫.co", "x".repeat(5000), null, -0, 1e308, true),
  fc.integer({ min: 1_000, max: 200_000 }).map((n) => "é".repeat(n)),
);

/** A body as raw bytes: structured-but-wrong JSON, random JSON, broken JSON, non-UTF-8, huge. */
const body = (fields: readonly string[]): fc.Arbitrary<Buffer | undefined> =>
  fc.oneof(
    { weight: 5, arbitrary: fc.dictionary(fc.constantFrom(...fields, "extra", "Email", "api_key", "__proto__", "constructor"), fieldValue, { maxKeys: 4 }).map((o) => Buffer.from(JSON.stringify(o))) },
    { weight: 3, arbitrary: fc.json({ maxDepth: 4 }).map((s) => Buffer.from(s)) },
    { weight: 2, arbitrary: fc.json({ maxDepth: 3 }).chain((s) => fc.nat({ max: Math.max(0, s.length - 1) }).map((n) => Buffer.from(s.slice(0, n)))) },
    { weight: 2, arbitrary: fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b)) },
    { weight: 1, arbitrary: fc.constantFrom(Buffer.from([0x7b, 0x22, 0x65, 0x22, 0x3a, 0x22, 0xc3, 0x28, 0x22, 0x7d]), Buffer.from([0xef, 0xbb, 0xbf, 0x7b, 0x7d]), Buffer.from("{}".repeat(10)), Buffer.from("[]")) },
    { weight: 1, arbitrary: fc.constant(undefined) },
    // Rarely, bodies around and over the size limit (2 MiB).
    { weight: 1, arbitrary: fc.constantFrom(1 << 20, (2 << 20) + 1, 3 << 20).map((n) => Buffer.from(`{"email":"${"a".repeat(n)}@x.co"}`)) },
  );

type Creds = () => Record<string, string>;
/** Credentials: none, valid, revoked, under-privileged, malformed, operator with odd org ids. */
const credentials: fc.Arbitrary<Creds> = fc.oneof(
  fc.constant(() => ({})),
  fc.constant(() => ({ authorization: `Bearer ${org.apiKey}` })),
  fc.constant(() => ({ authorization: `Bearer ${revokedKey}` })),
  fc.constant(() => ({ authorization: `Bearer ${readerKey}` })),
  headerText().map((v) => () => ({ authorization: v })),
  headerText().map((v) => () => ({ authorization: `Bearer ${v}` })),
  headerText(20).map((v) => () => ({ authorization: `Bearer ${org.apiKey}${v}` })),
  fc.constantFrom("Bearer", "Bearer ", "bearer\t", "Basic dXNlcjpwYXNz", "Bearer a b").map((v) => () => ({ authorization: v })),
  headerText().map((v) => () => ({ "x-service-operator-key": svc.operatorKey!, "x-service-organization-id": v })),
  fc.constant(() => ({ "x-service-operator-key": svc.operatorKey!, "x-service-organization-id": org.organizationId })),
  headerText().map((v) => () => ({ "x-service-operator-key": v, "x-service-organization-id": org.organizationId })),
  fc.constant(() => ({ "x-service-operator-key": svc.operatorKey!, authorization: `Bearer ${readerKey}` })),
  headerText().map((v) => () => ({ "x-service-key-id": v, "x-service-signature": v })),
);

const contentType = fc.option(
  fc.oneof(
    fc.constantFrom("application/json", "application/json; charset=utf-8", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/proto", "application/grpc", "application/connect+json", "application/json; charset=latin1"),
    headerText(40),
  ),
  { nil: undefined },
);

const extraHeaders = fc.dictionary(
  fc.constantFrom("x-request-id", "accept", "accept-encoding", "content-encoding", "connect-protocol-version", "x-service-timestamp", "te"),
  headerText(60),
  { maxKeys: 3 },
);

const query = fc.option(fc.dictionary(fc.string({ minLength: 1, maxLength: 12 }), fc.string({ maxLength: 20 }), { maxKeys: 3 }), { nil: undefined });

// --- the properties -----------------------------------------------------------

/**
 * One fixed seed, so every run sends the same requests and the "reaches the interesting
 * outcomes" checks cannot come and go with the draw; FUZZ_SEED=<n> explores another run.
 */
const SEED = Number(process.env.FUZZ_SEED ?? 20_261_126);

/** Problems with one /v1 answer: a 5xx, or a refusal without detail/message/request_id. */
function v1Problems(status: number, body: unknown): string[] {
  if (status >= 500) return [`status ${status}`];
  if (status >= 200 && status < 300) return typeof body === "object" && body !== null ? [] : ["2xx without a JSON object"];
  const b = body as Record<string, unknown> | undefined;
  const problems: string[] = [];
  if (typeof b?.detail !== "string" || !/^[a-z_]+$/.test(b.detail)) problems.push("no detail code");
  if (typeof b?.message !== "string") problems.push("no message");
  if (typeof b?.request_id !== "string" || b.request_id === "") problems.push("no request_id");
  if (status === 422 && !Array.isArray(b?.errors)) problems.push("422 without errors[]");
  return problems;
}

describe("malformed /v1 requests", () => {
  it("never produce a 5xx, and every refusal carries detail and request_id (1,200 runs)", async () => {
    const statuses = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(
        route.chain((r) => fc.tuple(fc.constant(r), body(r.fields), credentials, contentType, extraHeaders, query)),
        async ([r, payload, creds, ct, extra, q]) => {
          const headers: Record<string, string> = { ...extra, ...creds() };
          if (ct !== undefined) headers["content-type"] = ct;
          const path = r.path.replace("KEY_ID", keyId) + (q ? `?${new URLSearchParams(q)}` : "");
          const res = await svc.v1(r.method, path, { headers, body: payload === undefined ? undefined : new Uint8Array(payload) });
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
          const problems = v1Problems(res.status, res.body);
          if (problems.length) throw new Error(`${r.method} ${path} → ${res.status} ${JSON.stringify(res.body)?.slice(0, 300)}: ${problems.join(", ")}`);
        },
      ),
      { numRuns: 1200, seed: SEED, verbose: 1 },
    );
    // The generators must actually reach the interesting outcomes, not just 401s.
    for (const s of [200, 401, 403, 404, 422]) expect(statuses.get(s) ?? 0, `answers with status ${s}: ${JSON.stringify([...statuses])}`).toBeGreaterThan(0);
  });
});

/** The gRPC-level RPCs of issue 2. */
const RPCS = [
  "mandate.v1.SandboxService/CreateSandboxOrganization",
  "mandate.v1.OrganizationService/CreateOrganization",
  "mandate.v1.OrganizationService/GetOrganization",
  "mandate.v1.OrganizationService/CreateApiKey",
  "mandate.v1.OrganizationService/ListApiKeys",
  "mandate.v1.OrganizationService/RevokeApiKey",
];

/** gRPC and gRPC-Web bodies: a well-framed message of random bytes, or broken framing altogether. */
const frames = fc.oneof(
  fc.uint8Array({ maxLength: 200 }).map((b) => {
    const prefix = Buffer.alloc(5);
    prefix.writeUInt32BE(b.length, 1);
    return Buffer.concat([prefix, b]);
  }),
  fc.uint8Array({ maxLength: 60 }).map((b) => Buffer.from(b)),
);

describe("malformed Connect and gRPC requests", () => {
  it("over the Connect protocol never answer 5xx, and every error carries a mandate.v1.ErrorDetail (300 runs)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...RPCS),
        fc.oneof(
          fc.tuple(fc.constant("application/json"), body(["email", "name", "permissions", "key_id"])),
          fc.tuple(fc.constant("application/proto"), fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b))),
        ),
        credentials,
        async (rpc, [ct, payload], creds) => {
          const res = await svc.v1("POST", `/${rpc}`, { headers: { ...creds(), "content-type": ct, "connect-protocol-version": "1" }, body: payload ?? "" });
          if (res.status >= 500) throw new Error(`${rpc} → ${res.status} ${JSON.stringify(res.body)}`);
          if (res.status === 200) return;
          const details = (res.body as { details?: { type: string; value: string }[] })?.details ?? [];
          const detail = details.find((d) => d.type === "mandate.v1.ErrorDetail");
          if (!detail) throw new Error(`${rpc} (${ct}) → ${res.status} ${JSON.stringify(res.body)}: no mandate.v1.ErrorDetail`);
          const decoded = fromBinary(ErrorDetailSchema, Buffer.from(detail.value, "base64"));
          if (!decoded.detail || !decoded.requestId) throw new Error(`${rpc} → ErrorDetail without detail or request id`);
        },
      ),
      { numRuns: 300, seed: SEED },
    );
  });

  it("over gRPC-Web never answer INTERNAL or UNKNOWN, and every error's trailer frame carries grpc-status-details-bin (300 runs)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...RPCS),
        frames,
        credentials,
        async (rpc, frame, creds) => {
          const res = await fetch(`${svc.baseUrl}/${rpc}`, { method: "POST", headers: { ...creds(), "content-type": "application/grpc-web+proto", "x-grpc-web": "1" }, body: frame });
          const bytes = Buffer.from(await res.arrayBuffer());
          let trailer = "";
          for (let at = 0; at + 5 <= bytes.length; at += 5 + bytes.readUInt32BE(at + 1)) {
            if (bytes[at]! & 0x80) trailer = bytes.subarray(at + 5, at + 5 + bytes.readUInt32BE(at + 1)).toString("latin1");
          }
          const grpcStatus = /grpc-status:\s*(\d+)/i.exec(trailer)?.[1] ?? res.headers.get("grpc-status") ?? undefined;
          if (res.status >= 500 || grpcStatus === "13" || grpcStatus === "2" || grpcStatus === undefined) {
            throw new Error(`${rpc} → HTTP ${res.status}, grpc-status ${grpcStatus}`);
          }
          const details = /grpc-status-details-bin:/i.test(trailer) || res.headers.has("grpc-status-details-bin");
          if (grpcStatus !== "0" && !details) throw new Error(`${rpc} → grpc-status ${grpcStatus} without grpc-status-details-bin`);
        },
      ),
      { numRuns: 300, seed: SEED },
    );
  });

  it("over gRPC never answer INTERNAL or UNKNOWN, and every error carries grpc-status-details-bin (300 runs)", async () => {
    const session = http2.connect(svc.baseUrl);
    try {
      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom(...RPCS),
          frames,
          credentials,
          // Announcing gzip sends the call to connect-node; otherwise the service's unary fast path takes it.
          fc.boolean(),
          async (rpc, frame, creds, viaConnect) => {
            const { status, grpcStatus, details } = await new Promise<{ status: number; grpcStatus: string | undefined; details: string | undefined }>((resolve, reject) => {
              const req = session.request({ ":method": "POST", ":path": `/${rpc}`, "content-type": "application/grpc", te: "trailers", ...(viaConnect && VIA_CONNECT_NODE), ...creds() });
              let status = 0;
              let headerStatus: string | undefined;
              let headerDetails: string | undefined;
              req.on("response", (h) => {
                status = Number(h[":status"]);
                headerStatus = h["grpc-status"] as string | undefined;
                headerDetails = h["grpc-status-details-bin"] as string | undefined;
              });
              let trailers: http2.IncomingHttpHeaders = {};
              req.on("trailers", (t) => (trailers = t));
              req.on("data", () => undefined);
              req.on("end", () =>
                resolve({
                  status,
                  grpcStatus: (trailers["grpc-status"] as string | undefined) ?? headerStatus,
                  details: (trailers["grpc-status-details-bin"] as string | undefined) ?? headerDetails,
                }),
              );
              req.on("error", reject);
              req.setTimeout(20_000, () => req.close());
              req.end(frame);
            });
            if (status >= 500 || grpcStatus === "13" || grpcStatus === "2" || grpcStatus === undefined) {
              throw new Error(`${rpc} → HTTP ${status}, grpc-status ${grpcStatus}`);
            }
            if (grpcStatus !== "0" && !details) throw new Error(`${rpc} → grpc-status ${grpcStatus} without grpc-status-details-bin`);
          },
        ),
        { numRuns: 300, seed: SEED },
      );
    } finally {
      session.close();
    }
  });
});
