import { createHash } from "node:crypto";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PolicyCompileError, PolicySourceError, type CompileProblem } from "./errors.js";
import type { AuthorityGraph } from "./graph-types.js";
import { indexGraph } from "./graph-index.js";
import { INPUT_SCHEMA } from "./input-schema.js";
import { ENTRYPOINT, EXPLAIN_ENTRYPOINT, HANDWRITTEN_METADATA, libraryModules, runOpa, wasmCapabilities } from "./opa.js";
import { assertRegoPackage, isPolicyKey, POLICY_KEY_PATTERN, regoPackage } from "./rules.js";

/** One active runtime policy version, as Rego (rules documents are compiled by compileRules first). */
export interface BundlePolicy {
  policy_key: string;
  version: number;
  rego: string;
  /** Written by hand rather than compiled from a rules document (see HANDWRITTEN_METADATA). */
  handwritten?: boolean;
}

// Defined beside the entrypoints (opa.ts), which the engine reads too, so that the engine does
// not import the builder (the builder imports the input schema, which imports the engine's types).
export { HANDWRITTEN_METADATA } from "./opa.js";

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
 * the Rego library, one module per policy, the dispatch module generated from the policies'
 * constant `actions` (dispatchModule) and data.json ({"mandate": {"graph", "graph_index"}})
 * compiled by `opa build -t wasm -e mandate/bundle/decision -e mandate/bundle/explain`. The
 * same inputs give the same bytes, so the digest identifies the bundle's content. Throws
 * PolicySourceError for a bad key or package line, PolicyCompileError with located errors for
 * anything opa refuses and for a policy whose `actions` is not one constant list of strings.
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
  const schemaChecked = request.policies.some((p) => p.handwritten);
  const bundle = await withWorkspace(request.policies, data, (root) => compile(root, schemaChecked));
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
  await withWorkspace([{ policy_key: policyKey, version: 0, rego, handwritten: true }], {}, (root) => compile(root, true));
}

