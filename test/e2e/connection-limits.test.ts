import http2 from "node:http2";
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OrganizationService } from "../../src/gen/mandate/v1/organizations_pb.js";
import { recordRow, scaled } from "../hostile/report.js";
import { startService, type TestService } from "../support/service.js";

/*
 * Slowloris (issue 19 item 6): every connection that does not get on with its request is closed
 * by the server, whatever it stopped at (an HTTP/2 stream is reset, its session kept), and one
 * address, unless it is a trusted proxy, cannot hold more than its share of connections. The service runs with small deadlines; each case waits for the server to close
 * the socket, with a generous watchdog (the exact timing is not asserted: the machine is shared).
 */

const HEADERS_MS = 300;
const REQUEST_MS = 2000;
const IDLE_MS = 400;
/** Far past every deadline above (plus Node's own checking interval and keep-alive slack). */
const WATCHDOG_MS = 8000;

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
/** An empty SETTINGS frame: what a client sends right after the preface. */
const SETTINGS = Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]);

/**
 * The hostile suite's row (test/hostile/report.ts; only written under `npm run test:hostile`):
 * every connection a case expects the server to close, and those it left open; the per-address
 * cap's connections, and those it did not apply to. Counted before the assertions.
 */
const tally = { probes: 0, failures: 0 };
afterAll(() => {
  recordRow({ order: 8, attack: "slowloris: stalled and trickling connections, one address over its cap", ...tally, note: "connections closed by the server; the cap applied" });
});

/** Counts one connection expected closed (a failure when it was left open), and passes the result on. */
async function counted(result: Promise<"closed" | "open">): Promise<"closed" | "open"> {
  const r = await result;
  tally.probes++;
  if (r !== "closed") tally.failures++;
  return r;
}

/** Resolves "closed" once `socket` is closed, or "open" after `ms`. */
function closedWithin(socket: net.Socket, ms = WATCHDOG_MS): Promise<"closed" | "open"> {
  return new Promise((resolve) => {
    if (socket.closed) return resolve("closed");
    const watchdog = setTimeout(() => resolve("open"), ms);
    socket.once("close", () => {
      clearTimeout(watchdog);
      resolve("closed");
    });
  });
}

/**
 * A raw TCP connection to `port` that has sent `first` (nothing when undefined), from `localAddress`
 * (another loopback address stands for another client); what it receives is read and dropped.
 */
async function open(port: number, first?: Buffer | string, localAddress?: string): Promise<net.Socket> {
  const socket = net.connect({ port, host: "127.0.0.1", localAddress });
  socket.on("error", () => {});
  socket.resume();
  await new Promise<void>((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("error", reject);
  });
  if (first !== undefined) socket.write(first);
  return socket;
}

/** What a raw connection receives until it closes, after sending `request`. */
function exchange(socket: net.Socket, request: string): Promise<string> {
  return new Promise((resolve) => {
    let text = "";
    socket.on("data", (d: Buffer) => (text += d.toString("latin1")));
    if (socket.closed) return resolve(text);
    socket.once("close", () => resolve(text));
    socket.write(request);
  });
}

/** Resolves the RST_STREAM code an HTTP/2 stream closed with, or "open" when it is still open after `ms`. */
function resetWithin(stream: http2.ClientHttp2Stream, ms = WATCHDOG_MS): Promise<number | "open"> {
  return new Promise((resolve) => {
    if (stream.closed) return resolve(stream.rstCode ?? 0);
    const watchdog = setTimeout(() => resolve("open"), ms);
    stream.once("close", () => {
      clearTimeout(watchdog);
      resolve(stream.rstCode ?? 0);
    });
  });
}

/** A stream window smaller than any answer: the service cannot finish answering until the client reads. */
const HELD_WINDOW = 16;

/**
 * A whole /v1 request (401: no operator key) on a session opened with HELD_WINDOW, whose answer the
 * service cannot finish until `answer()` reads it: a stream that stays open, its request received.
 */
function heldRequest(session: http2.ClientHttp2Session) {
  const stream = session.request({ ":method": "POST", ":path": "/v1/organizations", "content-type": "application/json" });
  stream.on("error", () => {});
  const status = new Promise<unknown>((resolve) => stream.once("response", (h) => resolve(h[":status"])));
  stream.end(JSON.stringify({ name: "Held" }));
  return {
    stream,
    async answer(): Promise<{ status: unknown; body: string }> {
      let body = "";
      stream.setEncoding("utf8");
      stream.on("data", (d: string) => (body += d));
      await new Promise((resolve) => stream.once("end", resolve));
      return { status: await status, body };
    },
  };
}

