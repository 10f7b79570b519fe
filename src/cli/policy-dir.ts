import { readdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import YAML from "yaml";
import type { BundlePolicy } from "../policy/build.js";
import { PolicySourceError } from "../policy/errors.js";
import { GOVERNANCE_COLUMNS, parseGovernanceDocument } from "../policy/governance-import.js";
import { validateGraph } from "../policy/graph-checks.js";
import { generateGraph } from "../policy/graph-generation.js";
import type { AuthorityGraph, GovernanceDocument, GovernanceFormat, GovernanceKind } from "../policy/graph-types.js";
import { parseCsv } from "../policy/csv.js";
import { assertRegoPackage, compileRules, STARTER_POLICY_KEY, STARTER_RULES } from "../policy/rules.js";
import { CliError } from "./command.js";

/** A runtime policy found in DIR, with the file it came from so problems are reported there. */
export interface DirPolicy extends BundlePolicy {
  /** The author's path (DIR joined with the file name), or null for the starter policy added as the service adds it. */
  file: string | null;
  /** The rules document's text, when the policy was compiled from one. */
  rulesText?: string;
}

/** A Rego test module (`*_test.rego`). */
export interface DirTest {
  file: string;
  rego: string;
}

/** Everything `policy test` and `policy build` read from a policy directory. */
export interface PolicyDir {
  policies: DirPolicy[];
  tests: DirTest[];
  graph: AuthorityGraph | null;
  /** What the author should know but that does not stop the run (files skipped, references unchecked, generation warnings). */
  notes: string[];
}

const KINDS = Object.keys(GOVERNANCE_COLUMNS) as GovernanceKind[];
const RULES_FILE = /^([a-z][a-z0-9_-]*)\.rules\.(ya?ml|json)$/;
const GRAPH_FILE = /^graph\.(ya?ml|json)$/;
const PRINCIPALS_FILE = /^principals\.(csv|ya?ml|json)$/;
// A governance document named after its kind, optionally with a name of its own: approval_matrix.emea.csv.
const KIND_FILE = new RegExp(`^(${KINDS.join("|")})(\\.[^.]+)*\\.(csv|ya?ml|json)$`);

/**
 * Reads a policy directory the way the service would receive its contents: rules documents
 * compiled as publishing compiles them, hand-written modules checked for their package,
 * governance documents turned into a graph by the service's own generation (or a graph
 * fixture validated as a directly authored graph), and the `starter` policy every
 * organization has unless DIR defines its own. Throws CliError naming the author's file
 * for anything unreadable or invalid.
 */
export async function readPolicyDir(dir: string): Promise<PolicyDir> {
  const info = await stat(dir).catch(() => null);
  if (!info?.isDirectory()) throw new CliError(`${dir}: no such directory`);
  const names = (await readdir(dir)).sort();
  const at = (name: string) => join(dir, name);
  const policies: DirPolicy[] = [];
  const tests: DirTest[] = [];
  const notes: string[] = [];
  const documents: { file: string; doc: GovernanceDocument }[] = [];
  let graphFile: { file: string; text: string } | undefined;
  let principals: Set<string> | undefined;

  for (const name of names) {
    const file = at(name);
    if (!(await stat(file)).isFile()) {
      notes.push(`${file}: skipped (a directory; only DIR's own files are read)`);
      continue;
    }
    const text = await readFile(file, "utf8");
    const rules = RULES_FILE.exec(name);
    const kind = KIND_FILE.exec(name)?.[1] as GovernanceKind | undefined;
    if (rules) {
      policies.push({ policy_key: rules[1]!, version: 1, rego: compile(file, () => compileRules(rules[1]!, text)), file, rulesText: text });
    } else if (name.endsWith("_test.rego")) {
      tests.push({ file, rego: text });
    } else if (name.endsWith(".rego")) {
      const key = name.slice(0, -".rego".length);
      compile(file, () => assertRegoPackage(key, text));
      policies.push({ policy_key: key, version: 1, rego: text, handwritten: true, file });
    } else if (GRAPH_FILE.test(name)) {
      graphFile = { file, text };
    } else if (PRINCIPALS_FILE.test(name)) {
      principals = readPrincipals(file, text);
    } else if (kind) {
      documents.push({ file, doc: { document_id: file, name, kind, format: formatOf(name), content: text } });
    } else if (name.endsWith(".csv")) {
      const recognised = kindByHeader(text);
      if (!recognised) {
        throw new CliError(
          `${file}: not a governance document: its header is none of ${KINDS.map((k) => `"${GOVERNANCE_COLUMNS[k].join(",")}" (${k})`).join(", ")}, and its name does not start with a kind`,
        );
      }
      documents.push({ file, doc: { document_id: file, name, kind: recognised, format: "csv", content: text } });
    } else if (!name.endsWith(".md")) {
      notes.push(`${file}: skipped (not a rules document, Rego module, graph, principals file or governance document)`);
    }
  }

  const keys = new Map<string, string>();
  for (const p of policies) {
    const other = keys.get(p.policy_key);
    if (other) throw new CliError(`${p.file}: policy "${p.policy_key}" is also defined by ${other}`);
    keys.set(p.policy_key, p.file!);
  }
  if (!keys.has(STARTER_POLICY_KEY)) {
    policies.push({ policy_key: STARTER_POLICY_KEY, version: 1, rego: compileRules(STARTER_POLICY_KEY, STARTER_RULES), file: null });
  }
  policies.sort((a, b) => (a.policy_key < b.policy_key ? -1 : a.policy_key > b.policy_key ? 1 : 0));

  if (graphFile && documents.length > 0) {
    throw new CliError(`${graphFile.file}: a graph fixture and governance documents (${documents.map((d) => d.file).join(", ")}) both describe the graph; keep one`);
  }
  let graph: AuthorityGraph | null = null;
  if (graphFile) graph = readGraph(graphFile.file, graphFile.text, principals, notes);
  else if (documents.length > 0) graph = generate(documents, principals, notes);
  else if (principals) notes.push("principals file read, but there is no graph to check it against");
  return { policies, tests, graph, notes };
}

function formatOf(name: string): GovernanceFormat {
  return name.endsWith(".csv") ? "csv" : name.endsWith(".json") ? "json" : "yaml";
}

// A CSV whose first record is exactly one kind's header.
function kindByHeader(text: string): GovernanceKind | undefined {
  const parsed = parseCsv(text);
  const header = parsed.ok ? parsed.records[0]?.fields.map((f) => f.trim()).join(",") : undefined;
  return KINDS.find((k) => GOVERNANCE_COLUMNS[k].join(",") === header);
}

function compile<T>(file: string, run: () => T): T {
  try {
    return run();
  } catch (err) {
    if (!(err instanceof PolicySourceError)) throw err;
    throw new CliError(err.errors.map((e) => `${file}${e.line ? `:${e.line}${e.column ? `:${e.column}` : ""}` : ""}: ${e.field ? `${e.field}: ` : ""}${e.message}`).join("\n"));
  }
}

function parseData(file: string, text: string): unknown {
  try {
    return file.endsWith(".json") ? JSON.parse(text) : YAML.parse(text);
  } catch (err) {
    const pos = (err as { linePos?: { line: number; col: number }[] }).linePos?.[0];
    throw new CliError(`${file}${pos ? `:${pos.line}:${pos.col}` : ""}: ${(err as Error).message.split("\n")[0]}`);
  }
}

/**
 * The principals the service would know: `external_ref` of each entry of a list (YAML/JSON
 * objects, or CSV rows under a header naming `external_ref`; other columns such as
 * display_name and kind are allowed and unused).
 */
function readPrincipals(file: string, text: string): Set<string> {
  let rows: unknown[];
  if (file.endsWith(".csv")) {
    const parsed = parseCsv(text);
    if (!parsed.ok) throw new CliError(`${file}:${parsed.line}: ${parsed.message}`);
    const [header, ...data] = parsed.records;
    const names = header?.fields.map((f) => f.trim()) ?? [];
    if (!names.includes("external_ref")) throw new CliError(`${file}:1: the header must name an external_ref column (found "${names.join(",")}")`);
    rows = data.filter((r) => r.fields.some((f) => f.trim() !== "")).map((r) => Object.fromEntries(names.map((n, i) => [n, r.fields[i]?.trim()])));
  } else {
    const value = parseData(file, text);
    if (!Array.isArray(value)) throw new CliError(`${file}: must be a list of principals ({external_ref, display_name?, kind?})`);
    rows = value;
  }
  const refs = new Set<string>();
  rows.forEach((row, i) => {
    const ref = (row as { external_ref?: unknown } | null)?.external_ref;
    if (typeof ref !== "string" || ref === "") throw new CliError(`${file}: entry ${i + 1} has no external_ref`);
    refs.add(ref);
  });
  return refs;
}

/** Every principal reference a graph or its documents mention: offline, without a principals file, there is no table to check them against. */
function mentionedRefs(rows: readonly Record<string, unknown>[], fields: readonly string[]): Set<string> {
  const refs = new Set<string>();
  for (const row of rows) {
    for (const f of fields) {
      const v = row[f];
      if (typeof v === "string" && v !== "" && !v.startsWith("role:")) refs.add(v);
    }
  }
  return refs;
}

function readGraph(file: string, text: string, principals: Set<string> | undefined, notes: string[]): AuthorityGraph {
  const raw = parseData(file, text);
  let known = principals;
  if (!known) {
    const g = (raw ?? {}) as Record<string, Record<string, unknown>[] | undefined>;
    known = mentionedRefs([...(g.memberships ?? []), ...(g.limits ?? []), ...(g.delegations ?? [])], ["principal", "holder", "delegate"]);
    notes.push(`${file}: no principals file, so principal references are not checked`);
  }
  const result = validateGraph(raw, known);
  if (!result.ok) throw new CliError(result.errors.map((e) => `${file}: ${e.path}: ${e.message}`).join("\n"));
  return result.graph;
}

function generate(documents: { file: string; doc: GovernanceDocument }[], principals: Set<string> | undefined, notes: string[]): AuthorityGraph {
  let known = principals;
  if (!known) {
    known = new Set();
    for (const { doc } of documents) {
      const parsed = parseGovernanceDocument(doc);
      if (!parsed.ok) continue; // generation reports it below, located
      for (const ref of mentionedRefs(parsed.rows as unknown as Record<string, unknown>[], ["principal", "holder", "delegate"])) known.add(ref);
    }
    notes.push("no principals file, so principal references in the governance documents are not checked");
  }
  const result = generateGraph(
    documents.map((d) => d.doc),
    known,
  );
  if (!result.ok) {
    throw new CliError(
      result.errors
        .map((e) => `${e.document_id}${e.line !== null ? `:${e.line}${e.column ? `:${e.column}` : ""}` : ""}: ${e.field ? `${e.field}: ` : ""}${e.message}`)
        .join("\n"),
    );
  }
  for (const w of result.warnings) notes.push(`${w.document_id}${w.line !== null ? `:${w.line}` : ""}: warning: ${w.message}`);
  return result.graph;
}
