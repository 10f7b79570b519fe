import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { performance } from "node:perf_hooks";
import { loadPolicy } from "@open-policy-agent/opa-wasm";
import { buildBundle } from "../policy/build.js";
import { PolicyCompileError, type CompileProblem } from "../policy/errors.js";
import { libraryModules, runOpa, wasmCapabilities } from "../policy/opa.js";
import { readTarGz } from "../policy/tar.js";
import { CliError, type CliIo, EXIT_FAILED, EXIT_OK, parseCommandLine } from "./command.js";
import { coverageReport, EXPLAIN_PROBE, probedEntries, type CoverageReport, type OpaCoverage } from "./policy-coverage.js";
import { readPolicyDir, type PolicyDir } from "./policy-dir.js";
import { junitXml, type TestCaseResult } from "./policy-junit.js";

/** Usage of `mandate policy test`. */
export const testUsage = `mandate policy test DIR [--run PATTERN] [--coverage] [--junit FILE] [--graph-version N]

Builds DIR's policies into the WebAssembly bundle publishing would build (same
library, same built-in allowlist, same compile errors), then runs DIR's
*_test.rego tests compiled to WebAssembly against that bundle's modules and data.
  --run PATTERN     only tests whose name (data.<package>.<rule>) matches the
                    regular expression
  --coverage        which rules of DIR's rules documents fired and which conditions
                    held or stopped their rule, by file line (from each rule's
                    explanation, as the dry run reports it), and line coverage of
                    hand-written Rego
  --junit FILE      also write the results as JUnit XML
  --graph-version N the graph version the bundle is indexed as (default 1)
Exit status 0 when every test passes, 1 when one fails (or the bundle does not
build, or no test ran), 2 on bad input.`;

/** `mandate policy test DIR …` */
export async function runPolicyTest(args: readonly string[], io: CliIo): Promise<number> {
  const options = parseOptions(args);
  const dir = await readPolicyDir(options.dir);
  for (const note of dir.notes) io.err(`note: ${note}`);
  if (dir.tests.length === 0) throw new CliError(`${options.dir}: no *_test.rego file`);

  // work/ holds the capabilities and the compiled tests; work/bundle/ is the tree opa reads.
  const work = await mkdtemp(join(tmpdir(), "mandate-policy-test-"));
  const root = join(work, "bundle");
  try {
    const paths = pathMap(dir);
    const built = await buildOrFail(dir, options.graphVersion, paths);
    if ("failure" in built) {
      io.out("the bundle does not build; publishing would refuse it with:");
      for (const line of built.failure.message.split("\n")) io.out(`  ${line}`);
      await writeJunit(options.junit, [built.failure]);
      return EXIT_FAILED;
    }
    io.out(`bundle sha256 ${built.digest}, as publishing would build it`);
    // The tests run against the modules and data inside the bundle publishing would build. opa
    // build packs them reformatted (comments dropped), so where the same module exists as
    // written (the author's policies, the library) that text is used instead: same rules,
    // and line numbers in messages and coverage that point into the files people read.
    const originals = new Map<string, string>([
      ...dir.policies.map((p): [string, string] => [`policies/${p.policy_key}.rego`, p.rego]),
      ...(await libraryModules()).map(({ name, rego }): [string, string] => [`library/${name}`, rego]),
    ]);
    for (const [name, bytes] of readTarGz(built.bundle)) {
      if (!name.endsWith(".rego") && name !== "data.json") continue;
      await mkdir(join(root, dirname(name)), { recursive: true });
      await writeFile(join(root, name), originals.get(name) ?? bytes);
    }
    await mkdir(join(root, "tests"), { recursive: true });
    for (const t of dir.tests) await writeFile(join(root, "tests", basename(t.file)), t.rego);

    const all = await discoverTests(root, dir, paths);
    const selected = options.run ? all.filter((t) => options.run!.test(t.name)) : all;
    const cases = await runTests(work, selected.filter((t) => !t.todo), paths);
    cases.push(...selected.filter((t) => t.todo).map((t): TestCaseResult => ({ ...t, status: "skipped", seconds: 0 })));
    cases.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));

    for (const c of cases) {
      io.out(`${c.file}:${c.line}: ${c.name}: ${c.status === "passed" ? "PASS" : c.status === "skipped" ? "SKIPPED" : c.status === "error" ? "ERROR" : "FAIL"}`);
      for (const line of c.message?.split("\n") ?? []) io.out(`  ${line}`);
    }
    const failed = cases.filter((c) => c.status === "failed" || c.status === "error").length;
    const ran = cases.filter((c) => c.status !== "skipped").length;
    io.out("-".repeat(80));
    if (ran === 0) io.out(options.run ? `no test matches --run ${options.run.source}` : "no test ran");
    else io.out(failed === 0 ? `PASS: ${ran}/${ran}` : `FAIL: ${failed}/${ran}`);

    if (options.coverage) {
      const report = await coverageOf(root, selected.filter((t) => !t.todo), dir);
      for (const line of report.lines) io.out(line);
    }
    await writeJunit(options.junit, cases);
    return failed === 0 && ran > 0 ? EXIT_OK : EXIT_FAILED;
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

