import http2 from "node:http2";
import net from "node:net";
import { ConnectError, type Client } from "@connectrpc/connect";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorDetailSchema } from "../../src/gen/mandate/v1/errors_pb.js";
import { CreateSandboxOrganizationResponseSchema, OrganizationService, SandboxService } from "../../src/gen/mandate/v1/organizations_pb.js";
import { messageToWireJson } from "../support/api.js";
import { createTestDatabase, startService, uniqueEmail, type TestService } from "../support/service.js";
import { waitFor } from "../support/wait.js";

/*
 * Issue 2's operational contract on the one port: connections stay usable
 * after a refused request, health/readiness/metrics endpoints, request ids in
 * log lines, and a shutdown that drains in-flight requests.
 */

/** A raw HTTP/1.1 connection, to see exactly what a client on one keep-alive connection sees. */
class RawConnection {
  private readonly socket: net.Socket;
  private buffer = Buffer.alloc(0);
  private closed = false;
  private waiters: (() => void)[] = [];

  private constructor(socket: net.Socket) {
    this.socket = socket;
    socket.on("data", (d: Buffer) => {
      this.buffer = Buffer.concat([this.buffer, d]);
      this.wake();
    });
    socket.on("close", () => {
      this.closed = true;
      this.wake();
    });
    socket.on("error", () => undefined);
  }

  static open(port: number): Promise<RawConnection> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(port, "127.0.0.1", () => resolve(new RawConnection(socket)));
      socket.once("error", reject);
    });
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  write(data: string | Buffer): Promise<void> {
    return new Promise((resolve) => {
      if (this.closed || this.socket.destroyed) return resolve();
      this.socket.write(data, () => resolve());
    });
  }

  /**
   * The next complete response (status and JSON body), "closed" when the server
   * closed the connection first, or "timeout".
   */
  async response(timeoutMs: number): Promise<{ status: number; body: unknown } | "closed" | "timeout"> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const end = this.buffer.indexOf("\r\n\r\n");
      if (end >= 0) {
        const head = this.buffer.subarray(0, end).toString("latin1");
        const length = Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? 0);
        if (this.buffer.length >= end + 4 + length) {
          const body = this.buffer.subarray(end + 4, end + 4 + length).toString("utf8");
          this.buffer = this.buffer.subarray(end + 4 + length);
          return { status: Number(head.split(" ")[1]), body: body ? JSON.parse(body) : undefined };
        }
      }
      if (this.closed) return "closed";
      const left = deadline - Date.now();
      if (left <= 0) return "timeout";
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  close(): void {
    this.socket.destroy();
  }
}

function request(method: string, path: string, body?: string, headers: Record<string, string> = {}): string {
  const lines = [`${method} ${path} HTTP/1.1`, "Host: localhost", "Connection: keep-alive", ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)];
  if (body !== undefined) lines.push("Content-Type: application/json", `Content-Length: ${Buffer.byteLength(body)}`);
  return `${lines.join("\r\n")}\r\n\r\n${body ?? ""}`;
}

let svc: TestService;
const logs: Record<string, unknown>[] = [];
beforeAll(async () => {
  svc = await startService({}, { logs });
});
afterAll(() => svc?.close());

