import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { renewStreamTables } from "../../../src/transport/h2-stream-tables.js";

const closers: (() => void)[] = [];
afterEach(() => closers.splice(0).forEach((close) => close()));

/** The internal stream Map of a session, as renewStreamTables finds it. */
function streamsOf(session: http2.Http2Session): unknown {
  const key = Object.getOwnPropertySymbols(session).find((s) => s.description === "state")!;
  return (session as unknown as Record<symbol, { streams: unknown }>)[key]!.streams;
}

describe("renewStreamTables", () => {
  it("finds this Node's stream tables and replaces them while a stream is open, which still completes", async () => {
    const server = http2.createServer();
    const sessions: http2.ServerHttp2Session[] = [];
    let stop: (() => void) | null = null;
    server.on("session", (session) => {
      sessions.push(session);
      stop = renewStreamTables(session);
    });
    // Answers only after the tables were renewed at least twice.
    server.on("stream", (stream) => setTimeout(() => stream.respond({ ":status": 200 }, { endStream: true }), 250));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const client = http2.connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    closers.push(() => client.close(), () => server.close());

    const request = client.request({ ":path": "/" });
    request.end();
    const status = new Promise<number>((resolve) => request.on("response", (headers) => resolve(Number(headers[":status"]))));
    await new Promise((resolve) => setTimeout(resolve, 50));
    // A Node whose http2 keeps its streams otherwise gets null here: this test then fails, so an upgrade shows it.
    expect(stop).not.toBeNull();
    const before = streamsOf(sessions[0]!);
    expect(await status).toBe(200);
    expect(streamsOf(sessions[0]!)).not.toBe(before);
    stop!();
  });
});
