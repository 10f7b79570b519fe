import http from "node:http";
import http2 from "node:http2";
import { create, toBinary, ScalarType, type DescField, type DescMessage, type DescMethod } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bindingOf, loadAllMandateServices } from "../support/api.js";
import { newAgent, newOrgFixture, type OrgFixture, type TestAgent } from "../support/agents.js";
import { startService, type TestService } from "../support/service.js";
import { recordRow, scaled } from "./report.js";

/*
 * Hostile row 2, fuzzing. Random inputs to every public unary RPC (enumerated
 * from the descriptors): over /v1, random path variables, query strings and
 * bodies (JSON built from the input message's own field names with junk
 * values, broken JSON, random bytes, deep nesting, huge strings); over gRPC
 * (HTTP/2 frames: random bytes, or the input message encoded with random
 * field values) and over Connect (random JSON). Mostly with an all-permission
 * key, so that inputs get past authentication, sometimes with none or junk.
 * A failure: any 5xx, a gRPC/Connect `internal` or `unknown`, or no answer
 * within 10 s. Full scale: 10,000 /v1 and 5,000 gRPC/Connect inputs; short:
 * 600 and 400. HOSTILE_SEED replays a draw (the seed is printed).
 *
 * test/e2e/api-fuzz.test.ts is the structured fuzzer (fast-check, valid
 * fixtures, the error shape); this row is the volume.
 */

const SEED = Number(process.env.HOSTILE_SEED ?? 19_019);
const HTTP_INPUTS = scaled(600, 10_000);
const RPC_INPUTS = scaled(400, 5_000);
const CONCURRENCY = 8;
const TIMEOUT_MS = 10_000;

/** mulberry32: a small seeded PRNG, so a draw can be replayed. */
function prng(seed: number) {
  let s = seed >>> 0;
  const next = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)]!;
  return { next, int, pick };
}
type Rng = ReturnType<typeof prng>;

const ODD_STRINGS = ["", " ", "\u0000", "\ud800", "\uffff", "💥", "../../etc/passwd", "%00", "' OR 1=1 --", "<script>", "a".repeat(70_000), "__proto__", "constructor", "-1", "1e309", "null", "agt_", "ed25519:base64:AAAA", "2026-13-45T99:99:99Z"];
const ODD_NUMBERS = [0, -1, 1.5, 2 ** 31, -(2 ** 31) - 1, 2 ** 53 + 1, 1e308, -0, Number.MAX_SAFE_INTEGER];

function junk(r: Rng, depth = 0): unknown {
  switch (r.int(depth > 3 ? 4 : 7)) {
    case 0:
      return r.pick(ODD_STRINGS);
    case 1:
      return r.pick(ODD_NUMBERS);
    case 2:
      return r.pick([true, false, null]);
    case 3:
      return Array.from({ length: r.int(30) }, () => String.fromCharCode(r.int(0x10000))).join("");
    case 4:
      return Array.from({ length: r.int(4) }, () => junk(r, depth + 1));
    case 5:
      return Object.fromEntries(Array.from({ length: r.int(4) }, () => [r.pick(ODD_STRINGS.slice(0, 17)), junk(r, depth + 1)]));
    default:
      return `${r.pick(["agt_", "dec_", "cap_", "prn_", "int_", "key_", "org_"])}${r.int(1e9).toString(36)}`;
  }
}

/** A JSON object keyed by the message's own field names (snake_case or camelCase), with junk or plausible values. */
function fieldsOf(r: Rng, desc: DescMessage, camel: boolean, depth = 0): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of desc.fields) {
    if (r.next() < 0.4) continue;
    const key = camel ? f.jsonName : f.name;
    if (f.fieldKind === "message" && depth < 3 && r.next() < 0.6) out[key] = fieldsOf(r, f.message, camel, depth + 1);
    else if (f.fieldKind === "enum" && r.next() < 0.5) out[key] = r.pick(f.enum.values).name;
    else out[key] = junk(r);
  }
  if (r.next() < 0.2) out[r.pick(ODD_STRINGS.slice(0, 17))] = junk(r);
  return out;
}