interface Options {
  dir: string;
  run?: RegExp;
  coverage: boolean;
  junit?: string;
  graphVersion: number;
}

function parseOptions(args: readonly string[]): Options {
  const { values, positionals } = parseCommandLine(args, { run: { type: "string" }, coverage: { type: "boolean" }, junit: { type: "string" }, "graph-version": { type: "string" } });
  if (positionals.length !== 1) throw new CliError("expected: policy test DIR", true);
  let run: RegExp | undefined;
  if (values.run !== undefined) {
    try {
      run = new RegExp(values.run);
    } catch (err) {
      throw new CliError(`--run: ${(err as Error).message}`);
    }
  }
  return {
    dir: positionals[0]!,
    ...(run ? { run } : {}),
    coverage: values.coverage ?? false,
    ...(values.junit !== undefined ? { junit: values.junit } : {}),
    graphVersion: graphVersionOption(values["graph-version"]),
  };
}

/** `--graph-version N`: a positive integer, 1 by default (the first version an organization publishes). */
export function graphVersionOption(value: string | undefined): number {
  if (value === undefined) return 1;
  if (!/^[1-9][0-9]{0,8}$/.test(value)) throw new CliError(`--graph-version must be a positive integer (got ${JSON.stringify(value)})`);
  return Number(value);
}

/** Bundle paths (policies/<key>.rego, tests/<file>, library/<file>) as the author knows them. */
export type PathMap = (bundlePath: string) => string;

