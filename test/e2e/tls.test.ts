import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import http from "node:http";
import http2 from "node:http2";
import https from "node:https";
import { connect as tlsConnect, type ConnectionOptions } from "node:tls";
import { tmpdir } from "node:os";
import path from "node:path";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, expect, it } from "vitest";
import { SandboxService } from "../../src/gen/mandate/v1/organizations_pb.js";
import { spawnService, type ServiceProcess } from "../support/process.js";
import { createTestDatabase, uniqueEmail } from "../support/service.js";

/*
 * MANDATE_TLS_CERT / MANDATE_TLS_KEY (issue 23, Operations): the same routes over HTTPS, with
 * ALPN choosing h2 (gRPC included) or http/1.1 on the one port. The certificate is self-signed, made here with
 * openssl for 127.0.0.1, and the clients trust exactly it.
 */

let dir: string;
let ca: Buffer;
let svc: ServiceProcess;

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), "mandate-tls-"));
  execFileSync("openssl", [
    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
    "-keyout", path.join(dir, "key.pem"), "-out", path.join(dir, "cert.pem"),
  ], { stdio: "ignore" });
  ca = readFileSync(path.join(dir, "cert.pem"));
  svc = await spawnService({
    PORT: "0",
    DATABASE_URL: await createTestDatabase("tls"),
    MANDATE_TLS_CERT: path.join(dir, "cert.pem"),
    MANDATE_TLS_KEY: path.join(dir, "key.pem"),
    MANDATE_SANDBOX_PER_ADDRESS_PER_HOUR: "1000",
  });
}, 120_000);

afterAll(async () => {
  await svc?.stop();
  rmSync(dir, { recursive: true, force: true });
});

it("says https in its listening line", () => {
  const listening = svc.output.map((l) => { try { return JSON.parse(l) as Record<string, unknown>; } catch { return {}; } }).find((e) => e.msg === "listening")!;
  expect(listening).toMatchObject({ urls: [`https://127.0.0.1:${svc.port}`], tls: true });
});

it("serves /v1 over HTTPS with HTTP/1.1 (ALPN http/1.1)", async () => {
  const answer = await new Promise<{ status: number; alpn: string | false | null; body: string }>((resolve, reject) => {
    const body = JSON.stringify({ email: uniqueEmail("tls") });
    // https.request passes TLS options through to tls.connect (ALPNProtocols among them).
    const options: https.RequestOptions & ConnectionOptions = { method: "POST", ca, ALPNProtocols: ["http/1.1"], headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) } };
    const req = https.request(`https://127.0.0.1:${svc.port}/v1/sandbox/organizations`, options, (res) => {
      let text = "";
      res.on("data", (d: Buffer) => (text += d.toString()));
      // Read before the body ends: the socket goes back to the agent's pool (null) after.
      const alpn = (res.socket as import("node:tls").TLSSocket).alpnProtocol;
      res.on("end", () => resolve({ status: res.statusCode!, alpn, body: text }));
    });
    req.on("error", reject);
    req.end(body);
  });
  expect(answer.alpn).toBe("http/1.1");
  expect(answer.status).toBe(200);
  expect(JSON.parse(answer.body)).toMatchObject({ organization_id: expect.any(String), api_key: expect.any(String) });
});

it("serves /v1, Connect and gRPC over HTTPS with HTTP/2 (ALPN h2)", async () => {
  const session = http2.connect(`https://127.0.0.1:${svc.port}`, { ca });
  try {
    const post = (path: string, body: unknown) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const stream = session.request({ ":method": "POST", ":path": path, "content-type": "application/json" });
        let status = 0;
        let text = "";
        stream.on("response", (h) => (status = Number(h[":status"])));
        stream.on("data", (d: Buffer) => (text += d.toString()));
        stream.on("end", () => resolve({ status, body: text }));
        stream.on("error", reject);
        stream.end(JSON.stringify(body));
      });
    const v1 = await post("/v1/sandbox/organizations", { email: uniqueEmail("tls") });
    expect(session.alpnProtocol).toBe("h2");
    expect(v1.status).toBe(200);
    const connect = await post("/mandate.v1.SandboxService/CreateSandboxOrganization", { email: uniqueEmail("tls") });
    expect(connect.status).toBe(200);
    expect(JSON.parse(connect.body)).toMatchObject({ organizationId: expect.any(String), apiKey: expect.any(String) });
  } finally {
    session.close();
  }
  const grpc = createClient(SandboxService, createGrpcTransport({ baseUrl: `https://127.0.0.1:${svc.port}`, nodeOptions: { ca } }));
  const created = await grpc.createSandboxOrganization({ email: uniqueEmail("tls") });
  expect(created.organizationId).toMatch(/^org_/);
});

it("serves Connect over HTTPS/1.1 too", async () => {
  const res = await fetchOverTls("/mandate.v1.SandboxService/CreateSandboxOrganization", { email: uniqueEmail("tls") });
  expect(res.status).toBe(200);
  expect(JSON.parse(res.body)).toMatchObject({ organizationId: expect.any(String), apiKey: expect.any(String) });
  const alpn = await new Promise<string | false | null>((resolve, reject) => {
    const socket = tlsConnect({ host: "127.0.0.1", port: svc.port, ca, ALPNProtocols: ["h2", "http/1.1"] }, () => {
      resolve(socket.alpnProtocol);
      socket.end();
    });
    socket.on("error", reject);
  });
  expect(alpn).toBe("h2");
});

/** POSTs JSON over HTTPS/1.1, trusting the test's certificate. */
function fetchOverTls(path: string, body: unknown): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const text = JSON.stringify(body);
    const req = https.request(`https://127.0.0.1:${svc.port}${path}`, { method: "POST", ca, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(text) } }, (res) => {
      let out = "";
      res.on("data", (d: Buffer) => (out += d.toString()));
      res.on("end", () => resolve({ status: res.statusCode!, body: out }));
    });
    req.on("error", reject);
    req.end(text);
  });
}

it("refuses a certificate the client does not trust, and speaks no cleartext", async () => {
  const untrusted = await new Promise<string>((resolve) => {
    https.get(`https://127.0.0.1:${svc.port}/healthz`, (res) => resolve(`answered ${res.statusCode}`)).on("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
  expect(untrusted).toBe("DEPTH_ZERO_SELF_SIGNED_CERT");
  const cleartext = await new Promise<string>((resolve) => {
    http.get(`http://127.0.0.1:${svc.port}/healthz`, (res) => resolve(`answered ${res.statusCode}`)).on("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
  expect(cleartext).not.toMatch(/^answered/);
});
