import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import YAML from "yaml";
import { PolicySourceError } from "../policy/errors.js";
import { validateGraph } from "../policy/graph-checks.js";
import { indexGraph } from "../policy/graph-index.js";
import { libraryModules, runOpa } from "../policy/opa.js";
import { compileRules } from "../policy/rules.js";
import { CliError, EXIT_FAILED, EXIT_OK, type CliCommand } from "./command.js";

const usage = `usage: mandate policy test DIR

Runs a policy author's Rego tests against the same library every bundle is built
from. DIR may hold:
  <policy_key>.rules.yaml | .rules.json   runtime policy documents (compiled to Rego
                                         exactly as publishing compiles them)
  *.rego                                 hand-written policy modules and *_test.rego tests
  graph.yaml | graph.json                an authority graph fixture in the graph's JSON form
                                         (docs/architecture.md, Policies), loaded as
                                         data.mandate.graph like a published one
Exit status 0 when every test passes, 1 when one fails, 2 on bad input.`;

const RULES = /^([a-z][a-z0-9_-]*)\.rules\.(ya?ml|json)$/;

function parse(name: string, text: string): unknown {
  try {
    return name.endsWith(".json") ? JSON.parse(text) : YAML.parse(text);
  } catch (err) {
    throw new CliError(`${name}: ${(err as Error).message}`);
  }
}

/** Every principal reference a graph fixture mentions: offline there is no principal table to check against. */
function refsOf(graph: unknown): Set<string> {
  const refs = new Set<string>();
  const g = (graph ?? {}) as Record<string, { principal?: unknown; holder?: unknown; delegate?: unknown }[] | undefined>;
  for (const list of [g.memberships, g.limits, g.delegations]) {
    for (const row of list ?? []) {
      for (const v of [row.principal, row.holder, row.delegate]) if (typeof v === "string" && !v.startsWith("role:")) refs.add(v);
    }
  }
  return refs;
}

/** `mandate policy test DIR`: opa test over the library plus an author's policies, tests and graph fixture. */
export const policyCommand: CliCommand = {
  name: "policy",
  summary: "test runtime policies against the library (opa test)",
  usage,
  async run(args, io) {
    if (args.length !== 2 || args[0] !== "test") throw new CliError("expected: policy test DIR", true);
    const dir = args[1]!;
    const names = await readdir(dir).catch(() => {
      throw new CliError(`cannot read ${dir}`);
    });
    const work = await mkdtemp(join(tmpdir(), "mandate-policy-test-"));
    try {
      await mkdir(join(work, "library"));
      await mkdir(join(work, "policies"));
      for (const { name, rego } of await libraryModules()) await writeFile(join(work, "library", name), rego);
      for (const name of names.sort()) {
        const text = await readFile(join(dir, name), "utf8");
        const rules = RULES.exec(name);
        if (rules) {
          try {
            await writeFile(join(work, "policies", `${rules[1]}.rego`), compileRules(rules[1]!, parse(name, text)));
          } catch (err) {
            if (!(err instanceof PolicySourceError)) throw err;
            throw new CliError(`${name}: ${err.errors.map((e) => `${e.field ?? ""}${e.line ? ` line ${e.line}` : ""}: ${e.message}`).join("; ")}`);
          }
        } else if (name.endsWith(".rego")) {
          await writeFile(join(work, "policies", basename(name)), text);
        } else if (/^graph\.(ya?ml|json)$/.test(name)) {
          const raw = parse(name, text);
          const graph = validateGraph(raw, refsOf(raw));
          if (!graph.ok) throw new CliError(`${name}: ${graph.errors.map((e) => `${e.path}: ${e.message}`).join("; ")}`);
          await writeFile(join(work, "data.json"), JSON.stringify({ mandate: { graph: graph.graph, graph_index: indexGraph(graph.graph, 0) } }));
        }
      }
      const result = await runOpa(["test", "--fail-on-empty", "-v", work]);
      for (const line of (result.stdout + result.stderr).split("\n")) if (line) io.out(line.replaceAll(`${work}/`, ""));
      return result.code === 0 ? EXIT_OK : EXIT_FAILED;
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  },
};
