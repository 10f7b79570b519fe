import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, it } from "vitest";
import { repoRoot } from "../support/process.js";
import { startService, type TestService } from "../support/service.js";

/*
 * The README's quick start is executed, exactly as
 * written, against a running service (only localhost:8080 is pointed at it).
 */

let svc: TestService;
beforeAll(async () => {
  svc = await startService();
});
afterAll(() => svc?.close());

/** The first ```sh block after the "## Quick start" heading. */
function quickStart(): string {
  const readme = readFileSync(path.join(repoRoot, "README.md"), "utf8");
  const section = readme.slice(readme.indexOf("## Quick start"));
  const block = /```sh\n([\s\S]*?)```/.exec(section);
  if (!block) throw new Error("README.md has no ```sh block under ## Quick start");
  return block[1]!;
}

it("runs the README quick start as written", async () => {
  const script = quickStart();
  expect(script).toContain("localhost:8080");
  const { stdout } = await promisify(execFile)("bash", ["-euo", "pipefail", "-c", script.replaceAll("localhost:8080", `127.0.0.1:${svc.port}`)], {
    cwd: repoRoot,
    timeout: 60_000,
  });
  // What each command shows, in order: the organization, the new key, the method list, the gRPC answer.
  expect(stdout).toMatch(/"organization_id":"org_[a-z0-9]+".*"sandbox":true/);
  expect(stdout).toMatch(/"api_key":"mk_[^"]+".*"permissions":\["DECISION_READ"\]/);
  expect(stdout).toContain("mandate.v1.SandboxService/CreateSandboxOrganization\n");
  expect(stdout).toMatch(/"organizationId": "org_[a-z0-9]+"/);
});
