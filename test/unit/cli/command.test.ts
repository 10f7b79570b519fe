import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { CliError, parseCommandLine, postJson } from "../../../src/cli/command.js";

/*
 * postJson, the CLI's one call to the service: a refusal is a CliError with the answer's status,
 * code, message, request id and field errors; a service that does not answer, or cannot be
 * reached, is a CliError naming the URL, never a hang or a stack trace.
 */

let server: http.Server;
let base: string;
let answer: (res: http.ServerResponse) => void;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => answer(res));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});

afterEach(() => {
  delete process.env.MANDATE_CLI_TIMEOUT_MS;
});

const failure = (work: Promise<unknown>) => work.then(() => new Error("it succeeded"), (e: unknown) => e);

describe("postJson", () => {
  it("answers the JSON of a 2xx", async () => {
    answer = (res) => res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
    expect(await postJson(base, "/v1/x", "{}")).toEqual({ ok: true });
  });

  it("a refusal says its status, code, message, request id, and each field with its code", async () => {
    const body = { detail: "validation_failed", message: "The request is invalid.", request_id: "req-42", errors: [{ field: "email", code: "invalid_format", message: "not an email" }] };
    answer = (res) => res.writeHead(422, { "content-type": "application/json" }).end(JSON.stringify(body));
    const err = await failure(postJson(base, "/v1/x", "{}"));
    expect(err).toBeInstanceOf(CliError);
    expect((err as Error).message).toBe("422 validation_failed: The request is invalid. (request req-42)\n  email: not an email (invalid_format)");
  });

  it("a service that never answers is a CliError after MANDATE_CLI_TIMEOUT_MS, naming the URL", async () => {
    process.env.MANDATE_CLI_TIMEOUT_MS = "200";
    answer = () => undefined; // never answers
    const err = await failure(postJson(base, "/v1/x", "{}"));
    expect(err).toBeInstanceOf(CliError);
    expect((err as Error).message).toBe(`cannot reach the service at ${base} (--url or MANDATE_BASE_URL): no answer within 200 ms`);
  });

  it("a service that cannot be reached is a CliError naming the URL", async () => {
    // A port nothing listens on: one just freed.
    const probe = http.createServer();
    await new Promise<void>((r) => probe.listen(0, "127.0.0.1", r));
    const closed = `http://127.0.0.1:${(probe.address() as AddressInfo).port}`;
    await new Promise<void>((r) => probe.close(() => r()));
    const err = await failure(postJson(closed, "/v1/x", "{}"));
    expect(err).toBeInstanceOf(CliError);
    expect((err as Error).message).toMatch(new RegExp(`^cannot reach the service at ${closed.replace(/\./g, "\\.")} \\(--url or MANDATE_BASE_URL\\): .*ECONNREFUSED`));
  });
});

describe("parseCommandLine", () => {
  it("takes the next argument as a string option's value even when it starts with a dash (a base64url thumbprint may)", () => {
    const { values, positionals } = parseCommandLine(["--trust-export-keys", "-Xq3v_9", "export.json"], { "trust-export-keys": { type: "string" } });
    expect(values["trust-export-keys"]).toBe("-Xq3v_9");
    expect(positionals).toEqual(["export.json"]);
    expect(() => parseCommandLine(["--nope", "x"], { "trust-export-keys": { type: "string" } })).toThrow(CliError);
  });
});
