import { EventEmitter } from "node:events";
import http from "node:http";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { createAsyncIterable, type UniversalHandler } from "@connectrpc/connect/protocol";
import { afterEach, describe, expect, it } from "vitest";
import { deferred, waitFor } from "../../support/wait.js";
import { checkCompatServer, checkHandedConnections, checkNodeInternals, checkNestedTooDeeplyText, checkStreamTables, isNestedTooDeeplyText, NodeInternalsError, renewStreamTables } from "../../../src/transport/node-internals.js";

const closers: (() => void)[] = [];
afterEach(() => closers.splice(0).forEach((close) => close()));

/** The internal stream Map of a session, as renewStreamTables finds it. */
function streamsOf(session: http2.Http2Session): unknown {
  const key = Object.getOwnPropertySymbols(session).find((s) => s.description === "state")!;
  return (session as unknown as Record<symbol, { streams: unknown }>)[key]!.streams;
}

/** A connect handler stand-in answering every request with `status` and `body`. */
function fakeHandler(status: number, body: string): UniversalHandler {
  const handler = async () => ({ status, header: new Headers({ "content-type": "application/json" }), body: createAsyncIterable([Buffer.from(body)]) });
  return Object.assign(handler, { requestPath: "/fake.Service/Method" }) as unknown as UniversalHandler;
}

/** Expects `run` to be refused with a NodeInternalsError naming this Node's version and `what`. */
async function expectRefused(run: () => unknown, what: RegExp): Promise<void> {
  const err = await (async () => run())().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(NodeInternalsError);
  const message = (err as Error).message;
  expect(message).toContain(`Node ${process.version}:`);
  expect(message).toContain("src/transport/node-internals.ts");
  expect(message).toMatch(what);
}

describe("checkNodeInternals (the start-up self-check)", () => {
  it("passes on this Node and connect", async () => {
    await expect(checkNodeInternals()).resolves.toBeUndefined();
  });

  it("refuses a session whose stream tables are not where it expects them", async () => {
    await expectRefused(() => checkNodeInternals({ session: {} }), /HTTP\/2 session does not keep its streams/);
    // The state object under the right symbol, but without the Map and the Set.
    await expectRefused(() => checkNodeInternals({ session: { [Symbol("state")]: { streams: {}, pendingStreams: [] } } }), /"state"/);
    await expectRefused(() => checkNodeInternals({ session: { [Symbol("state")]: { streams: new Map() } } }), /pendingStreams/);
    // Two symbols described "state": the guard does not guess which one holds the tables.
    const tables = { streams: new Map(), pendingStreams: new Set() };
    await expectRefused(() => checkNodeInternals({ session: { [Symbol("state")]: tables, [Symbol("state")]: tables } }), /2 found/);
  });

  it("refuses a request-handler server without Node's own stream listener", async () => {
    await expectRefused(() => checkNodeInternals({ compatServer: new EventEmitter() }), /0 "stream" listener\(s\) \(none\)/);
    await expectRefused(() => checkCompatServer(http2.createServer({})), /0 "stream" listener/);
    const other = new EventEmitter().on("stream", function renamedListener() {});
    await expectRefused(() => checkCompatServer(other), /1 "stream" listener\(s\) \(renamedListener\)/);
    const twice = http2.createServer({}, () => {}).on("stream", () => {});
    await expectRefused(() => checkCompatServer(twice), /2 "stream" listener/);
  });

  it("refuses a connect that reports a message nested too deeply otherwise", async () => {
    await expectRefused(() => checkNodeInternals({ connectHandler: fakeHandler(400, JSON.stringify({ code: "invalid_argument", message: "too much recursion" })) }), /not invalid_argument/);
    await expectRefused(() => checkNestedTooDeeplyText(fakeHandler(200, "{}")), /HTTP 200/);
    await expectRefused(() => checkNestedTooDeeplyText(fakeHandler(500, "not json")), /HTTP 500/);
  });

  it("refuses an http.Server that does not apply its deadlines to handed connections once it emitted \"listening\"", async () => {
    // Without Node's "listening" listener (which sets up the connection tracking), nothing times out.
    const untracked = http.createServer({ headersTimeout: 10, requestTimeout: 10, connectionsCheckingInterval: 5 });
    untracked.removeAllListeners("listening");
    await expectRefused(() => checkNodeInternals({ httpServer: untracked }, 300), /not timed out by its headersTimeout \(within 300 ms: no clientError\)/);
    await expect(checkHandedConnections(2000)).resolves.toBeUndefined();
  });

  it("accepts the objects this Node makes when they are injected", async () => {
    const compat = http2.createServer({}, () => {});
    checkCompatServer(compat);
    await expect(checkNodeInternals({ compatServer: compat })).resolves.toBeUndefined();
    expect(isNestedTooDeeplyText("Maximum call stack size exceeded")).toBe(true);
    expect(isNestedTooDeeplyText("cannot decode google.protobuf.Value from JSON: maximum recursion depth of 100 reached")).toBe(true);
    expect(isNestedTooDeeplyText("parse binary: premature EOF")).toBe(false);
  });
});

describe("renewStreamTables", () => {
  it("finds this Node's stream tables and replaces them while a stream is open, which still completes", async () => {
    const server = http2.createServer();
    const sessions: http2.ServerHttp2Session[] = [];
    let stop: (() => void) | null = null;
    server.on("session", (session) => {
      sessions.push(session);
      checkStreamTables(session);
      stop = renewStreamTables(session);
    });
    // Answers only once the tables it was opened in have been replaced twice (a bounded wait
    // on the tables themselves, not on time).
    const opened = deferred<unknown>();
    server.on("stream", (stream, _headers) => {
      const session = stream.session!;
      const first = streamsOf(session);
      opened.resolve(first);
      void (async () => {
        const second = await waitFor("the stream tables renewed", () => streamsOf(session) !== first && streamsOf(session), { intervalMs: 10 });
        await waitFor("the stream tables renewed again", () => streamsOf(session) !== second, { intervalMs: 10 });
        stream.respond({ ":status": 200 }, { endStream: true });
      })();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const client = http2.connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    closers.push(
      () => client.close(),
      () => server.close(),
    );

    const request = client.request({ ":path": "/" });
    request.end();
    const status = new Promise<number>((resolve) => request.on("response", (headers) => resolve(Number(headers[":status"]))));
    const before = await opened.promise;
    expect(stop).not.toBeNull();
    expect(await status).toBe(200);
    expect(streamsOf(sessions[0]!)).not.toBe(before);
    stop!();
  });

  it("refuses loudly (NodeInternalsError naming this Node) for a session whose internals differ", () => {
    expect(() => renewStreamTables({} as http2.Http2Session)).toThrow(NodeInternalsError);
    expect(() => renewStreamTables({} as http2.Http2Session)).toThrow(process.version);
  });
});
