import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { readFile, readdir } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The bundle entrypoint every decision is read from (package mandate.main, rule decision). */
export const ENTRYPOINT = "mandate/main/decision";

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

/** The opa binary: MANDATE_OPA_PATH, else the project-local build in .tools/bin. */
export function opaPath(): string {
  return process.env.MANDATE_OPA_PATH || join(projectRoot(), ".tools", "bin", "opa");
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

// Built-ins that would make a decision depend on something other than bundle and input.
const NONDETERMINISTIC = new Set(["rand.intn"]);

let capabilities: Promise<string> | undefined;

/**
 * Capabilities JSON for opa build/check: this opa's language features, restricted to the
 * built-ins the opa-wasm SDK can execute and that are deterministic. A module calling
 * anything else (http.send, time.now_ns, …) fails to compile with a located error instead
 * of failing at evaluation time.
 */
export function wasmCapabilities(): Promise<string> {
  capabilities ??= (async () => {
    const current = await runOpa(["capabilities", "--current"]);
    if (current.code !== 0) throw new Error(`opa capabilities failed: ${current.stderr.trim()}`);
    const sdkMain = createRequire(import.meta.url).resolve("@open-policy-agent/opa-wasm");
    const sdk = JSON.parse(await readFile(join(dirname(sdkMain), "..", "capabilities.json"), "utf8")) as {
      builtins: { name: string }[];
    };
    const supported = new Set(sdk.builtins.map((b) => b.name).filter((n) => !NONDETERMINISTIC.has(n)));
    const caps = JSON.parse(current.stdout) as { builtins: { name: string }[] };
    caps.builtins = caps.builtins.filter((b) => supported.has(b.name));
    return JSON.stringify(caps);
  })();
  capabilities.catch(() => (capabilities = undefined));
  return capabilities;
}
