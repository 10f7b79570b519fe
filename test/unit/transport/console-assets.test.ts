import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { gunzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CONSOLE_CSP, createConsoleRoute } from "../../../src/transport/console-assets.js";

/*
 * The console's static files (src/transport/console-assets.ts) over a real HTTP server: content
 * types, cache headers, the CSP, console routes answered with index.html, 404 for unknown files,
 * no way out of the build folder, and what a missing build answers.
 */

let dir: string;
let base: string;
let server: http.Server;
let emptyBase: string;
let emptyServer: http.Server;

const INDEX = '<!doctype html><html><head><script type="module" src="/console/assets/index-abc123.js"></script></head><body></body></html>';
const SCRIPT = `console.log(${JSON.stringify("x".repeat(4000))});`;

function serve(route: ReturnType<typeof createConsoleRoute>): Promise<[http.Server, string]> {
  const s = http.createServer((req, res) => {
    if (!route(req, res)) {
      res.writeHead(418);
      res.end("not the console's");
    }
  });
  return new Promise((resolve) => s.listen(0, "127.0.0.1", () => resolve([s, `http://127.0.0.1:${(s.address() as net.AddressInfo).port}`])));
}

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), "console-dist-"));
  mkdirSync(path.join(dir, "assets"));
  writeFileSync(path.join(dir, "index.html"), INDEX);
  writeFileSync(path.join(dir, "assets", "index-abc123.js"), SCRIPT);
  writeFileSync(path.join(dir, "assets", "index-def456.css"), "body{margin:0}");
  // A file beside the build that no request may reach.
  writeFileSync(path.join(path.dirname(dir), "secret-beside-console.json"), "{}");
  [server, base] = await serve(createConsoleRoute(dir));
  [emptyServer, emptyBase] = await serve(createConsoleRoute(path.join(dir, "missing")));
});
afterAll(async () => {
  await new Promise((r) => server?.close(r));
  await new Promise((r) => emptyServer?.close(r));
  rmSync(dir, { recursive: true, force: true });
  rmSync(path.join(path.dirname(dir), "secret-beside-console.json"), { force: true });
});

/** A raw GET, so that paths reach the server exactly as written (fetch would normalise `..`). */
function rawGet(baseUrl: string, rawPath: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = http.request(baseUrl, { path: rawPath, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}

describe("the console's static files", () => {
  it("index.html: no-cache, HTML, the CSP; a console route answers it too", async () => {
    for (const p of ["/console/", "/console/reviews", "/console/reviews/dec_1"]) {
      const res = await rawGet(base, p);
      expect(res.status, p).toBe(200);
      expect(res.body.toString()).toBe(INDEX);
      expect(res.headers["content-type"]).toBe("text/html; charset=utf-8");
      expect(res.headers["cache-control"]).toBe("no-cache");
      expect(res.headers["content-security-policy"]).toBe(CONSOLE_CSP);
      expect(res.headers["x-content-type-options"]).toBe("nosniff");
    }
    expect(CONSOLE_CSP).toContain("script-src 'self'");
    expect(CONSOLE_CSP).not.toContain("unsafe-inline");
  });

  it("hashed assets: their type, immutable for a year, gzip when accepted", async () => {
    const js = await rawGet(base, "/console/assets/index-abc123.js");
    expect(js.headers["content-type"]).toBe("text/javascript; charset=utf-8");
    expect(js.headers["cache-control"]).toBe("public, max-age=31536000, immutable");
    expect(js.headers["content-encoding"]).toBeUndefined();
    expect(js.body.toString()).toBe(SCRIPT);
    const zipped = await rawGet(base, "/console/assets/index-abc123.js", { "accept-encoding": "gzip, br" });
    expect(zipped.headers["content-encoding"]).toBe("gzip");
    expect(zipped.headers.vary).toBe("accept-encoding");
    expect(gunzipSync(zipped.body).toString()).toBe(SCRIPT);
    const css = await rawGet(base, "/console/assets/index-def456.css");
    expect(css.headers["content-type"]).toBe("text/css; charset=utf-8");
  });

  it("unknown files are 404; nothing outside the build is reachable", async () => {
    for (const p of [
      "/console/assets/index-000000.js",
      "/console/missing.png",
      "/console/assets/nothing",
      "/console/../package.json",
      "/console/..%2fsecret-beside-console.json",
      "/console/assets/..%2f..%2fsecret-beside-console.json",
      "/console/%2e%2e/secret-beside-console.json",
      "/console/%E0%A4%A",
    ]) {
      const res = await rawGet(base, p);
      expect(res.status, p).toBe(404);
      expect(res.body.toString()).not.toContain("{}");
    }
  });

  it("GET / and /console redirect to /console/; other paths are not the console's; only GET and HEAD", async () => {
    for (const p of ["/", "/console"]) {
      const res = await rawGet(base, p);
      expect([res.status, res.headers.location]).toEqual([302, "/console/"]);
    }
    expect((await rawGet(base, "/v1/decisions")).status).toBe(418);
    expect((await rawGet(base, "/consoles")).status).toBe(418);
    const head = await new Promise<http.IncomingMessage>((resolve) => http.request(`${base}/console/`, { method: "HEAD", agent: false }, resolve).end());
    expect([head.statusCode, head.headers["content-type"]]).toEqual([200, "text/html; charset=utf-8"]);
    const post = await new Promise<http.IncomingMessage>((resolve) => http.request(`${base}/console/`, { method: "POST", agent: false }, resolve).end());
    expect([post.statusCode, post.headers.allow]).toEqual([405, "GET, HEAD"]);
  });

  it("without a build, /console says how to make one", async () => {
    const res = await rawGet(emptyBase, "/console/");
    expect(res.status).toBe(404);
    expect(res.body.toString()).toContain("npm run build:console");
  });
});
