import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startService, type TestService } from "../support/service.js";
import { ROOT, run } from "./clients-python-env.js";

/*
 * The Python client as a user gets it (issue 23): a wheel built from clients/python
 * (`pip wheel`, the hatchling backend fetched from PyPI), installed with its dependencies into
 * a fresh venv outside the repository, and used from a directory where the source tree is not
 * importable, against a live service.
 */

let svc: TestService;
let dir: string;

beforeAll(async () => {
  svc = await startService();
  dir = mkdtempSync(path.join(tmpdir(), "mandate-wheel-"));
}, 120_000);
afterAll(async () => {
  await svc?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const SCRIPT = `
import json, os, sys, uuid
import mandate_client
from mandate_client import AgentKey, MandateClient

with MandateClient() as anonymous:  # MANDATE_BASE_URL
    sandbox = anonymous.create_sandbox(f"wheel-{uuid.uuid4().hex[:10]}@example.com")
with MandateClient(api_key=sandbox.api_key) as client:
    principal = client.create_principal("Wheel", "role")
    key = AgentKey.generate()
    agent = client.register_agent("wheel-agent", principal.principal_id, key)
    client.activate(agent)
    decision = client.submit_intent(agent.identity(key), "reference_noop", timeout=30)
print(json.dumps({"module": mandate_client.__file__, "outcome": decision.outcome, "reason": decision.reason, "secret_in_repr": sandbox.api_key in repr(sandbox)}))
`;

it("builds a wheel, installs it in a fresh venv, and runs the sandbox flow with it", async () => {
  const wheels = path.join(dir, "wheels");
  const built = await run("python3", ["-m", "pip", "wheel", "--no-deps", "-q", "-w", wheels, path.join(ROOT, "clients/python")], { timeoutMs: 180_000 });
  expect(built.code, built.stderr).toBe(0);
  const wheel = readdirSync(wheels).find((f) => f.endsWith(".whl"))!;
  expect(wheel).toMatch(/^mandate_client-\d+\.\d+\.\d+-py3-none-any\.whl$/);

  const venv = path.join(dir, "venv");
  const made = await run("python3", ["-m", "venv", venv], { timeoutMs: 60_000 });
  expect(made.code, made.stderr).toBe(0);
  const installed = await run(path.join(venv, "bin/pip"), ["install", "-q", path.join(wheels, wheel)], { timeoutMs: 300_000 });
  expect(installed.code, installed.stderr).toBe(0);

  const script = path.join(dir, "use_wheel.py");
  writeFileSync(script, SCRIPT);
  const res = await run(path.join(venv, "bin/python"), [script], { cwd: dir, env: { MANDATE_BASE_URL: svc.baseUrl, PYTHONDONTWRITEBYTECODE: "1", PYTHONPATH: "" }, timeoutMs: 60_000 });
  expect(res.code, `${res.stdout}\n${res.stderr}`).toBe(0);
  const out = JSON.parse(res.stdout.trim().split("\n").at(-1)!) as { module: string; outcome: string; reason: string; secret_in_repr: boolean };
  // Imported from the venv's site-packages, not from clients/python/src.
  expect(out.module.startsWith(path.join(venv, "lib"))).toBe(true);
  expect(out.module).toContain("site-packages");
  expect(out).toMatchObject({ outcome: "ALLOW", reason: "starter_reference_action", secret_in_repr: false });
}, 600_000);
