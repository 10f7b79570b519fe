import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startService, type TestService } from "../support/service.js";
import { pythonVenv, ROOT, run, type Ran } from "./clients-python-env.js";

/*
 * Issue 8: the examples/ walkthroughs of the spec's eight onboarding steps run
 * against a live service (MANDATE_BASE_URL), in Python and in TypeScript, and
 * reach the same decisions: what the README shows is what runs.
 */

let svc: TestService;
let python: string;

beforeAll(async () => {
  [svc, python] = await Promise.all([startService(), pythonVenv()]);
}, 300_000);
afterAll(() => svc?.close());

/** The decisions the walkthrough's payments policy and authority graph must produce. */
const EXPECTED = [
  { amount: 500, outcome: "ALLOW", reason: "within_delegated_authority", status: null },
  { amount: 2500, outcome: "HUMAN_REVIEW", reason: "requires_approval", status: "PENDING" },
  { amount: 75000, outcome: "DENY", reason: "exceeds_approval_limit", status: null },
  { amount: 100, outcome: "DENY", reason: "blocked_counterparty", status: null },
];

function checkWalkthrough(res: Ran): void {
  const output = `${res.stdout}\n${res.stderr}`;
  expect(res.code, output).toBe(0);
  for (let n = 1; n <= 8; n++) expect(res.stdout, output).toContain(`[${n}/8]`);
  const summary = JSON.parse(res.stdout.trim().split("\n").at(-1)!);
  expect(summary.organization_id).toMatch(/^org_/);
  expect(summary.agent_state_after_registration).toBe("registered");
  expect(summary.decisions).toHaveLength(EXPECTED.length);
  summary.decisions.forEach((d: Record<string, unknown>, i: number) => {
    expect(d).toMatchObject(EXPECTED[i]!);
    expect(d.decision_id).toMatch(/\S/);
    expect(d.evidence_id).toMatch(/\S/);
  });
  expect(summary.capability_verified).toBe(true);
  expect(summary.evidence_kind).toBe("decision");
}

describe("onboarding walkthrough (eight steps, sandbox organization)", () => {
  it("examples/python/onboarding.py", async () => {
    const res = await run(python, [path.join(ROOT, "examples/python/onboarding.py")], {
      env: { MANDATE_BASE_URL: svc.baseUrl, PYTHONDONTWRITEBYTECODE: "1" },
      timeoutMs: 90_000,
    });
    checkWalkthrough(res);
  }, 120_000);

  it("examples/typescript/onboarding.ts", async () => {
    const res = await run(process.execPath, [path.join(ROOT, "node_modules/tsx/dist/cli.mjs"), path.join(ROOT, "examples/typescript/onboarding.ts")], {
      env: { MANDATE_BASE_URL: svc.baseUrl },
      timeoutMs: 90_000,
    });
    checkWalkthrough(res);
  }, 120_000);
});
