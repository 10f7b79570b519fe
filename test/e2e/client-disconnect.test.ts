import http2 from "node:http2";
import net from "node:net";
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startService, VIA_CONNECT_NODE, type TestService } from "../support/service.js";
import { deferred, waitFor } from "../support/wait.js";

/*
 * A client that disconnects in the middle of its request body is not a server error
 * (docs/architecture.md, Error model): the request is logged at info with the outcome
 * `client_closed`, nothing about it is logged as an error or a warning, and /metrics counts it
 * under `detail="client_closed"`, never as a 5xx. Each case disconnects on one path: /v1, the
 * Connect and gRPC-Web protocols (HTTP/1.1, connect-node), and gRPC over HTTP/2 on the unary
 * fast path and through connect-node, by cancelling the stream or dropping the connection.
 */

const INFO = 30;
const WARN = 40;

describe("a client that disconnects mid-body", () => {
  const logs: Record<string, unknown>[] = [];
  let svc: TestService;

  beforeAll(async () => {
    svc = await startService({}, { logs });
  });
  afterAll(() => svc?.close());

  /**
   * An HTTP/1.1 request that announces `length` bytes of body, sends a few once the server has
   * taken the request in (it answered 100 Continue), and then drops the connection.
   */
  async function h1Disconnect(path: string, contentType: string, requestId: string): Promise<void> {
    const socket = net.connect(svc.port, "127.0.0.1");
    await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
    const continued = deferred();
    socket.on("data", (chunk: Buffer) => {
      if (chunk.toString("latin1").startsWith("HTTP/1.1 100")) continued.resolve();
    });
    socket.write(
      `POST ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: ${contentType}\r\ncontent-length: 1000\r\nx-request-id: ${requestId}\r\nexpect: 100-continue\r\n\r\n`,
    );
    await continued.promise;
    await new Promise<void>((resolve, reject) => socket.write("{\"intent\":", (err) => (err ? reject(err) : resolve())));
    socket.destroy();
  }

  /**
   * A gRPC request over HTTP/2, written as raw frames so that the disconnect is exactly what a
   * gRPC client sends when it gives up mid-body: HEADERS, part of the body in a DATA frame without
   * END_STREAM, then RST_STREAM(CANCEL) (`cancel`), or the connection closed (`drop`). A PING
   * between them, answered once the server has processed every frame before it, makes sure the
   * request and its partial body have reached the service first.
   */
  async function h2Disconnect(headers: Record<string, string>, requestId: string, how: "cancel" | "drop"): Promise<void> {
    const frame = (type: number, flags: number, stream: number, payload: Buffer) => {
      const head = Buffer.alloc(9);
      head.writeUIntBE(payload.length, 0, 3);
      head[3] = type;
      head[4] = flags;
      head.writeUInt32BE(stream, 5);
      return Buffer.concat([head, payload]);
    };
    // Literal header fields without indexing, new name (RFC 7541, 6.2.2), no Huffman coding; every length is under 127.
    const block = Buffer.concat(
      Object.entries({ ":method": "POST", ":scheme": "http", ":authority": `127.0.0.1:${svc.port}`, ":path": "/mandate.v1.IntentService/SubmitIntent", "content-type": "application/grpc", te: "trailers", "x-request-id": requestId, ...headers }).map(
        ([name, value]) => Buffer.concat([Buffer.from([0, name.length]), Buffer.from(name), Buffer.from([value.length]), Buffer.from(value)]),
      ),
    );
    const socket = net.connect(svc.port, "127.0.0.1");
    socket.on("error", () => undefined);
    await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
    const pinged = deferred();
    let pending = Buffer.alloc(0);
    socket.on("data", (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 9 && pending.length >= 9 + pending.readUIntBE(0, 3)) {
        if (pending[3] === 6 && (pending[4]! & 1) === 1) pinged.resolve();
        pending = pending.subarray(9 + pending.readUIntBE(0, 3));
      }
    });
    socket.write(
      Buffer.concat([
        Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
        frame(4, 0, 0, Buffer.alloc(0)), // SETTINGS
        frame(1, 4, 1, block), // HEADERS, END_HEADERS
        frame(0, 0, 1, Buffer.from([0, 0, 0, 0, 100, 10, 1, 120])), // DATA: a gRPC frame announcing 100 bytes, and 3 of them
        frame(6, 0, 0, Buffer.alloc(8)), // PING
      ]),
    );
    await pinged.promise;
    if (how === "cancel") {
      const cancel = Buffer.alloc(4);
      cancel.writeUInt32BE(http2.constants.NGHTTP2_CANCEL);
      await new Promise<void>((resolve, reject) => socket.write(frame(3, 0, 1, cancel), (err) => (err ? reject(err) : resolve()))); // RST_STREAM
      socket.end();
    } else {
      socket.destroy();
    }
  }

  /** Waits for the request's log line; returns it and every line logged at warn or above meanwhile. */
  async function outcome(requestId: string, from: number): Promise<{ line: Record<string, unknown>; loud: Record<string, unknown>[] }> {
    const line = await waitFor(`the log line of request ${requestId}`, () => logs.find((l) => l.request_id === requestId && l.msg === "request"), { timeoutMs: 10_000 });
    return { line, loud: logs.slice(from).filter((l) => (l.level as number) >= WARN) };
  }

  const cases: { name: string; protocol: string; disconnect: (id: string) => Promise<void> }[] = [
    { name: "/v1 (HTTP/1.1)", protocol: "v1", disconnect: (id) => h1Disconnect("/v1/intents", "application/json", id) },
    { name: "Connect (HTTP/1.1)", protocol: "connect", disconnect: (id) => h1Disconnect("/mandate.v1.IntentService/SubmitIntent", "application/json", id) },
    { name: "gRPC-Web (HTTP/1.1)", protocol: "grpc-web", disconnect: (id) => h1Disconnect("/mandate.v1.IntentService/SubmitIntent", "application/grpc-web+proto", id) },
    { name: "gRPC fast path, stream cancelled", protocol: "grpc", disconnect: (id) => h2Disconnect({}, id, "cancel") },
    { name: "gRPC fast path, connection dropped", protocol: "grpc", disconnect: (id) => h2Disconnect({}, id, "drop") },
    { name: "gRPC through connect-node, stream cancelled", protocol: "grpc", disconnect: (id) => h2Disconnect(VIA_CONNECT_NODE, id, "cancel") },
    { name: "gRPC through connect-node, connection dropped", protocol: "grpc", disconnect: (id) => h2Disconnect(VIA_CONNECT_NODE, id, "drop") },
  ];

  for (const c of cases) {
    it(`${c.name}: logged at info as client_closed, nothing logged as an error`, async () => {
      const id = `disconnect-${randomUUID()}`;
      const from = logs.length;
      await c.disconnect(id);
      const { line, loud } = await outcome(id, from);
      expect(line, JSON.stringify(line)).toMatchObject({ level: INFO, protocol: c.protocol, rpc: "IntentService.SubmitIntent", detail: "client_closed" });
      expect(loud).toEqual([]);
    });
  }

  it("/metrics counts them as client_closed per protocol, and no 5xx", async () => {
    const metrics = (await svc.v1("GET", "/metrics")).body as string;
    const submits = metrics.split("\n").filter((l) => l.startsWith("mandate_requests_total{") && l.includes('rpc="IntentService.SubmitIntent"'));
    for (const protocol of ["v1", "connect", "grpc-web", "grpc"]) {
      expect(submits.some((l) => l.includes(`protocol="${protocol}"`) && l.includes('detail="client_closed"')), `${protocol}:\n${submits.join("\n")}`).toBe(true);
    }
    expect(submits.filter((l) => /detail="(5\d\d|internal|unavailable)"/.test(l))).toEqual([]);
  });
});
