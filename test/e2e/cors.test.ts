import http from "node:http";
import type { AddressInfo } from "node:net";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "../../console/tests/browser.js";
import { parseCorsOrigins } from "../../src/transport/cors.js";
import { startService, uniqueEmail, type TestService } from "../support/service.js";

/*
 * Issue 23, CORS: MANDATE_CORS_ORIGINS lets browser scripts on the listed origins call /v1,
 * Connect and gRPC-Web; preflights are answered 204 with the methods and headers the API reads;
 * any other origin gets no CORS header. Checked over real HTTP, then from real pages in
 * Chromium on other origins.
 */

/** A page server on its own port: its origin is not the API's. Serves one empty page. */
async function pageServer(): Promise<{ origin: string; close(): Promise<void> }> {
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end("<!doctype html><title>elsewhere</title><p>another origin</p>");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { origin: `http://127.0.0.1:${port}`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

let svc: TestService;
let closedSvc: TestService;
let allowedPage: Awaited<ReturnType<typeof pageServer>>;
let otherPage: Awaited<ReturnType<typeof pageServer>>;
let browser: Browser;
const OTHER_ALLOWED = "https://app.example.com";

beforeAll(async () => {
  [allowedPage, otherPage, browser] = await Promise.all([pageServer(), pageServer(), launchChromium()]);
  [svc, closedSvc] = await Promise.all([
    // The API listens on localhost, the pages on 127.0.0.1: different origins whatever the ports.
    startService({ MANDATE_CORS_ORIGINS: `${OTHER_ALLOWED}, ${allowedPage.origin}` }),
    startService({ MANDATE_CORS_ORIGINS: undefined }),
  ]);
});
afterAll(async () => {
  await browser?.close();
  await Promise.all([svc?.close(), closedSvc?.close(), allowedPage?.close(), otherPage?.close()]);
});

async function preflight(base: string, path: string, origin: string, method: string, headers: string): Promise<Response> {
  return fetch(`${base}${path}`, {
    method: "OPTIONS",
    headers: { origin, "access-control-request-method": method, "access-control-request-headers": headers },
  });
}

function listed(value: string | null): string[] {
  return (value ?? "").split(",").map((s) => s.trim().toLowerCase()).filter(Boolean);
}

function corsHeaders(res: Response): string[] {
  return [...res.headers.keys()].filter((k) => k.startsWith("access-control-"));
}

describe("preflights over HTTP", () => {
  it("/v1: a signed Intent's headers and a bearer key's, for every verb /v1 routes", async () => {
    const asked = "content-type, x-service-key-id, x-service-signature, x-service-timestamp, authorization, x-service-operator-key, x-service-organization-id, x-request-id, last-event-id";
    for (const [path, method] of [["/v1/intents", "POST"], ["/v1/agents/agt_1", "PATCH"], ["/v1/decisions", "GET"]] as const) {
      const res = await preflight(svc.baseUrl, path, OTHER_ALLOWED, method, asked);
      expect(res.status, path).toBe(204);
      expect(res.headers.get("access-control-allow-origin")).toBe(OTHER_ALLOWED);
      expect(listed(res.headers.get("access-control-allow-methods"))).toEqual(expect.arrayContaining(["get", "post", "patch", "put", "delete"]));
      expect(listed(res.headers.get("access-control-allow-headers"))).toEqual(expect.arrayContaining(listed(asked)));
      expect(res.headers.get("access-control-max-age")).toBe("7200");
      expect(res.headers.get("vary")).toMatch(/origin/i);
      expect(res.headers.has("access-control-allow-credentials")).toBe(false);
    }
  });

  it("Connect and gRPC-Web: their protocol headers", async () => {
    const connect = await preflight(svc.baseUrl, "/mandate.v1.SandboxService/CreateSandboxOrganization", OTHER_ALLOWED, "POST", "content-type, connect-protocol-version, connect-timeout-ms, authorization");
    expect(connect.status).toBe(204);
    expect(listed(connect.headers.get("access-control-allow-headers"))).toEqual(expect.arrayContaining(["content-type", "connect-protocol-version", "connect-timeout-ms", "authorization"]));
    const grpcWeb = await preflight(svc.baseUrl, "/mandate.v1.IntentService/SubmitIntent", OTHER_ALLOWED, "POST", "content-type, x-grpc-web, x-user-agent, grpc-timeout, x-service-key-id, x-service-signature");
    expect(grpcWeb.status).toBe(204);
    expect(grpcWeb.headers.get("access-control-allow-origin")).toBe(OTHER_ALLOWED);
    expect(listed(grpcWeb.headers.get("access-control-allow-headers"))).toEqual(
      expect.arrayContaining(["content-type", "x-grpc-web", "x-user-agent", "grpc-timeout", "x-service-key-id", "x-service-signature"]),
    );
  });

  it("answers an allowed origin's requests with the origin and the headers a script may read", async () => {
    const res = await fetch(`${svc.baseUrl}/v1/agents/agt_missing`, { headers: { origin: OTHER_ALLOWED } });
    expect(res.status).toBe(401);
    expect(res.headers.get("access-control-allow-origin")).toBe(OTHER_ALLOWED);
    expect(listed(res.headers.get("access-control-expose-headers"))).toEqual(
      expect.arrayContaining(["retry-after", "grpc-status", "grpc-message", "grpc-status-details-bin", "x-request-id"]),
    );
  });

  it("gives an origin not on the list, and every origin when none is configured, no CORS header", async () => {
    for (const [base, origin] of [[svc.baseUrl, "https://evil.example.com"], [svc.baseUrl, `${OTHER_ALLOWED}:444`], [closedSvc.baseUrl, OTHER_ALLOWED]] as const) {
      const pre = await preflight(base, "/v1/intents", origin, "POST", "content-type, x-service-key-id");
      expect(pre.status).toBe(204);
      expect(corsHeaders(pre), `${base} ${origin}`).toEqual([]);
      const res = await fetch(`${base}/v1/agents/agt_missing`, { headers: { origin } });
      expect(res.status).toBe(401);
      expect(corsHeaders(res)).toEqual([]);
    }
  });

  it("still refuses a bare OPTIONS (not a preflight) as a method /v1 does not route", async () => {
    const res = await fetch(`${svc.baseUrl}/v1/intents`, { method: "OPTIONS", headers: { origin: OTHER_ALLOWED } });
    expect(res.status).toBe(405);
    expect(res.headers.get("access-control-allow-origin")).toBe(OTHER_ALLOWED);
  });
});

describe("MANDATE_CORS_ORIGINS", () => {
  it("takes origins and *, and refuses what no browser sends as an origin", () => {
    expect(parseCorsOrigins(undefined)).toEqual([]);
    expect(parseCorsOrigins(" https://a.example , http://127.0.0.1:5173,")).toEqual(["https://a.example", "http://127.0.0.1:5173"]);
    expect(parseCorsOrigins("*")).toEqual(["*"]);
    for (const bad of ["https://a.example/", "https://a.example/app", "a.example", "ftp://a.example"]) {
      expect(() => parseCorsOrigins(bad), bad).toThrow(/MANDATE_CORS_ORIGINS/);
    }
  });
});

describe("from a page on another origin, in Chromium", () => {
  /** Runs the sandbox sign-up over /v1, then reads the organization over /v1 and Connect with the key. */
  async function crossOriginFlow(pageOrigin: string): Promise<unknown> {
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      await page.goto(pageOrigin);
      const api = svc.baseUrl.replace("127.0.0.1", "localhost");
      return await page.evaluate(
        async ({ api, email }) => {
          try {
            const sandbox = await fetch(`${api}/v1/sandbox/organizations`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ email }) });
            const created = (await sandbox.json()) as { api_key: string; organization_id: string };
            const v1 = await fetch(`${api}/v1/organization`, { headers: { authorization: `Bearer ${created.api_key}` } });
            const connect = await fetch(`${api}/mandate.v1.OrganizationService/GetOrganization`, {
              method: "POST",
              headers: { "content-type": "application/json", "connect-protocol-version": "1", authorization: `Bearer ${created.api_key}` },
              body: "{}",
            });
            const refused = await fetch(`${api}/v1/agents/agt_missing`, { headers: { authorization: `Bearer ${created.api_key}` } });
            return {
              ok: true,
              sandbox: sandbox.status,
              organization: sandbox.status === 200 ? ((await v1.json()) as { organization_id: string }).organization_id === created.organization_id : false,
              v1: v1.status,
              connect: connect.status,
              connectOrganization: ((await connect.json()) as { organizationId?: string }).organizationId === created.organization_id,
              refused: refused.status,
              requestId: refused.headers.get("x-request-id") !== null,
            };
          } catch (err) {
            return { ok: false, error: String(err) };
          }
        },
        { api, email: uniqueEmail("cors") },
      );
    } finally {
      await context.close();
    }
  }

  it("an allowed origin signs up, reads over /v1 and Connect with its key, and reads an error's headers", async () => {
    expect(await crossOriginFlow(allowedPage.origin)).toEqual({ ok: true, sandbox: 200, organization: true, v1: 200, connect: 200, connectOrganization: true, refused: 404, requestId: true });
  });

  it("an allowed origin calls gRPC-Web and reads its status from the trailer frame", async () => {
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      await page.goto(allowedPage.origin);
      const api = svc.baseUrl.replace("127.0.0.1", "localhost");
      const result = await page.evaluate(
        async ({ api, email }) => {
          // One gRPC-Web frame of CreateSandboxOrganizationRequest {email = 1}, written by hand.
          const call = async (address: string) => {
            const text = new TextEncoder().encode(address);
            const message = new Uint8Array([0x0a, text.length, ...text]);
            const frame = new Uint8Array([0, 0, 0, 0, message.length, ...message]);
            const res = await fetch(`${api}/mandate.v1.SandboxService/CreateSandboxOrganization`, {
              method: "POST",
              headers: { "content-type": "application/grpc-web+proto", "x-grpc-web": "1", "x-user-agent": "cors-test" },
              body: frame,
            });
            const body = new Uint8Array(await res.arrayBuffer());
            // The trailer frame (flag 0x80) carries grpc-status as text.
            const trailer = new TextDecoder().decode(body).match(/grpc-status:\s*(\d+)/i)?.[1] ?? null;
            return { http: res.status, header: res.headers.get("grpc-status"), message: res.headers.get("grpc-message") !== null, trailer };
          };
          return { ok: await call(email), refused: await call("not an email") };
        },
        { api, email: uniqueEmail("cors-grpc-web") },
      );
      // Both statuses travel in the trailer frame (INVALID_ARGUMENT = 3 for the refusal), which the page can read.
      expect(result).toEqual({
        ok: { http: 200, header: null, message: false, trailer: "0" },
        refused: { http: 200, header: null, message: false, trailer: "3" },
      });
    } finally {
      await context.close();
    }
  });

  it("another origin's script is stopped by the browser", async () => {
    expect(await crossOriginFlow(otherPage.origin)).toEqual({ ok: false, error: expect.stringMatching(/Failed to fetch/) });
  });
});
