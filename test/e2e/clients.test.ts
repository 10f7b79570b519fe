import path from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startService, type TestService } from "../support/service.js";
import { pythonVenv, ROOT, run } from "./clients-python-env.js";

/*
 * Issue 8: the Python client's pytest suite (clients/python/tests) against a
 * live service started here. The suite is the same scenario suite as
 * clients-ts.test.ts: sandbox → register twice → activate → ALLOW → capability
 * → verify → replay; HUMAN_REVIEW → poll while a reviewer approves →
 * from-review capability; a tampered signature is a typed error sent once;
 * retries against a stub server answering 503 twice, then 200.
 */

let svc: TestService;
let python: string;

beforeAll(async () => {
  [svc, python] = await Promise.all([startService(), pythonVenv()]);
}, 300_000);
afterAll(() => svc?.close());

it("passes the Python client's pytest suite against the live service", async () => {
  const res = await run(python, ["-m", "pytest", "-q", "-p", "no:cacheprovider", path.join(ROOT, "clients/python/tests")], {
    cwd: path.join(ROOT, "clients/python"),
    env: { MANDATE_BASE_URL: svc.baseUrl, MANDATE_OPERATOR_KEY: svc.operatorKey!, PYTHONDONTWRITEBYTECODE: "1" },
    timeoutMs: 180_000,
  });
  const output = `${res.stdout}\n${res.stderr}`;
  expect(res.code, output).toBe(0);
  // Every test ran against the server: none skipped for a missing MANDATE_BASE_URL.
  expect(output).toMatch(/\b\d+ passed\b/);
  expect(output, output).not.toMatch(/skipped|error/i);
  console.log(`[pytest] ${output.trim().split("\n").at(-1)} (${res.ms} ms)`);
}, 240_000);