// A temporary folder holding capabilities.json and bundle/ (library/, policies/, dispatch.rego,
// data.json); opa runs inside bundle/, so the paths it reports are relative to it.
async function withWorkspace<T>(policies: readonly BundlePolicy[], data: unknown, work: (root: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), "mandate-bundle-"));
  try {
    const root = join(dir, "bundle");
    await mkdir(join(root, "library"), { recursive: true });
    await mkdir(join(root, "policies"));
    await writeFile(join(dir, "capabilities.json"), await wasmCapabilities());
    await writeFile(join(dir, "input-schema.json"), JSON.stringify(INPUT_SCHEMA));
    for (const { name, rego } of await libraryModules()) await writeFile(join(root, "library", name), rego);
    for (const p of policies) await writeFile(join(root, "policies", `${p.policy_key}.rego`), p.rego);
    const declared = await Promise.all(policies.map(async (p) => ({ policy_key: p.policy_key, actions: await declaredActions(root, p.policy_key) })));
    await writeFile(join(root, DISPATCH_FILE), dispatchModule(declared));
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
//
// With hand-written policies, `opa check --schema` first types every module's reads of `input`
// against INPUT_SCHEMA (input-schema.ts): a field input never has (`input.intent.amout`) or a
// comparison with a value of another type is refused with its location instead of a rule that
// quietly never fires. Rules documents compile to Rego that reads input only as the schema
// says, so a bundle of those alone skips that run.
async function compile(root: string, schemaChecked: boolean): Promise<Buffer> {
  if (schemaChecked) {
    const checked = await runOpa(
      ["check", "--bundle", "--format", "json", "--schema", "../input-schema.json", "--capabilities", "../capabilities.json", "."],
      { cwd: root },
    );
    if (checked.code !== 0) throw new PolicyCompileError(checkProblems(checked.stderr));
  }
  const built = await runOpa(
    [
      "build", "--bundle", "--target", "wasm", "--entrypoint", ENTRYPOINT, "--entrypoint", EXPLAIN_ENTRYPOINT,
      "--capabilities", "../capabilities.json", "--output", "../bundle.tar.gz", ".",
    ],
    { cwd: root },
  );
  if (built.code === 0) return readFile(join(root, "..", "bundle.tar.gz"));
  throw await locatedErrors(root, built.stderr);
}

// The located errors of a workspace opa refused: `opa check --format json` over the same files,
// else `text` (what the refusing command printed) read as opa's text errors.
async function locatedErrors(root: string, text: string): Promise<PolicyCompileError> {
  const checked = await runOpa(["check", "--bundle", "--format", "json", "--capabilities", "../capabilities.json", "."], { cwd: root });
  return new PolicyCompileError(checked.code !== 0 ? checkProblems(checked.stderr) : parseOpaText(text));
}

/** Where the generated dispatch module sits in a bundle. */
export const DISPATCH_FILE = "dispatch.rego";

/**
 * The bundle's `mandate.dispatch` module, which library/main.rego reaches policies through:
 * `covering` (the keys of the policies declaring the Intent's action, from a constant table) and,
 * for each policy, `results[key]` and `explain[key]` referencing that policy's package by its
 * own path, each only when the policy covers the action. A policy's rules are thus evaluated
 * only for the actions it declares: one failing at run time (say a conflict) fails those
 * actions and no other (docs/architecture.md, Policies). Deterministic: the same policies give
 * the same text.
 */
export function dispatchModule(policies: readonly { policy_key: string; actions: readonly string[] }[]): string {
  const sorted = [...policies].sort((a, b) => compare(a.policy_key, b.policy_key));
  const byAction = new Map<string, string[]>();
  for (const p of sorted) for (const action of new Set(p.actions)) byAction.set(action, [...(byAction.get(action) ?? []), p.policy_key]);
  const table = [...byAction.entries()].sort(([a], [b]) => compare(a, b)).map(([action, keys]) => `\t${JSON.stringify(action)}: ${JSON.stringify(keys)},`);
  const lines = [
    "# Generated by src/policy/build.ts for this bundle from each policy's constant `actions`:",
    "# policies are reached only through here, each only for the actions it declares.",
    "package mandate.dispatch",
    "",
    table.length === 0 ? "by_action := {}" : `by_action := {\n${table.join("\n")}\n}`,
    "",
    "covering := {key | some key in object.get(by_action, input.intent.action, [])}",
    "",
  ];
  if (sorted.length === 0) lines.push("results := {}", "", "explain := {}", "");
  for (const { policy_key: key } of sorted) {
    const path = `data.${regoPackage(key)}`;
    const name = JSON.stringify(key);
    lines.push(`results[${name}] := ${path}.results if ${name} in covering`, "", `explain[${name}] := ${path}.explain if ${name} in covering`, "");
  }
  return lines.join("\n");
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

interface ParsedTerm {
  type: string;
  value: unknown;
}

interface ParsedRule {
  default?: boolean;
  else?: unknown;
  head: { ref?: ParsedTerm[]; key?: unknown; args?: unknown[]; value?: ParsedTerm };
  body?: { terms?: ParsedTerm }[];
  location?: { row?: number; col?: number };
}

/**
 * The actions a policy module declares. They must be one constant list (or set) of strings,
 * `actions := ["pay", "refund"]`, so the dispatch table is known when the bundle is built; a
 * module whose `actions` is computed, partial, defaulted, conditional or missing is refused
 * with the rule's location. A module opa cannot parse is refused with opa's located errors.
 */
async function declaredActions(root: string, policyKey: string): Promise<string[]> {
  const file = `policies/${policyKey}.rego`;
  const parsed = await runOpa(["parse", "--format", "json", "--json-include", "locations", file], { cwd: root });
  if (parsed.code !== 0) throw await locatedErrors(root, parsed.stderr);
  const rules = ((JSON.parse(parsed.stdout) as { rules?: ParsedRule[] }).rules ?? []).filter((r) => r.head.ref?.[0]?.type === "var" && r.head.ref[0].value === "actions");
  const refuse = (rule: ParsedRule | undefined, why: string): never => {
    throw new PolicyCompileError([
      {
        file,
        policy_key: policyKey,
        ...(rule?.location?.row ? { line: rule.location.row } : {}),
        ...(rule?.location?.col ? { column: rule.location.col } : {}),
        code: "mandate_actions_not_constant",
        message: `${why}: a policy declares its actions as one constant list of strings, such as actions := ["vendor_payment"], so that it is evaluated only for them`,
      },
    ]);
  };
  if (rules.length === 0) refuse(undefined, "the policy has no `actions` rule");
  if (rules.length > 1) refuse(rules[1], "`actions` is defined more than once");
  const rule = rules[0]!;
  const { head, body = [] } = rule;
  if (rule.default || rule.else !== undefined || (head.ref?.length ?? 0) !== 1 || head.key !== undefined || (head.args?.length ?? 0) > 0) {
    refuse(rule, "`actions` is not a single complete rule");
  }
  const unconditional = body.length === 1 && body[0]!.terms?.type === "boolean" && body[0]!.terms.value === true;
  if (!unconditional) refuse(rule, "`actions` has a condition");
  const value = head.value;
  const items = (value?.type === "array" || value?.type === "set") && Array.isArray(value.value) ? (value.value as ParsedTerm[]) : null;
  if (!items || !items.every((t) => t.type === "string")) refuse(rule, "`actions` is not a constant list of strings");
  return items!.map((t) => t.value as string);
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