describe("one port, every protocol", () => {
  it("answers CreateSandboxOrganization identically over /v1, gRPC, gRPC-Web and Connect", async () => {
    const v1 = await svc.v1("POST", "/v1/sandbox/organizations", { body: { email: uniqueEmail("proto") } });
    expect(v1.status).toBe(200);
    const clients: [string, Client<typeof SandboxService>][] = [
      ["grpc", svc.grpc(SandboxService)],
      ["grpc-web", svc.grpcWeb(SandboxService)],
      ["connect", svc.connect(SandboxService)],
    ];
    const shapes = { v1: Object.keys(v1.body).sort() } as Record<string, string[]>;
    for (const [name, client] of clients) {
      const res = await client.createSandboxOrganization({ email: uniqueEmail(name) });
      const wire = messageToWireJson(CreateSandboxOrganizationResponseSchema, res) as Record<string, string>;
      shapes[name] = Object.keys(wire).sort();
      expect(wire.starter_policy_key).toBe(v1.body.starter_policy_key);
      // Each protocol's organization is a real one, reachable over /v1 with its key.
      const org = await svc.v1("GET", "/v1/organization", { bearer: res.apiKey });
      expect(org.body).toMatchObject({ organization_id: res.organizationId, sandbox: true });
    }
    expect(shapes).toEqual({ v1: shapes.v1, grpc: shapes.v1, "grpc-web": shapes.v1, connect: shapes.v1 });
  });

  it("refuses identically over /v1, gRPC, gRPC-Web and Connect, echoing the client's request id", async () => {
    const v1 = await svc.v1("GET", "/v1/organization", { headers: { authorization: "Bearer mk_nope", "x-request-id": "same-1" } });
    expect(v1).toMatchObject({ status: 401, body: { detail: "unknown_key", request_id: "same-1" } });
    for (const client of [svc.grpc(OrganizationService), svc.grpcWeb(OrganizationService), svc.connect(OrganizationService)]) {
      const err = await client.getOrganization({}, { headers: { authorization: "Bearer mk_nope", "x-request-id": "same-1" } }).then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
      const [detail] = err!.findDetails(ErrorDetailSchema);
      expect({ code: err!.code, detail: detail?.detail, requestId: detail?.requestId, message: detail?.message }).toEqual({
        code: 16,
        detail: "unknown_key",
        requestId: "same-1",
        message: v1.body.message,
      });
    }
  });

  it("gives gRPC-Web an ErrorDetail and INVALID_ARGUMENT for a message connect itself cannot decode", async () => {
    // A frame claiming 5 bytes of protobuf that are not a valid message: refused before any interceptor runs.
    const body = Buffer.from([0, 0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 0xff]);
    const res = await fetch(`${svc.baseUrl}/mandate.v1.SandboxService/CreateSandboxOrganization`, {
      method: "POST",
      headers: { "content-type": "application/grpc-web+proto", "x-grpc-web": "1", "x-request-id": "gw-1" },
      body,
    });
    const bytes = Buffer.from(await res.arrayBuffer());
    expect(bytes[0]).toBe(0x80); // the trailer frame
    const trailer = new Map(
      bytes
        .subarray(5, 5 + bytes.readUInt32BE(1))
        .toString("latin1")
        .split("\r\n")
        .filter(Boolean)
        .map((line) => [line.slice(0, line.indexOf(":")).toLowerCase(), line.slice(line.indexOf(":") + 1).trim()] as [string, string]),
    );
    expect(trailer.get("grpc-status")).toBe("3");
    const status = Buffer.from(trailer.get("grpc-status-details-bin") ?? "", "base64");
    expect(status.length).toBeGreaterThan(0);
    // google.rpc.Status: field 3 holds Any{type_url, value}; the ErrorDetail is the Any's value.
    const text = status.toString("latin1");
    expect(text).toContain("type.googleapis.com/mandate.v1.ErrorDetail");
    expect(text).toContain("validation_failed");
    expect(text).toContain("gw-1");
  });

  it("serves /v1 JSON over h2c (HTTP/2 prior knowledge) as well as HTTP/1.1", async () => {
    const session = http2.connect(svc.baseUrl);
    try {
      const { status, body } = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = session.request({ ":method": "POST", ":path": "/v1/sandbox/organizations", "content-type": "application/json" });
        let status = 0;
        let body = "";
        req.on("response", (h) => (status = Number(h[":status"])));
        req.setEncoding("utf8");
        req.on("data", (d: string) => (body += d));
        req.on("end", () => resolve({ status, body }));
        req.on("error", reject);
        req.end(JSON.stringify({ email: uniqueEmail("h2c") }));
      });
      expect(status, body).toBe(200);
      expect(JSON.parse(body)).toMatchObject({ organization_id: expect.stringMatching(/^org_/), starter_policy_key: "starter" });
    } finally {
      session.close();
    }
  });
});

describe("one keep-alive connection", () => {
  it("serves several requests in a row", async () => {
    const conn = await RawConnection.open(svc.port);
    try {
      await conn.write(request("POST", "/v1/sandbox/organizations", JSON.stringify({ email: uniqueEmail("ka") })));
      const first = await conn.response(10_000);
      expect(first).toMatchObject({ status: 200 });
      await conn.write(request("GET", "/v1/organization"));
      expect(await conn.response(10_000)).toMatchObject({ status: 401, body: { detail: "missing_credentials" } });
    } finally {
      conn.close();
    }
  });

  it("is answered or closed after a refused oversized body, never left hanging", async () => {
    const conn = await RawConnection.open(svc.port);
    try {
      await conn.write(request("POST", "/v1/sandbox/organizations", JSON.stringify({ email: `${"a".repeat(3 << 20)}@example.com` })));
      expect(await conn.response(10_000)).toMatchObject({ status: 413, body: { detail: "payload_too_large" } });
      await conn.write(request("GET", "/v1/organization"));
      // Either the connection still works, or the server closed it (Connection: close); a silent hang is the bug.
      const next = await conn.response(5_000);
      expect(next, "the next request on the same connection got no answer").not.toBe("timeout");
      if (next !== "closed") expect(next).toMatchObject({ status: 401 });
    } finally {
      conn.close();
    }
  });

  it("answers what the HTTP parser refuses with the usual error body, then closes", async () => {
    const cases: [string, number, string][] = [
      [request("GET", `/v1/decisions?agent_id=${"x".repeat(70_000)}`), 431, "payload_too_large"],
      ["GARBAGE\r\n\r\n", 400, "validation_failed"],
      [`POST /v1/principals HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n`, 400, "validation_failed"],
    ];
    for (const [raw, status, detail] of cases) {
      const conn = await RawConnection.open(svc.port);
      try {
        await conn.write(raw);
        const res = await conn.response(10_000);
        expect(res, raw.slice(0, 60)).toMatchObject({ status, body: { detail, request_id: expect.any(String), message: expect.any(String) } });
        expect(await conn.response(5_000)).toBe("closed");
      } finally {
        conn.close();
      }
    }
  });
});

