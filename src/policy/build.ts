import { createHash } from "node:crypto";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PolicyCompileError, PolicySourceError, type CompileProblem } from "./errors.js";
import type { AuthorityGraph } from "./graph-types.js";
import { indexGraph } from "./graph-index.js";
import { ENTRYPOINT, libraryModules, runOpa, wasmCapabilities } from "./opa.js";
import { assertRegoPackage, isPolicyKey, POLICY_KEY_PATTERN } from "./rules.js";

/** One active runtime policy version, as Rego (rules documents are compiled by compileRules first). */
export interface BundlePolicy {
  policy_key: string;
  version: number;
  rego: string;
  /** Written by hand rather than compiled from a rules document (see HANDWRITTEN_METADATA). */
  handwritten?: boolean;
}

/**
 * The bundle manifest's metadata key listing the policies written by hand in Rego. Rego compiled
 * from a rules document costs a bounded amount per input (conditions over the document's own
 * values, authority lookups in the precomputed graph index); hand-written Rego may iterate without
 * bound on some inputs and not others, so the engine never evaluates such a bundle on the event
 * loop (docs/architecture.md, Policies). Absent when every policy is compiled from rules.
 */
export const HANDWRITTEN_METADATA = "mandate_handwritten_policies";

/** Everything an organization's bundle is built from. */
export interface BundleRequest {
  policies: readonly BundlePolicy[];
  graph: AuthorityGraph | null;
  graph_version: number | null;
}

/** A built bundle: the tar.gz opa produced and the sha256 (hex) that names it. */
export interface BuiltBundle {
  bundle: Buffer;
  digest: string;
}

/**
 * Builds an organization's WebAssembly bundle at publish time (never on the request path):
 * the Rego library, one module per policy and data.json ({"mandate": {"graph",
 * "graph_index"}}) compiled by `opa build -t wasm -e mandate/main/decision`. The same
 * inputs give the same bytes, so the digest identifies the bundle's content. Throws
 * PolicySourceError for a bad key or package line, PolicyCompileError with opa's located
 * errors for anything opa refuses.
 */
export async function buildBundle(request: BundleRequest): Promise<BuiltBundle> {
  const keys = new Set<string>();
  for (const policy of request.policies) {
    if (keys.has(policy.policy_key)) {
      throw new PolicySourceError([{ message: `policy "${policy.policy_key}" appears twice in one bundle` }]);
    }
    keys.add(policy.policy_key);
    assertRegoPackage(policy.policy_key, policy.rego);
  }
  const data =
    request.graph === null
      ? {}
      : { mandate: { graph: request.graph, graph_index: indexGraph(request.graph, request.graph_version) } };
  const bundle = await withWorkspace(request.policies, data, compile);
  return { bundle, digest: createHash("sha256").update(bundle).digest("hex") };
}

/**
 * Compiles one hand-written module together with the library, exactly as a bundle build
 * would, so a policy version is refused with line and column when it is authored rather
 * than when it is published. Resolves when opa accepts it; throws PolicySourceError or
 * PolicyCompileError otherwise.
 */
export async function checkRegoModule(policyKey: string, rego: string): Promise<void> {
  if (!isPolicyKey(policyKey)) {
    throw new PolicySourceError([{ message: `policy key ${JSON.stringify(policyKey)} must match ${POLICY_KEY_PATTERN.source}, at most 63 characters` }]);
  }
  assertRegoPackage(policyKey, rego);
  await withWorkspace([{ policy_key: policyKey, version: 0, rego }], {}, compile);
}

// A temporary folder holding capabilities.json and bundle/ (library/, policies/, data.json);
// opa runs inside bundle/, so the paths it reports are relative to it.
async function withWorkspace<T>(policies: readonly BundlePolicy[], data: unknown, work: (root: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), "mandate-bundle-"));
  try {
    const root = join(dir, "bundle");
    await mkdir(join(root, "library"), { recursive: true });
    await mkdir(join(root, "policies"));
    await writeFile(join(dir, "capabilities.json"), await wasmCapabilities());
    for (const { name, rego } of await libraryModules()) await writeFile(join(root, "library", name), rego);
    for (const p of policies) await writeFile(join(root, "policies", `${p.policy_key}.rego`), p.rego);
    await writeFile(join(root, "data.json"), JSON.stringify(data));
    const handwritten = policies.filter((p) => p.handwritten).map((p) => p.policy_key);
    if (handwritten.length > 0) await writeFile(join(root, ".manifest"), JSON.stringify({ metadata: { [HANDWRITTEN_METADATA]: handwritten } }));
    return await work(root);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

interface OpaJsonError {
  message: string;
  code?: string;
  location?: { file?: string; row?: number; col?: number };
}

// Builds the workspace into a WebAssembly bundle. opa build reports errors only as text
// without columns, so on failure the located errors come from `opa check --format json`
// over the same files; the build's text is the fallback for anything only the
// WebAssembly compiler rejects.
async function compile(root: string): Promise<Buffer> {
  const built = await runOpa(
    ["build", "--bundle", "--target", "wasm", "--entrypoint", ENTRYPOINT, "--capabilities", "../capabilities.json", "--output", "../bundle.tar.gz", "."],
    { cwd: root },
  );
  if (built.code === 0) return readFile(join(root, "..", "bundle.tar.gz"));
  const checked = await runOpa(["check", "--bundle", "--format", "json", "--capabilities", "../capabilities.json", "."], { cwd: root });
  throw new PolicyCompileError(checked.code !== 0 ? checkProblems(checked.stderr) : parseOpaText(built.stderr));
}

function checkProblems(stderr: string): CompileProblem[] {
  let errors: OpaJsonError[];
  try {
    errors = (JSON.parse(stderr) as { errors: OpaJsonError[] }).errors;
  } catch {
    return parseOpaText(stderr);
  }
  return errors.map((e) =>
    locate(e.location?.file, {
      // opa reports 0 for a position it does not know (e.g. at the end of the file).
      ...(e.location?.row ? { line: e.location.row } : {}),
      ...(e.location?.col ? { column: e.location.col } : {}),
      ...(e.code ? { code: e.code } : {}),
      message: e.message,
    }),
  );
}

// Parses opa's text errors: "<file>:<line>: <code>: <message>" per error.
function parseOpaText(text: string): CompileProblem[] {
  const problems: CompileProblem[] = [];
  for (const line of text.split("\n")) {
    const m = /([^\s:]+\.rego):(\d+): (\w+): (.*)$/.exec(line);
    if (m) problems.push(locate(m[1], { line: Number(m[2]), code: m[3]!, message: m[4]! }));
  }
  return problems.length > 0 ? problems : [{ message: text.trim().replace(/^error: /, "") }];
}

function locate(file: string | undefined, problem: Omit<CompileProblem, "file" | "policy_key">): CompileProblem {
  if (file === undefined) return problem;
  const normalised = file.replace(/^\.?\//, "");
  const key = /^policies\/([a-z][a-z0-9_-]*)\.rego$/.exec(normalised)?.[1];
  return { file: normalised, ...(key ? { policy_key: key } : {}), ...problem };
}