/** Maps bundle paths back to DIR's files. */
export function pathMap(dir: PolicyDir): PathMap {
  const byKey = new Map(dir.policies.map((p) => [p.policy_key, p]));
  const tests = new Map(dir.tests.map((t) => [basename(t.file), t.file]));
  return (path) => {
    const normalised = path.replace(/^\.?\//, "");
    const policy = /^policies\/(.+)\.rego$/.exec(normalised)?.[1];
    if (policy !== undefined) {
      const p = byKey.get(policy);
      if (p?.file === null) return `${normalised} (the starter policy)`;
      if (p?.rulesText !== undefined) return `${p.file} (compiled to ${normalised})`;
      if (p) return p.file;
    }
    const test = /^tests\/(.+)$/.exec(normalised)?.[1];
    if (test !== undefined) return tests.get(test) ?? normalised;
    if (normalised.startsWith("library/")) return `${normalised} (Mandate's policy library)`;
    return normalised;
  };
}

/** Where a compile problem is, in the author's terms: `file:line:column: code: message`, as publishing reports it. */
export function describeProblem(problem: CompileProblem, paths: PathMap): string {
  const where = problem.file === undefined ? "" : `${paths(problem.file)}${problem.line ? `:${problem.line}${problem.column ? `:${problem.column}` : ""}` : ""}: `;
  return `${where}${problem.code ? `${problem.code}: ` : ""}${problem.message}`;
}

/**
 * Builds DIR's bundle with the publish-time builder. A Rego syntax error is bad input (exit 2);
 * anything else opa refuses (an undefined or disallowed built-in, a type error) is what
 * publishing would refuse, reported as a failing test with publishing's messages.
 */
export async function buildOrFail(dir: PolicyDir, graphVersion: number, paths: PathMap): Promise<{ bundle: Buffer; digest: string } | { failure: TestCaseResult & { message: string } }> {
  try {
    return await buildBundle({
      policies: dir.policies,
      graph: dir.graph,
      graph_version: dir.graph === null ? null : graphVersion,
    });
  } catch (err) {
    if (!(err instanceof PolicyCompileError)) throw err;
    const messages = err.errors.map((e) => describeProblem(e, paths));
    if (err.errors.some((e) => e.code === "rego_parse_error")) throw new CliError(messages.join("\n"));
    return {
      failure: {
        name: "bundle.build",
        suite: "bundle",
        file: err.errors[0]?.file ? paths(err.errors[0].file) : "",
        line: err.errors[0]?.line ?? 0,
        status: "failed",
        seconds: 0,
        message: messages.join("\n"),
      },
    };
  }
}

interface DiscoveredTest {
  /** data.<package>.<rule>, as opa test names it. */
  name: string;
  suite: string;
  /** The WebAssembly entrypoint: the rule's path without `data.`, slash-separated. */
  entrypoint: string;
  file: string;
  line: number;
  todo: boolean;
}

interface ParsedModule {
  package: { path: { value: string }[] };
  rules?: { head: { name?: string; ref?: { value: unknown }[]; args?: unknown[] }; location?: { row: number } }[];
}

// Test rules (test_*, and todo_test_* to report as skipped) of each test module, found by opa's parser.
async function discoverTests(work: string, dir: PolicyDir, paths: PathMap): Promise<DiscoveredTest[]> {
  const found = new Map<string, DiscoveredTest>();
  for (const t of dir.tests) {
    const parsed = await runOpa(["parse", "--format", "json", "--json-include", "locations", join("tests", basename(t.file))], { cwd: work });
    if (parsed.code !== 0) throw new CliError(parseErrors(`${parsed.stdout}${parsed.stderr}`, paths));
    const module = JSON.parse(parsed.stdout) as ParsedModule;
    const pkg = module.package.path.slice(1).map((term) => String(term.value));
    for (const rule of module.rules ?? []) {
      const name = rule.head.name ?? String(rule.head.ref?.[0]?.value ?? "");
      const todo = name.startsWith("todo_test_");
      if (!(name.startsWith("test_") || todo) || (rule.head.args?.length ?? 0) > 0 || (rule.head.ref?.length ?? 1) > 1) continue;
      const full = `data.${[...pkg, name].join(".")}`;
      if (found.has(full)) continue; // a test written as several rules is one test
      found.set(full, { name: full, suite: `data.${pkg.join(".")}`, entrypoint: [...pkg, name].join("/"), file: t.file, line: rule.location?.row ?? 0, todo });
    }
  }
  return [...found.values()];
}

// opa parse reports errors as JSON ({"errors": [{message, code, location}]}) under --format json.
function parseErrors(output: string, paths: PathMap): string {
  try {
    const { errors } = JSON.parse(output) as { errors: { message: string; code?: string; location?: { file?: string; row?: number; col?: number } }[] };
    return errors
      .map((e) => describeProblem({ message: e.message, ...(e.code ? { code: e.code } : {}), ...(e.location?.file ? { file: e.location.file } : {}), ...(e.location?.row ? { line: e.location.row } : {}), ...(e.location?.col ? { column: e.location.col } : {}) }, paths))
      .join("\n");
  } catch {
    return rewritePaths(output.trim(), paths);
  }
}

function rewritePaths(text: string, paths: PathMap): string {
  return text.replace(/(?:\.\/)?((?:tests|policies|library)\/[^\s:]+)/g, (_, path: string) => paths(path));
}

// Compiles the tests to WebAssembly with the publish-time capabilities and evaluates each
// entrypoint with the same SDK the service evaluates bundles with.
async function runTests(work: string, tests: DiscoveredTest[], paths: PathMap): Promise<TestCaseResult[]> {
  if (tests.length === 0) return [];
  await writeFile(join(work, "capabilities.json"), await wasmCapabilities());
  const built = await runOpa(
    [
      "build", "--bundle", "--target", "wasm", "--capabilities", "../capabilities.json",
      ...tests.flatMap((t) => ["--entrypoint", t.entrypoint]),
      "--output", "../tests.tar.gz", ".",
    ],
    { cwd: join(work, "bundle") },
  );
  if (built.code !== 0) {
    const message = `the tests do not compile to WebAssembly with the built-ins publishing allows:\n${rewritePaths(`${built.stdout}${built.stderr}`.trim(), paths)}`;
    return tests.map((t) => ({ ...t, status: "error", seconds: 0, message }));
  }
  const files = readTarGz(await readFile(join(work, "tests.tar.gz")));
  const policy = await loadPolicy(files.get("policy.wasm")!);
  policy.setData(JSON.parse(files.get("data.json")!.toString("utf8")) as object);
  return tests.map((t): TestCaseResult => {
    const start = performance.now();
    try {
      const result = policy.evaluate({}, t.entrypoint) as { result: unknown }[];
      const passed = result.length > 0 && result.every((r) => r.result === true);
      return { ...t, status: passed ? "passed" : "failed", seconds: (performance.now() - start) / 1000, ...(passed ? {} : { message: "the test's rule is undefined or false" }) };
    } catch (err) {
      return { ...t, status: "error", seconds: (performance.now() - start) / 1000, message: rewritePaths((err as Error).message, paths) };
    }
  });
}

// Coverage needs OPA's evaluator (WebAssembly reports none): the selected tests are evaluated
// once more with `opa eval --coverage` over the same files plus EXPLAIN_PROBE, each inside a
// comprehension so a failing test does not stop the others.
async function coverageOf(work: string, tests: DiscoveredTest[], dir: PolicyDir): Promise<CoverageReport> {
  await writeFile(join(work, "coverage_probe.rego"), EXPLAIN_PROBE);
  const refs = tests.map((t) => `[x | x := data${t.entrypoint.split("/").map((s) => `[${JSON.stringify(s)}]`).join("")}]`);
  const query = `_ := [${refs.join(", ")}]`;
  const evaluated = await runOpa(["eval", "--format", "json", "--coverage", "--data", ".", query], { cwd: work });
  if (evaluated.code !== 0) {
    // Most often a test that errors, which is reported above; opa's own words otherwise.
    return { lines: ["", `coverage: not measured: ${(evaluated.stdout + evaluated.stderr).trim().split("\n")[0] ?? ""}`] };
  }
  const { coverage } = JSON.parse(evaluated.stdout) as { coverage: OpaCoverage };
  return coverageReport(dir.policies, coverage, probedEntries(evaluated.stderr));
}

async function writeJunit(file: string | undefined, cases: TestCaseResult[]): Promise<void> {
  if (file === undefined) return;
  try {
    await writeFile(file, junitXml(cases));
  } catch (err) {
    throw new CliError(`--junit ${file}: ${(err as Error).message}`);
  }
}
