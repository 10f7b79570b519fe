import { Code, ConnectError } from "@connectrpc/connect";
import pg from "pg";
import { SandboxService } from "../../src/gen/mandate/v1/organizations_pb.js";
import { afterEach, describe, expect, it } from "vitest";
import { createTestDatabase, startService, uniqueEmail, type TestService } from "../support/service.js";

/*
 * The sandbox limits (docs/architecture.md, Limits) are enforced in Postgres, so they hold across
 * replicas: concurrent signups spread over two services on one database never
 * overshoot a limit, and a refused signup leaves no organization behind.
 */

const started: TestService[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((s) => s.close()));
});

/** Two replicas on one fresh database with the given limits. */
async function replicas(env: Record<string, string>): Promise<{ a: TestService; b: TestService; url: string }> {
  const url = await createTestDatabase("limits");
  const a = await startService({ DATABASE_URL: url, ...env });
  const b = await startService({ DATABASE_URL: url, ...env });
  started.push(a, b);
  return { a, b, url };
}

async function count(url: string, sql: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<{ n: number }>(sql)).rows[0]!.n;
  } finally {
    await client.end();
  }
}

/** Fires all signups at once, alternating replicas; returns the statuses. */
async function burst(a: TestService, b: TestService, emails: string[]): Promise<number[]> {
  const answers = await Promise.all(emails.map((email, i) => (i % 2 ? b : a).v1("POST", "/v1/sandbox/organizations", { body: { email } })));
  for (const r of answers) if (r.status !== 200) expect(r.body).toMatchObject({ detail: "rate_limited", request_id: expect.any(String) });
  return answers.map((r) => r.status);
}

const tally = (statuses: number[]) => ({ ok: statuses.filter((s) => s === 200).length, limited: statuses.filter((s) => s === 429).length });

describe("sandbox limits under concurrency, across two replicas", () => {
  it("per client address: exactly the limit succeeds", async () => {
    const { a, b, url } = await replicas({ MANDATE_SANDBOX_PER_ADDRESS_PER_HOUR: "5" });
    const statuses = await burst(a, b, Array.from({ length: 24 }, () => uniqueEmail("addr")));
    expect(tally(statuses)).toEqual({ ok: 5, limited: 19 });
    // Refused signups rolled back entirely: no organization, key or ledger row without a signup.
    expect(await count(url, "SELECT count(*)::int AS n FROM organizations WHERE sandbox")).toBe(5);
    expect(await count(url, "SELECT count(*)::int AS n FROM sandbox_signups")).toBe(5);
    expect(await count(url, "SELECT count(*)::int AS n FROM api_keys")).toBe(5);
  });

  it("per email: exactly the limit succeeds, whatever the spelling", async () => {
    const { a, b, url } = await replicas({ MANDATE_SANDBOX_PER_EMAIL_PER_DAY: "2" });
    const email = uniqueEmail("same");
    const spellings = Array.from({ length: 12 }, (_, i) => (i % 3 === 0 ? email.toUpperCase() : i % 3 === 1 ? ` ${email} ` : email));
    const statuses = await burst(a, b, spellings);
    expect(tally(statuses)).toEqual({ ok: 2, limited: 10 });
    expect(await count(url, "SELECT count(*)::int AS n FROM organizations WHERE sandbox")).toBe(2);
    // Another address book entry is unaffected.
    expect((await a.v1("POST", "/v1/sandbox/organizations", { body: { email: uniqueEmail("other") } })).status).toBe(200);
  });

  it("the total cap: exactly the cap succeeds, and operator-made organizations are not counted", async () => {
    const { a, b, url } = await replicas({ MANDATE_SANDBOX_MAX_ORGS: "3" });
    await a.newOrg();
    const statuses = await burst(a, b, Array.from({ length: 12 }, () => uniqueEmail("cap")));
    expect(tally(statuses)).toEqual({ ok: 3, limited: 9 });
    expect(await count(url, "SELECT count(*)::int AS n FROM organizations WHERE sandbox")).toBe(3);
    expect(await count(url, "SELECT count(*)::int AS n FROM organizations WHERE NOT sandbox")).toBe(1);
  });
});

describe("a refused signup says why and when to come back", () => {
  /** The Retry-After of a 429 and the wait its message states: the same whole number of seconds. */
  function retryAfter(res: { status: number; body: unknown; headers: Headers }, variable: string, window: number): number {
    expect(res.status).toBe(429);
    const message = (res.body as { message: string }).message;
    expect(message).toContain(`(${variable})`);
    const header = Number(res.headers.get("retry-after"));
    expect(Number.isInteger(header)).toBe(true);
    // When the only signup counted leaves the window: within the window, never past it.
    expect(header).toBeGreaterThanOrEqual(1);
    expect(header).toBeLessThanOrEqual(window);
    expect(message).toContain(`try again in ${header} s`);
    return header;
  }

  it("per email and per address: Retry-After until the window frees, and the limit's variable in the message", async () => {
    const url = await createTestDatabase("limits");
    const svc = await startService({ DATABASE_URL: url, MANDATE_SANDBOX_PER_EMAIL_PER_DAY: "1", MANDATE_SANDBOX_PER_ADDRESS_PER_HOUR: "2" });
    started.push(svc);
    const email = uniqueEmail("retry");
    expect((await svc.v1("POST", "/v1/sandbox/organizations", { body: { email } })).status).toBe(200);
    retryAfter(await svc.v1("POST", "/v1/sandbox/organizations", { body: { email } }), "MANDATE_SANDBOX_PER_EMAIL_PER_DAY", 86_400);
    expect((await svc.v1("POST", "/v1/sandbox/organizations", { body: { email: uniqueEmail("retry") } })).status).toBe(200);
    retryAfter(await svc.v1("POST", "/v1/sandbox/organizations", { body: { email: uniqueEmail("retry") } }), "MANDATE_SANDBOX_PER_ADDRESS_PER_HOUR", 3_600);
    // gRPC says the same in its metadata (trailers), with the pushback gRPC retry policies read.
    const refused = await svc.grpc(SandboxService).createSandboxOrganization({ email }).then(
      () => null,
      (err: unknown) => ConnectError.from(err),
    );
    expect(refused?.code).toBe(Code.ResourceExhausted);
    const seconds = Number(refused!.metadata.get("retry-after"));
    expect(seconds).toBeGreaterThanOrEqual(1);
    expect(seconds).toBeLessThanOrEqual(3_600);
    expect(refused!.metadata.get("grpc-retry-pushback-ms")).toBe(String(seconds * 1000));
  });

  it("the total cap names MANDATE_SANDBOX_MAX_ORGS and still carries Retry-After", async () => {
    const url = await createTestDatabase("limits");
    const svc = await startService({ DATABASE_URL: url, MANDATE_SANDBOX_MAX_ORGS: "1" });
    started.push(svc);
    expect((await svc.v1("POST", "/v1/sandbox/organizations", { body: { email: uniqueEmail("cap") } })).status).toBe(200);
    const res = await svc.v1("POST", "/v1/sandbox/organizations", { body: { email: uniqueEmail("cap") } });
    expect(res.status).toBe(429);
    expect((res.body as { message: string }).message).toContain("(MANDATE_SANDBOX_MAX_ORGS)");
    expect(res.headers.get("retry-after")).toBe("3600");
  });
});
