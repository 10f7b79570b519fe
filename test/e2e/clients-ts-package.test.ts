import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readdir, rm, stat, writeFile } from "node:fs/promises";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { build } from "esbuild";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "../../console/tests/browser.js";
import { startService, uniqueEmail, type TestService } from "../support/service.js";
import { ROOT } from "./clients-python-env.js";

/*
 * Issue 23: the TypeScript client as its own package. `npm pack` builds clients/typescript
 * (tsc: ESM + .d.ts), the tarball is installed into an empty project outside the repo, and the
 * same flow (sandbox sign-up, register an agent, sign and submit an Intent, read the decision
 * as the agent) runs from it in plain Node and, bundled for the browser, in Debian's Chromium
 * on another origin than the service's: browser-safety and CORS together.
 */

const PACKAGE_DIR = path.join(ROOT, "clients/typescript");
const execFileP = promisify(execFile);

/** npm in `cwd`, without the npm_* variables of an `npm test` that runs this suite (they would point npm at the repo). */
async function npm(cwd: string, args: string[]): Promise<string> {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toLowerCase().startsWith("npm_")));
  const { stdout } = await execFileP("npm", args, { cwd, env, maxBuffer: 16 << 20, timeout: 180_000 });
  return stdout;
}

/** The flow both runtimes run, with nothing but the package's public API. */
const FLOW = `import { agentIdentity, MandateClient } from "@mandate/client";

export async function signUpAndDecide(base_url, email, key) {
  const sandbox = await new MandateClient({ base_url }).createSandbox(email);
  const client = new MandateClient({ base_url, api_key: sandbox.api_key });
  const principal = await client.createPrincipal({ display_name: "Accounts Payable", kind: "role" });
  const agent = await client.registerAgent({ name: "tarball-agent", principal_id: principal.principal_id, key });
  await client.activate(agent);
  const me = agentIdentity(agent, key);
  const decision = await client.submitIntent(me, { action: "reference_noop", amount: 12.5, currency: "EUR" });
  const read = await client.getDecision(decision.decision_id, { agent: me });
  return { organization_id: sandbox.organization_id, agent_id: agent.agent_id, public_key: key.public_key, decision, read };
}
`;

const NODE_MAIN = `import { signUpAndDecide } from "./flow.mjs";
import { loadOrCreateKey } from "@mandate/client/node";

const key = await loadOrCreateKey(process.argv[3]);
console.log(JSON.stringify(await signUpAndDecide(process.env.MANDATE_BASE_URL, process.argv[2], key)));
`;

/** The page's script: the same flow with a fresh key; its outcome (or typed failure) in window.mandateResult. */
const PAGE_MAIN = `import { AgentKey, MandateError } from "@mandate/client";
import { signUpAndDecide } from "./flow.mjs";

const params = new URLSearchParams(location.search);
window.mandateResult = AgentKey.generate()
  .then((key) => signUpAndDecide(params.get("api"), params.get("email"), key))
  .then(
    (result) => ({ ok: true, result }),
    (err) => ({ ok: false, name: err.name, detail: err.detail, message: err.message, typed: err instanceof MandateError }),
  );
`;

/** What a TypeScript project (browser types only: no @types/node) compiles against the published .d.ts. */
const TYPES_CHECK = `import { AgentKey, MandateClient, type Decision, type MandateClientOptions } from "@mandate/client";
import { loadOrCreateKey } from "@mandate/client/node";

const options: MandateClientOptions = { base_url: "http://127.0.0.1:8080", max_retries: 2 };
const client = new MandateClient(options);
export const key: Promise<AgentKey> = loadOrCreateKey("agent.pem");
export const decision: Promise<Decision> = client.getDecision("dec_1");
// @ts-expect-error: options are snake_case, as the wire JSON is
new MandateClient({ baseUrl: "http://127.0.0.1:8080" });
`;

let work: string;
let app: string;
let svc: TestService;
let browser: Browser | undefined;
let packed: { files: { path: string }[]; filename: string };
const pages: http.Server[] = [];
/** The page's script, once bundled. */
let script = "";
/** The origin MANDATE_CORS_ORIGINS allows. */
let allowed: string;

/** Serves the page on a port of its own (an origin of its own): `/` is the page, `/main.js` its script. */
async function servePage(): Promise<string> {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://page");
    if (url.pathname === "/main.js") res.writeHead(200, { "content-type": "text/javascript" }).end(script);
    else if (url.pathname === "/") res.writeHead(200, { "content-type": "text/html" }).end('<!doctype html><title>client</title><script type="module" src="/main.js"></script>');
    else res.writeHead(404).end();
  });
  pages.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

beforeAll(async () => {
  work = await mkdtemp(path.join(os.tmpdir(), "mandate-client-package-"));
  app = path.join(work, "app");
  await mkdir(app);
  // Only the page's origin may call the service from a browser.
  allowed = await servePage();
  const started = startService({ MANDATE_CORS_ORIGINS: allowed });
  started.catch(() => undefined); // awaited below; not an unhandled rejection meanwhile
  // npm pack runs the package's prepack: tsc builds dist/ (ESM + .d.ts).
  const out = await npm(PACKAGE_DIR, ["pack", "--json", "--loglevel", "silent", "--pack-destination", work]);
  packed = JSON.parse(out.slice(out.indexOf("[")))[0];
  await writeFile(path.join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  await npm(app, ["install", "--prefer-offline", "--no-audit", "--no-fund", path.join(work, packed.filename)]);
  await writeFile(path.join(app, "flow.mjs"), FLOW);
  svc = await started;
}, 300_000);

afterAll(async () => {
  await browser?.close();
  for (const server of pages) await new Promise((resolve) => server.close(resolve));
  await svc?.close();
  if (work) await rm(work, { recursive: true, force: true });
});

/** Every file under `dir`, relative to it. */
async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((e) => e.isFile()).map((e) => path.relative(dir, path.join(e.parentPath, e.name)));
}