/** Percent-encodes the UTF-8 bytes (lone surrogates become U+FFFD), sometimes leaving a broken escape. */
function pct(r: Rng, s: string): string {
  const out = [...Buffer.from(s, "utf8")].map((b) => (/[A-Za-z0-9_.~-]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).padStart(2, "0").toUpperCase()}`)).join("");
  return r.next() < 0.05 ? out + r.pick(["%", "%Z1", "%C3", "%FF%FE", "%00"]) : out;
}

function deep(n: number): string {
  return "[".repeat(n) + "]".repeat(n);
}

/** A /v1 body: mostly JSON from the field names, else broken JSON, deep nesting or random bytes. */
function httpBody(r: Rng, method: DescMethod): Buffer {
  switch (r.int(8)) {
    case 0:
      return Buffer.from(`{"${r.pick(method.input.fields)?.name ?? "x"}": ${r.pick(['"', "[", "{", "tru", "1e", "-", "\"\\u12", ""])}`);
    case 1:
      return Buffer.from(deep(r.pick([100, 1_000, 100_000])));
    case 2:
      return Buffer.from(Array.from({ length: r.int(200) }, () => r.int(256)));
    case 3:
      return Buffer.from(JSON.stringify(junk(r)));
    default:
      return Buffer.from(JSON.stringify(fieldsOf(r, method.input, false)));
  }
}

/** A random value for one field of a protobuf message (valid types, random contents). */
function protoValue(r: Rng, f: DescField, depth: number): unknown {
  const scalar = (s: ScalarType): unknown => {
    switch (s) {
      case ScalarType.STRING:
        return r.pick([r.pick(ODD_STRINGS), String(junk(r))]);
      case ScalarType.BYTES:
        return new Uint8Array(Array.from({ length: r.int(100) }, () => r.int(256)));
      case ScalarType.BOOL:
        return r.next() < 0.5;
      case ScalarType.INT64:
      case ScalarType.SINT64:
      case ScalarType.SFIXED64:
        return BigInt(r.pick(["0", "-1", "9223372036854775807", "-9223372036854775808", String(r.int(1e9))]));
      case ScalarType.UINT64:
      case ScalarType.FIXED64:
        return BigInt(r.pick(["0", "18446744073709551615", String(r.int(1e9))]));
      case ScalarType.DOUBLE:
      case ScalarType.FLOAT:
        return r.pick([0, -1, 1e308, Number.NaN, Infinity, 0.1]);
      case ScalarType.UINT32:
      case ScalarType.FIXED32:
        return r.pick([0, 4294967295, r.int(1e6)]);
      default:
        return r.pick([0, -1, 2147483647, -2147483648, r.int(1e6)]);
    }
  };
  const one = (kind: "scalar" | "enum" | "message"): unknown =>
    kind === "enum" ? r.pick([0, 1, 2, 99, -1]) : kind === "message" ? protoInit(r, f.message!, depth + 1) : scalar(f.scalar!);
  if (f.fieldKind === "list") return Array.from({ length: r.int(4) }, () => one(f.listKind));
  if (f.fieldKind === "map") return Object.fromEntries(Array.from({ length: r.int(3) }, () => [String(junk(r)), f.mapKind === "message" ? protoInit(r, f.message, depth + 1) : f.mapKind === "enum" ? 1 : scalar(f.scalar)]));
  return one(f.fieldKind);
}

function protoInit(r: Rng, desc: DescMessage, depth = 0): Record<string, unknown> {
  if (desc.typeName === "google.protobuf.Struct") return { a: junk(r) } as Record<string, unknown>;
  const init: Record<string, unknown> = {};
  if (depth > 3) return init;
  for (const f of desc.fields) if (r.next() < 0.6 && f.oneof === undefined) init[f.localName] = protoValue(r, f, depth);
  return init;
}

/** A gRPC message body: the input message encoded with random values, or random bytes. */
function grpcPayload(r: Rng, method: DescMethod): Uint8Array {
  if (r.next() < 0.3) return new Uint8Array(Array.from({ length: r.int(120) }, () => r.int(256)));
  try {
    return toBinary(method.input, create(method.input, protoInit(r, method.input) as never));
  } catch {
    return new Uint8Array([0x0a, 0x03, 0x61, 0x62, 0x63]);
  }
}

interface Answer {
  status: number;
  /** gRPC status or Connect error code, when there is one. */
  code?: string;
  text: string;
}

function sendHttp(agent: http.Agent, port: number, method: string, path: string, headers: Record<string, string>, body: Buffer | undefined): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, method, path, agent, headers: { ...headers, ...(body && { "content-length": String(body.length) }) }, timeout: TIMEOUT_MS }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("error", reject);
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        let code: string | undefined;
        try {
          code = (JSON.parse(text) as { code?: string }).code;
        } catch {
          // Not JSON.
        }
        resolve({ status: res.statusCode ?? 0, code, text: text.slice(0, 300) });
      });
    });
    req.on("timeout", () => req.destroy(new Error(`no answer within ${TIMEOUT_MS} ms`)));
    req.on("error", reject);
    req.end(body);
  });
}

function sendGrpc(session: http2.ClientHttp2Session, path: string, headers: Record<string, string>, frame: Buffer): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const stream = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers", ...headers });
    let status = 0;
    let code: string | undefined;
    const timer = setTimeout(() => {
      stream.close(http2.constants.NGHTTP2_CANCEL);
      reject(new Error(`no answer within ${TIMEOUT_MS} ms`));
    }, TIMEOUT_MS);
    stream.on("response", (h) => {
      status = Number(h[":status"]);
      if (h["grpc-status"] !== undefined) code = String(h["grpc-status"]);
    });
    stream.on("trailers", (t) => {
      if (t["grpc-status"] !== undefined) code = String(t["grpc-status"]);
    });
    stream.on("data", () => {});
    stream.on("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
    stream.on("close", () => {
      clearTimeout(timer);
      resolve({ status, code, text: "" });
    });
    stream.end(frame);
  });
}

/** Runs `n` tasks with at most CONCURRENCY in flight. */
async function pool(n: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < n) await task(next++);
    }),
  );
}

describe("hostile: fuzzing", () => {
  let svc: TestService;
  let org: OrgFixture;
  let agent: TestAgent;
  let methods: { id: string; path: string; method: DescMethod }[];

  beforeAll(async () => {
    svc = await startService();
    org = await newOrgFixture(svc);
    agent = await newAgent(svc, org);
    methods = (await loadAllMandateServices())
      .filter((s) => !s.internal)
      .flatMap(({ service }) => service.methods.filter((m) => m.methodKind === "unary").map((method) => ({ id: `${service.name}.${method.name}`, path: `/${service.typeName}/${method.name}`, method })));
    console.log(`[hostile] fuzz: HOSTILE_SEED=${SEED}`);
  });
  afterAll(async () => {
    await svc?.close();
  });

  const credentials = (r: Rng): Record<string, string> =>
    r.next() < 0.8
      ? { authorization: `Bearer ${org.apiKey}` }
      : r.pick<Record<string, string>>([{}, { authorization: r.pick(["Bearer ", "Basic x", `Bearer ${org.apiKey}x`, "Bearer \u00ff"]) }, { "x-service-key-id": agent.certificateId, "x-service-signature": "AAAA", "x-service-timestamp": "x" }, { "x-service-operator-key": "op_x", "x-service-organization-id": "org_x" }]);

  it(`random inputs: ${HTTP_INPUTS} over /v1, ${RPC_INPUTS} over gRPC and Connect; never a 5xx, internal or unknown`, async () => {
    const failures: string[] = [];
    const outcomes: Record<string, number> = {};
    const bound = methods.filter((m) => bindingOf(m.method));
    const agentHttp = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });

    await pool(HTTP_INPUTS, async (i) => {
      const r = prng(SEED * 1_000_003 + i);
      const { id, method } = bound[i % bound.length]!;
      const binding = bindingOf(method)!;
      const path = binding.template.replace(/\{[a-z_]+(?:=\*)?\}/g, () => pct(r, String(r.next() < 0.5 ? junk(r) : r.pick([agent.agentId, org.principalId, "1", "0", "-1", "%", ".."]))));
      const query = r.next() < 0.3 ? `?${r.pick(["page_size", "page_token", "after_seq", "agent_id", "outcome", "x"])}=${pct(r, String(junk(r)))}` : "";
      const verb = r.next() < 0.9 ? binding.verb : r.pick(["GET", "POST", "PUT", "DELETE", "PATCH"]);
      const body = verb === "GET" && r.next() < 0.8 ? undefined : httpBody(r, method);
      const headers = { ...credentials(r), ...(body && { "content-type": r.next() < 0.9 ? "application/json" : r.pick(["text/plain", "application/json; charset=latin1", "multipart/form-data"]) }) };
      try {
        const res = await sendHttp(agentHttp, svc.port, verb, path + query, headers, body);
        outcomes[`/v1 ${res.status}`] = (outcomes[`/v1 ${res.status}`] ?? 0) + 1;
        if (res.status >= 500) failures.push(`${id} /v1 #${i}: ${res.status} ${res.text}`);
      } catch (err) {
        failures.push(`${id} /v1 #${i}: ${(err as Error).message}`);
      }
    });
    agentHttp.destroy();

    const session = http2.connect(svc.baseUrl);
    session.on("error", () => {});
    const agentConnect = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
    await pool(RPC_INPUTS, async (i) => {
      const r = prng(SEED * 7_000_003 + i);
      const { id, path, method } = methods[i % methods.length]!;
      try {
        if (i % 2 === 0) {
          const payload = grpcPayload(r, method);
          const frame = Buffer.alloc(5 + payload.length);
          frame.writeUInt32BE(payload.length, 1);
          Buffer.from(payload).copy(frame, 5);
          if (r.next() < 0.05) frame.writeUInt32BE(payload.length + r.int(1000) + 1, 1);
          const res = await sendGrpc(session, path, credentials(r), frame);
          outcomes[`gRPC ${res.code}`] = (outcomes[`gRPC ${res.code}`] ?? 0) + 1;
          if (res.status >= 500 || res.code === "13" || res.code === "2" || res.code === undefined) failures.push(`${id} gRPC #${i}: HTTP ${res.status} grpc-status ${res.code}`);
        } else {
          const body = r.next() < 0.8 ? Buffer.from(JSON.stringify(fieldsOf(r, method.input, true))) : httpBody(r, method);
          const res = await sendHttp(agentConnect, svc.port, "POST", path, { ...credentials(r), "content-type": "application/json", "connect-protocol-version": "1" }, body);
          outcomes[`Connect ${res.code ?? res.status}`] = (outcomes[`Connect ${res.code ?? res.status}`] ?? 0) + 1;
          if (res.status >= 500 || res.code === "internal" || res.code === "unknown") failures.push(`${id} Connect #${i}: ${res.status} ${res.text}`);
        }
      } catch (err) {
        failures.push(`${id} ${i % 2 ? "Connect" : "gRPC"} #${i}: ${(err as Error).message}`);
      }
    });
    agentConnect.destroy();
    session.close();

    const top = Object.entries(outcomes).sort((x, y) => y[1] - x[1]).slice(0, 5).map(([k, n]) => `${n}× ${k}`).join(", ");
    recordRow({ order: 2, attack: `fuzzing: ${HTTP_INPUTS} /v1 + ${RPC_INPUTS} gRPC/Connect random inputs (seed ${SEED})`, probes: HTTP_INPUTS + RPC_INPUTS, failures: failures.length, note: top });
    expect(failures.slice(0, 20)).toEqual([]);
  }, 600_000);
});
