import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { readFile, readdir } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { WASM_BUILTINS } from "./builtins.js";

/**
 * The bundle entrypoint every decision is read from: `data.mandate.bundle.decision`, an alias of
 * `data.mandate.main.decision` (policies/bundle.rego). opa build drops an entrypoint's rule from
 * the Rego it packs beside policy.wasm, so the entrypoints are aliases and the bundle's main.rego
 * keeps its `decision` rule whole.
 */
export const ENTRYPOINT = "mandate/bundle/decision";

/** The entrypoint of bundles built before the alias: read when a stored bundle lacks ENTRYPOINT. */
export const LEGACY_ENTRYPOINT = "mandate/main/decision";

/**
 * The bundle manifest's metadata key listing the policies written by hand in Rego. Rego compiled
 * from a rules document costs a bounded amount per input (conditions over the document's own
 * values, authority lookups in the precomputed graph index); hand-written Rego may iterate without
 * bound on some inputs and not others, so the engine never evaluates such a bundle on the event
 * loop (docs/architecture.md, Policies). Absent when every policy is compiled from rules.
 */
export const HANDWRITTEN_METADATA = "mandate_handwritten_policies";

/** The dry run's per-rule explanation of the policies covering the Intent's action (policies/bundle.rego). */
export const EXPLAIN_ENTRYPOINT = "mandate/bundle/explain";

/** What an opa invocation printed and how it exited; a non-zero exit is data, not an exception. */
export interface OpaRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** The project root (nearest folder with a package.json above this module), where policies/ and .tools/ live, from src/ or dist/ alike. */
export function projectRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, "package.json"))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error("cannot find the project root (no package.json above src/policy)");
    dir = parent;
  }
  return dir;
}

/**
 * The opa binary: MANDATE_OPA_PATH, else the project-local build in .tools/bin (a checkout, where
 * scripts/setup.sh builds it), else `opa` on PATH (an installed package or a container image).
 */
export function opaPath(): string {
  if (process.env.MANDATE_OPA_PATH) return process.env.MANDATE_OPA_PATH;
  const local = join(projectRoot(), ".tools", "bin", "opa");
  return existsSync(local) ? local : "opa";
}

/** Runs opa without a shell; rejects only when opa cannot be started or times out. */
export function runOpa(args: readonly string[], options: { cwd?: string; timeoutMs?: number } = {}): Promise<OpaRun> {
  return new Promise((resolve, reject) => {
    execFile(
      opaPath(),
      args,
      { cwd: options.cwd, timeout: options.timeoutMs ?? 120_000, maxBuffer: 64 * 1024 * 1024, encoding: "utf8" },
      (error, stdout, stderr) => {
        if (error && typeof error.code !== "number") {
          reject(new Error(`cannot run opa at ${opaPath()}: ${error.message}`, { cause: error }));
          return;
        }
        resolve({ code: error ? Number(error.code) : 0, stdout, stderr });
      },
    );
  });
}

/** The Rego library every bundle is built from: policies/*.rego without the tests. */
export async function libraryModules(): Promise<{ name: string; rego: string }[]> {
  const dir = join(projectRoot(), "policies");
  const names = (await readdir(dir)).filter((n) => n.endsWith(".rego") && !n.endsWith("_test.rego")).sort();
  return Promise.all(names.map(async (name) => ({ name, rego: await readFile(join(dir, name), "utf8") })));
}

let capabilities: Promise<string> | undefined;

/**
 * Capabilities JSON for opa build/check: this opa's language features, restricted to
 * WASM_BUILTINS (builtins.ts). A module calling anything else (http.send, time.now_ns, …) fails
 * to compile with a located error instead of failing at evaluation time. Rejects when this opa
 * or the opa-wasm SDK lacks a listed built-in.
 */
export function wasmCapabilities(): Promise<string> {
  capabilities ??= (async () => {
    const current = await runOpa(["capabilities", "--current"]);
    if (current.code !== 0) throw new Error(`opa capabilities failed: ${current.stderr.trim()}`);
    const sdkMain = createRequire(import.meta.url).resolve("@open-policy-agent/opa-wasm");
    const sdk = JSON.parse(await readFile(join(dirname(sdkMain), "..", "capabilities.json"), "utf8")) as {
      builtins: { name: string }[];
    };
    const caps = JSON.parse(current.stdout) as { builtins: { name: string }[] };
    const inSdk = new Set(sdk.builtins.map((b) => b.name));
    const inOpa = new Set(caps.builtins.map((b) => b.name));
    const missing = WASM_BUILTINS.filter((name) => !inSdk.has(name) || !inOpa.has(name));
    if (missing.length > 0) throw new Error(`WASM_BUILTINS lists built-ins this opa or opa-wasm lacks: ${missing.join(", ")}`);
    const allowed = new Set(WASM_BUILTINS);
    caps.builtins = caps.builtins.filter((b) => allowed.has(b.name));
    return JSON.stringify(caps);
  })();
  capabilities.catch(() => (capabilities = undefined));
  return capabilities;
}