describe("operations endpoints", () => {
  it("GET /healthz answers 200 while the process is up", async () => {
    const res = await svc.v1("GET", "/healthz");
    expect(res.status).toBe(200);
  });

  it("GET /readyz answers 200 when the database is reachable and migrated, 503 when it is gone", async () => {
    expect((await svc.v1("GET", "/readyz")).status).toBe(200);

    // A service of its own on a database of its own, which we then drop from under it.
    const url = await createTestDatabase("readyz");
    const own = await startService({ DATABASE_URL: url });
    try {
      expect((await own.v1("GET", "/readyz")).status).toBe(200);
      // The same server (its socket folder travels in the query string), the run's own database.
      const adminUrl = new URL(url);
      adminUrl.pathname = "/mandate";
      const admin = new pg.Client({ connectionString: adminUrl.toString() });
      await admin.connect();
      try {
        await admin.query(`DROP DATABASE ${new URL(url).pathname.slice(1)} WITH (FORCE)`);
      } finally {
        await admin.end();
      }
      const gone = await own.v1("GET", "/readyz");
      expect(gone.status).toBe(503);
      expect(gone.body).toMatchObject({ detail: "unavailable", request_id: expect.any(String) });
      // Liveness is not readiness: the process itself is fine.
      expect((await own.v1("GET", "/healthz")).status).toBe(200);
    } finally {
      await own.close();
    }
  });

  it("GET /metrics exposes request counts and latency per RPC and status in the Prometheus text format", async () => {
    await svc.v1("POST", "/v1/sandbox/organizations", { body: { email: uniqueEmail("metrics") } });
    await svc.v1("GET", "/v1/organization");
    const res = await svc.v1("GET", "/metrics");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/plain/);
    const text = String(res.body);
    const samples = text.split("\n").filter((l) => l && !l.startsWith("#"));
    for (const line of samples) expect(line).toMatch(/^[a-zA-Z_:][a-zA-Z0-9_:]*(\{.*\})? (-?[0-9.]+(e[+-]?\d+)?|NaN|[+-]Inf)( \d+)?$/);
    const counter = samples.filter((l) => l.includes("CreateSandboxOrganization") && !/_bucket\{|_sum\{|_count\{/.test(l));
    expect(counter.length, "a request counter for CreateSandboxOrganization").toBeGreaterThan(0);
    expect(samples.some((l) => /_bucket\{/.test(l) && l.includes("CreateSandboxOrganization") && /le="/.test(l)), "a latency histogram per RPC").toBe(true);
    expect(samples.some((l) => l.includes("GetOrganization") && /(401|unauthenticated|missing_credentials)/.test(l)), "counts per status").toBe(true);
  });
});

describe("logs", () => {
  it("carry the request id of every request, the same id the error body names", async () => {
    const res = await svc.v1("GET", "/v1/organization", { headers: { authorization: "Bearer nope" } });
    expect(res.status).toBe(401);
    const id = res.body.request_id as string;
    const lines = logs.filter((l) => l.request_id === id);
    expect(lines.length, `no log line with request_id ${id}`).toBeGreaterThan(0);
    for (const l of logs.filter((l) => l.msg === "request")) expect(typeof l.request_id).toBe("string");
  });

  it("carry the request id of gRPC calls too", async () => {
    const before = logs.length;
    const res = await svc.v1("POST", "/mandate.v1.OrganizationService/GetOrganization", {
      headers: { "content-type": "application/json", "x-request-id": "grpc-log-check-1" },
      body: {},
    });
    expect(res.status).toBe(401);
    expect(logs.slice(before).some((l) => l.request_id === "grpc-log-check-1")).toBe(true);
  });
});

describe("graceful shutdown", () => {
  it("drains a request in flight before closing, and refuses new connections", async () => {
    const own = await startService();
    const conn = await RawConnection.open(own.port);
    const body = JSON.stringify({ email: uniqueEmail("drain") });
    const half = Math.floor(body.length / 2);
    // The headers ask for 100 Continue: once it arrives the server has taken the request in
    // (it answers Continue as it dispatches the request), so the request is in flight, no sleep needed.
    await conn.write(request("POST", "/v1/sandbox/organizations", body, { Expect: "100-continue" }).slice(0, -body.length));
    expect(await conn.response(10_000), "the server did not take the request in").toMatchObject({ status: 100 });
    await conn.write(body.slice(0, half));
    const closing = own.close();
    // Shutdown stops listening: wait until a new connection is refused (observed, not slept).
    await waitFor("the port to refuse new connections", () => RawConnection.open(own.port).then((c) => (c.close(), false), () => true), { intervalMs: 10 });
    await conn.write(body.slice(half));
    const answer = await conn.response(10_000);
    conn.close();
    await closing;
    expect(answer, "the in-flight request was cut off by shutdown").toMatchObject({ status: 200, body: { organization_id: expect.any(String) } });
  });
});
