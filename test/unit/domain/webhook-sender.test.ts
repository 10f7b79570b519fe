import http from "node:http";
import type { AddressInfo } from "node:net";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HttpWebhookSender } from "../../../src/domain/webhook-sender.js";

/*
 * The webhook sender against a real local HTTP server: Standard Webhooks headers that the
 * `standardwebhooks` package verifies, what counts as acknowledged, no redirects, a bounded read
 * of the answer, and internal targets refused on the addresses actually connected to.
 */

const SECRET = `whsec_${Buffer.alloc(32, 9).toString("base64")}`;
let server: http.Server;
let port: number;
const seen: { headers: http.IncomingHttpHeaders; body: string }[] = [];

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      seen.push({ headers: req.headers, body: Buffer.concat(chunks).toString("utf8") });
      if (req.url === "/redirect") return res.writeHead(307, { location: "/ok" }).end();
      if (req.url === "/big") {
        res.writeHead(200);
        // Far more than the sender reads: it stops early and still takes the status.
        const chunk = Buffer.alloc(64 * 1024, 120);
        let sent = 0;
        const pump = () => {
          while (sent < 64 && res.write(chunk)) sent++;
          if (sent < 64) res.once("drain", pump);
          else res.end();
        };
        res.on("error", () => undefined);
        return pump();
      }
      res.writeHead(req.url === "/fail" ? 500 : 200).end("ok");
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});

const delivery = (path: string, host = "127.0.0.1") => ({ url: `http://${host}:${port}${path}`, secret: SECRET, deliveryId: "msg_test", body: JSON.stringify({ event: "X", event_id: "evt_1", occurred_at: "2026-01-01T00:00:00.000Z", data: {} }) });

describe("HttpWebhookSender", () => {
  const open = new HttpWebhookSender({ timeoutMs: 5_000, refuseInternal: false, maxSockets: 2 });
  const guarded = new HttpWebhookSender({ timeoutMs: 5_000, refuseInternal: true, maxSockets: 2 });
  afterAll(() => {
    open.close();
    guarded.close();
  });

  it("signs as Standard Webhooks (verified by the standardwebhooks package) and takes a 2xx as acknowledged", async () => {
    const before = seen.length;
    const r = await open.send(delivery("/ok"));
    expect(r).toMatchObject({ acknowledged: true, status: 200, error: "" });
    const got = seen[before]!;
    expect(got.headers["webhook-id"]).toBe("msg_test");
    expect(() => new Webhook(SECRET).verify(got.body, got.headers as Record<string, string>)).not.toThrow();
  });

  it("takes a 5xx and a redirect (not followed) as failed attempts, with the status", async () => {
    expect(await open.send(delivery("/fail"))).toMatchObject({ acknowledged: false, status: 500, error: "HTTP 500" });
    const before = seen.length;
    expect(await open.send(delivery("/redirect"))).toMatchObject({ acknowledged: false, status: 307 });
    expect(seen.length).toBe(before + 1);
  });

  it("reads a large answer only up to its bound, keeping the status", async () => {
    expect(await open.send(delivery("/big"))).toMatchObject({ acknowledged: true, status: 200 });
  });

  it("refuses internal targets on the address connected to: a name resolving to loopback, and a literal", async () => {
    const before = seen.length;
    const byName = await guarded.send(delivery("/ok", "localhost"));
    expect(byName.acknowledged).toBe(false);
    expect(byName.status).toBe(0);
    expect(byName.error).toMatch(/^refused: localhost resolves to (127\.0\.0\.1|::1), an internal address$/);
    const literal = await guarded.send(delivery("/ok"));
    expect(literal).toMatchObject({ acknowledged: false, status: 0, error: "refused: 127.0.0.1 is an internal address" });
    expect(seen.length).toBe(before);
  });

  it("reports a refused connection as status 0 with its code", async () => {
    const closed = await new Promise<number>((resolve) => {
      const s = http.createServer();
      s.listen(0, "127.0.0.1", () => {
        const p = (s.address() as AddressInfo).port;
        s.close(() => resolve(p));
      });
    });
    const r = await open.send({ ...delivery("/ok"), url: `http://127.0.0.1:${closed}/x` });
    expect(r.acknowledged).toBe(false);
    expect(r.status).toBe(0);
    expect(r.error).toMatch(/^ECONNREFUSED/);
  });
});