describe("the packed tarball", () => {
  it("holds the built entries and README only, and installs nothing but the client's two dependencies", async () => {
    const files = packed.files.map((f) => f.path).sort();
    expect(files).toContain("dist/index.js");
    expect(files).toContain("dist/index.d.ts");
    expect(files).toContain("dist/node.js");
    expect(files).toContain("README.md");
    expect(files.filter((f) => !/^(dist\/[a-z-]+\.(js|d\.ts)|README\.md|package\.json)$/.test(f))).toEqual([]);

    const tree = JSON.parse(await npm(app, ["ls", "--all", "--json"]));
    const names: string[] = [];
    const walk = (deps: Record<string, { dependencies?: object }> | undefined) => {
      for (const [name, dep] of Object.entries(deps ?? {})) {
        names.push(name);
        walk(dep.dependencies as typeof deps);
      }
    };
    walk(tree.dependencies);
    // standardwebhooks verifies webhook deliveries (verifyWebhook), with its own two small dependencies.
    expect(names.sort()).toEqual(["@mandate/client", "@noble/ed25519", "@stablelib/base64", "fast-sha256", "standardwebhooks"]);

    let bytes = 0;
    for (const f of await filesUnder(path.join(app, "node_modules"))) bytes += (await stat(path.join(app, "node_modules", f))).size;
    // No server code rides along (the repo's own install is hundreds of MB, embedded Postgres alone 60).
    expect(bytes).toBeLessThan(1_000_000);
  });

  it("type-checks a TypeScript project with browser types only against its .d.ts", async () => {
    await writeFile(path.join(app, "check.ts"), TYPES_CHECK);
    const tsconfig = {
      compilerOptions: { target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", lib: ["ES2022", "DOM"], types: [], strict: true, noEmit: true },
      files: ["check.ts"],
    };
    await writeFile(path.join(app, "tsconfig.json"), JSON.stringify(tsconfig));
    const res = await execFileP(process.execPath, [path.join(ROOT, "node_modules/typescript/bin/tsc"), "-p", app]).catch((err) => err);
    expect(`${res.stdout}${res.stderr}`).toBe("");
  }, 60_000);
});

describe("@mandate/client from its tarball", () => {
  it("plain Node: sandbox sign-up, an agent with a key file, a signed Intent, its decision read as the agent", async () => {
    await writeFile(path.join(app, "main.mjs"), NODE_MAIN);
    const email = uniqueEmail("ts-tarball-node");
    const keyFile = path.join(work, "agent.pem");
    const { stdout } = await execFileP(process.execPath, ["main.mjs", email, keyFile], { cwd: app, env: { PATH: process.env.PATH, MANDATE_BASE_URL: svc.baseUrl } });
    const out = JSON.parse(stdout);
    expect(out.decision).toMatchObject({ outcome: "ALLOW", reason: "starter_reference_action" });
    expect(out.read).toMatchObject({ decision_id: out.decision.decision_id, outcome: "ALLOW", agent_id: out.agent_id });
    expect((await stat(keyFile)).mode & 0o777).toBe(0o600);
    // The service holds the public key of the file's private key.
    const agent = await svc.v1("GET", `/v1/agents/${out.agent_id}`, { headers: { "x-service-operator-key": svc.operatorKey!, "x-service-organization-id": out.organization_id } });
    expect(agent.body.public_key).toBe(out.public_key);
  });

  it("Chromium, bundled for the browser, on an origin the service allows; refused on one it does not", async () => {
    await writeFile(path.join(app, "page.mjs"), PAGE_MAIN);
    // platform "browser": a node:* import anywhere in what the page reaches fails the build.
    const bundle = await build({ entryPoints: [path.join(app, "page.mjs")], absWorkingDir: app, bundle: true, platform: "browser", format: "esm", write: false, logLevel: "silent" });
    script = bundle.outputFiles[0]!.text;
    const other = await servePage();
    expect(new URL(allowed).port).not.toBe(String(svc.port));

    browser = await launchChromium();
    const page = await browser.newPage();
    const run = async (origin: string, email: string) => {
      await page.goto(`${origin}/?${new URLSearchParams({ api: svc.baseUrl, email })}`);
      await page.waitForFunction(() => "mandateResult" in window);
      return page.evaluate(() => (window as unknown as { mandateResult: Promise<Record<string, any>> }).mandateResult);
    };

    const ok = await run(allowed, uniqueEmail("ts-tarball-browser"));
    expect(ok, JSON.stringify(ok)).toMatchObject({ ok: true, result: { decision: { outcome: "ALLOW", reason: "starter_reference_action" } } });
    expect(ok.result.read).toMatchObject({ decision_id: ok.result.decision.decision_id, outcome: "ALLOW" });
    expect(ok.result.public_key).toMatch(/^ed25519:base64:[A-Za-z0-9+/]{43}=$/);

    // Same page, another origin: the preflight is refused, so the browser never sends the request.
    const refused = await run(other, uniqueEmail("ts-tarball-browser"));
    expect(refused).toMatchObject({ ok: false, typed: true, name: "TransportError", detail: "connection_failed" });
  });
});