describe("connection deadlines", () => {
  let svc: TestService;
  const leftOpen: net.Socket[] = [];

  beforeAll(async () => {
    svc = await startService({
      MANDATE_HEADERS_TIMEOUT_MS: String(HEADERS_MS),
      MANDATE_REQUEST_TIMEOUT_MS: String(REQUEST_MS),
      MANDATE_IDLE_TIMEOUT_MS: String(IDLE_MS),
    });
  });
  afterAll(async () => {
    for (const s of leftOpen) s.destroy();
    await svc?.close();
  });

  const track = (s: net.Socket) => (leftOpen.push(s), s);

  it("closes a connection that sends nothing", async () => {
    const s = track(await open(svc.port));
    expect(await counted(closedWithin(s))).toBe("closed");
  });

  it("closes a connection whose HTTP/1.1 headers never complete", async () => {
    const s = track(await open(svc.port, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "));
    // A byte now and then: activity alone does not extend the header deadline.
    const drip = setInterval(() => s.writable && s.write("a"), 100);
    try {
      expect(await counted(closedWithin(s))).toBe("closed");
    } finally {
      clearInterval(drip);
    }
  });

  it("closes a connection whose HTTP/1.1 headers complete only after the deadline, on a kept-alive connection too", async () => {
    // First request complete and answered, then the next one's headers trickle.
    const s = track(await open(svc.port, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
    await new Promise((resolve) => s.once("data", resolve));
    s.write("GET /healthz HTTP/1.1\r\n");
    const drip = setInterval(() => s.writable && s.write("X-Slow: a\r\n"), 50);
    try {
      expect(await counted(closedWithin(s))).toBe("closed");
    } finally {
      clearInterval(drip);
    }
  });

  it("closes a connection whose request body trickles past the request deadline", async () => {
    const s = track(
      await open(svc.port, "POST /v1/organizations HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n{"),
    );
    const drip = setInterval(() => s.writable && s.write(" "), 100);
    try {
      expect(await counted(closedWithin(s))).toBe("closed");
    } finally {
      clearInterval(drip);
    }
  });

  it("closes connections that sent only part of the HTTP/2 preface", async () => {
    const peeked = track(await open(svc.port, PREFACE.subarray(0, 8)));
    const past = track(await open(svc.port, PREFACE.subarray(0, 20)));
    expect(await Promise.all([counted(closedWithin(peeked)), counted(closedWithin(past))])).toEqual(["closed", "closed"]);
  });

  it("closes an HTTP/2 connection that opens no stream", async () => {
    const s = track(await open(svc.port, Buffer.concat([PREFACE, SETTINGS])));
    expect(await counted(closedWithin(s))).toBe("closed");
  });

  it("closes an idle HTTP/1.1 keep-alive connection after a complete request", async () => {
    const s = track(await open(svc.port, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
    const answer = await new Promise<string>((resolve) => s.once("data", (d: Buffer) => resolve(d.toString("latin1"))));
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(await counted(closedWithin(s))).toBe("closed");
  });

  it("keeps a request that keeps sending open past the header deadline, up to the request deadline", async () => {
    const body = JSON.stringify({ name: "Slow but steady" });
    const s = track(
      await open(svc.port, `POST /v1/organizations HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n`),
    );
    let answer = "";
    s.on("data", (d: Buffer) => (answer += d.toString("latin1")));
    // The body a character at a time over about 2.5 header deadlines, well within the request
    // deadline: once they have passed, the rest goes at once, so a loaded machine stretching the
    // pauses cannot carry the trickle past the request deadline.
    const started = Date.now();
    let sent = 0;
    while (sent < body.length - 1 && Date.now() - started < HEADERS_MS * 2.5) {
      s.write(body[sent++]!);
      await new Promise((r) => setTimeout(r, (HEADERS_MS * 2.5) / body.length));
    }
    s.end(body.slice(sent));
    await closedWithin(s);
    // Answered (401: no operator key), not cut off.
    expect(answer).toMatch(/^HTTP\/1\.1 401 /);
  });

  it("keeps an HTTP/2 connection with an open stream past the idle deadline", async () => {
    // The open stream's request is whole (its answer waits on the window), so the request deadline
    // does not apply to it either.
    const session = http2.connect(svc.baseUrl, { settings: { initialWindowSize: HELD_WINDOW } });
    session.on("error", () => {});
    try {
      const held = heldRequest(session);
      await new Promise((r) => setTimeout(r, IDLE_MS * 3));
      expect(session.closed || session.destroyed).toBe(false);
      expect((await held.answer()).status).toBe(401);
      // Once no stream is open, the session goes after the idle deadline.
      const closed = await new Promise<boolean>((resolve) => {
        const watchdog = setTimeout(() => resolve(false), WATCHDOG_MS);
        session.once("close", () => {
          clearTimeout(watchdog);
          resolve(true);
        });
      });
      tally.probes++;
      if (!closed) tally.failures++;
      expect(closed).toBe(true);
    } finally {
      session.destroy();
    }
  });

  it("resets an HTTP/2 stream whose request is not received whole within the request deadline, and only that stream", async () => {
    const session = http2.connect(svc.baseUrl, { settings: { initialWindowSize: HELD_WINDOW } });
    session.on("error", () => {});
    try {
      const held = heldRequest(session);
      // Stalled, one per way in: a /v1 body begun and never ended, gRPC headers alone (the unary
      // fast path), a Connect body begun.
      const post = (path: string, contentType: string) => session.request({ ":method": "POST", ":path": path, "content-type": contentType, te: "trailers" }, { endStream: false });
      const stalled = [
        post("/v1/organizations", "application/json"),
        post("/mandate.v1.OrganizationService/GetOrganization", "application/grpc"),
        post("/mandate.v1.OrganizationService/GetOrganization", "application/json"),
      ];
      stalled[0]!.write("{");
      stalled[2]!.write("{");
      const codes = await Promise.all(
        stalled.map(async (stream) => {
          stream.on("error", () => {});
          stream.resume();
          const code = await resetWithin(stream);
          tally.probes++;
          if (code === "open") tally.failures++;
          return code;
        }),
      );
      expect(codes).toEqual(Array(stalled.length).fill(http2.constants.NGHTTP2_CANCEL));
      // The session and the stream whose request was whole are untouched; its answer comes whole once read.
      expect(session.closed || session.destroyed).toBe(false);
      expect(held.stream.closed).toBe(false);
      const answer = await held.answer();
      expect(answer.status).toBe(401);
      expect(JSON.parse(answer.body)).toHaveProperty("detail");
    } finally {
      session.destroy();
    }
  });

  it("still answers a normal request and a gRPC call", async () => {
    expect((await svc.v1("GET", "/healthz")).status).toBe(200);
    const org = await svc.newOrg();
    const got = await svc.grpc(OrganizationService).getOrganization({}, { headers: { authorization: `Bearer ${org.apiKey}` } });
    expect(got.organizationId).toBe(org.organizationId);
  });
});

describe("connections per address", () => {
  /** Connections one address may hold: more held open, and one over, under `npm run test:hostile`. */
  const CAP = scaled(3, 64);
  let svc: TestService;
  const sockets: net.Socket[] = [];

  beforeAll(async () => {
    svc = await startService({ MANDATE_MAX_CONNECTIONS_PER_ADDRESS: String(CAP) });
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await svc?.close();
  });

  it("closes a connection over the cap at once and keeps the others", async () => {
    for (let i = 0; i < CAP; i++) sockets.push(await open(svc.port));
    const over = await open(svc.port);
    sockets.push(over);
    const overClosed = await counted(closedWithin(over, 3000));
    const kept = sockets.slice(0, CAP).map((s) => s.closed);
    tally.probes += CAP;
    tally.failures += kept.filter(Boolean).length;
    expect(overClosed).toBe("closed");
    expect(kept).toEqual(Array(CAP).fill(false));
    // One of those still serves a request.
    const first = sockets[0]!;
    first.write("GET /healthz HTTP/1.1\r\nHost: x\r\nconnection: close\r\n\r\n");
    const answer = await new Promise<string>((resolve) => first.once("data", (d: Buffer) => resolve(d.toString("latin1"))));
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    // A closed connection frees its place.
    await closedWithin(first);
    const next = await open(svc.port, "GET /healthz HTTP/1.1\r\nHost: x\r\nconnection: close\r\n\r\n");
    sockets.push(next);
    const again = await new Promise<string>((resolve) => next.once("data", (d: Buffer) => resolve(d.toString("latin1"))));
    expect(again).toMatch(/^HTTP\/1\.1 200 /);
  });
});

describe("connections per address behind a trusted proxy", () => {
  const CAP = 2;
  let svc: TestService;
  const sockets: net.Socket[] = [];

  beforeAll(async () => {
    // 127.0.0.1 is the proxy; 127.0.0.2 (loopback too) stands for a client reaching the service directly.
    svc = await startService({ MANDATE_MAX_CONNECTIONS_PER_ADDRESS: String(CAP), MANDATE_TRUSTED_PROXIES: "127.0.0.1" });
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await svc?.close();
  });

  it("does not cap a trusted proxy's connections", async () => {
    for (let i = 0; i < CAP + 2; i++) sockets.push(await open(svc.port));
    const answers = await Promise.all(sockets.map((s) => exchange(s, "GET /healthz HTTP/1.1\r\nHost: x\r\nconnection: close\r\n\r\n")));
    for (const answer of answers) expect(answer).toMatch(/^HTTP\/1\.1 200 /);
  });

  it("still caps any other address", async () => {
    const own: net.Socket[] = [];
    for (let i = 0; i < CAP; i++) own.push(await open(svc.port, undefined, "127.0.0.2"));
    const over = await open(svc.port, undefined, "127.0.0.2");
    sockets.push(...own, over);
    expect(await counted(closedWithin(over, 3000))).toBe("closed");
    expect(await exchange(own[0]!, "GET /healthz HTTP/1.1\r\nHost: x\r\nconnection: close\r\n\r\n")).toMatch(/^HTTP\/1\.1 200 /);
  });
});
