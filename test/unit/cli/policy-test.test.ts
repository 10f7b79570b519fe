import { execFile } from "node:child_process";
import { cp, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, expect, it } from "vitest";

const run = promisify(execFile);
const cli = (dir: string) =>
  run(process.execPath, ["--import", "tsx", "src/cli/main.ts", "policy", "test", dir]).then(
    (r) => ({ code: 0, out: r.stdout }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, out: e.stdout + e.stderr }),
  );

const scratch: string[] = [];
afterAll(async () => {
  for (const d of scratch) await rm(d, { recursive: true, force: true });
});

it("runs an author's tests against the library, a compiled rules document and a graph fixture", async () => {
  const r = await cli("examples/policy-test");
  expect(r.out).toContain("PASS: 3/3");
  expect(r.code).toBe(0);
});

it("fails (exit 1) when a policy test fails, and exits 2 on an invalid rules document", async () => {
  const dir = await mkdtemp(join(tmpdir(), "policy-test-"));
  scratch.push(dir);
  await cp("examples/policy-test", dir, { recursive: true });
  await writeFile(join(dir, "payments.rules.yaml"), "actions: [vendor_payment]\nrules:\n  - id: authority\n    authority: true\n");
  const failing = await cli(dir);
  expect(failing.code).toBe(1);
  expect(failing.out).toContain("test_blocked_vendor_denied: FAIL");

  await writeFile(join(dir, "payments.rules.yaml"), "actions: [vendor_payment]\nrules:\n  - id: r\n    outcome: MAYBE\n    reason: Not Snake\n");
  const invalid = await cli(dir);
  expect(invalid.code).toBe(2);
  expect(invalid.out).toContain("payments.rules.yaml");
});
