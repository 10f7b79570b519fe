import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";

/*
 * The limits a service has when nothing is configured, as docs/architecture.md (Limits) states
 * them: every test service overrides some of them, so this is where a changed default fails.
 */
describe("loadConfig with an empty environment", () => {
  const config = loadConfig({});

  it("has the documented request limits: 64 KiB Intents, requested_at within ±300 s", () => {
    expect(config.limits).toMatchObject({ intentBodyBytes: 64 * 1024, requestedAtSkewSeconds: 300 });
  });

  it("has the documented connection limits: headers within 10 s, a request within 30 s, idle keep-alive closed after 60 s", () => {
    expect(config.connections).toMatchObject({ headersTimeoutMs: 10_000, requestTimeoutMs: 30_000, idleTimeoutMs: 60_000 });
  });

  it("evaluates a policy for at most 50 ms", () => {
    expect(config.evaluationTimeoutMs).toBe(50);
  });

  it("creates sandboxes 10 per hour per client address, 3 per email per day, 10,000 in all", () => {
    expect(config.limits).toMatchObject({ sandboxPerAddressPerHour: 10, sandboxPerEmailPerDay: 3, sandboxMaxOrgs: 10_000 });
  });

  it("serves on 127.0.0.1:8080 from the embedded Postgres (no DATABASE_URL) and without Redis", () => {
    expect(config).toMatchObject({ host: "127.0.0.1", port: 8080, databaseUrl: undefined, redisUrl: undefined });
  });
});
