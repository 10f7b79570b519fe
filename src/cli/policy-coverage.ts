import { parseText } from "../policy/source.js";
import type { DirPolicy } from "./policy-dir.js";

/** Coverage as `policy test --coverage` prints it, one line each. */
export interface CoverageReport {
  lines: string[];
}

type Ranges = { start: { row: number }; end: { row: number } }[] | undefined;

/** The part of opa's coverage report read here: covered and not-covered ranges per file. */
export interface OpaCoverage {
  files?: Record<string, { covered?: Ranges; not_covered?: Ranges }>;
}

/**
 * One entry of a compiled rules document's `explain` (src/policy/rules-rego.ts, the dry run's
 * per-rule report): whether the rule fired for one input and, when it did not (or resolved to
 * invalid_policy_input), the condition that failed (or could not be evaluated).
 */
export interface ExplainEntry {
  policy_key: string;
  rule_id: string;
  fired: boolean;
  reason: string | null;
  failed_condition: { field: string; operator: string } | null;
  line: number;
}

/**
 * A module added to the coverage run only (never to a bundle): a second, always-false
 * definition of the decision, so that each time a test evaluates the decision it prints the
 * covering policies' `explain` for that test's input. Tests build their inputs inside Rego,
 * so this is where the inputs can be seen.
 */
export const EXPLAIN_PROBE = `package mandate.main

decision := "coverage probe" if {
	print(json.marshal([e | some key in covering; some e in data.mandate.policies[key].explain]))
	false
}
`;

/** The explain entries the probe printed (one JSON array per line of opa's stderr). */
export function probedEntries(stderr: string): ExplainEntry[] {
  return stderr.split("\n").flatMap((line) => {
    if (!line.startsWith("[")) return [];
    try {
      return JSON.parse(line) as ExplainEntry[];
    } catch {
      return [];
    }
  });
}

/**
 * Coverage of the rules documents, by their lines, from what `explain` said for every input
 * the tests evaluated: for each rule whether it fired, did not fire or resolved to
 * invalid_policy_input; for each condition whether it held (in a test where its rule fired),
 * was the condition that stopped its rule, or could not be evaluated (field missing or
 * mistyped). A rule counts as exercised once it fired, a condition once it both held and
 * stopped its rule, since a condition that never decides anything in the tests could be
 * deleted without a test noticing. Hand-written modules get OPA's line coverage.
 */
export function coverageReport(policies: readonly DirPolicy[], coverage: OpaCoverage, entries: readonly ExplainEntry[]): CoverageReport {
  const lines: string[] = ["", "coverage:"];
  const rules = { exercised: 0, total: 0 };
  const conditions = { exercised: 0, total: 0 };
  for (const policy of policies) {
    if (policy.file === null) continue;
    if (policy.rulesText === undefined) {
      const file = coverage.files?.[`policies/${policy.policy_key}.rego`];
      const covered = rows(file?.covered);
      const missed = [...rows(file?.not_covered)].filter((r) => !covered.has(r)).sort((a, b) => a - b);
      const total = covered.size + missed.length;
      lines.push(`${policy.file}: ${total === 0 ? 0 : Math.round((covered.size / total) * 100)}% of its lines evaluated${missed.length ? `; never evaluated: lines ${ranges(missed)}` : ""}`);
      continue;
    }
    const parsed = parseText(policy.rulesText);
    if (!parsed.ok) continue; // it compiled, so it parses
    const doc = parsed.value as { fields?: Record<string, unknown>; rules: { id: string; when?: Record<string, Record<string, unknown>> }[] };
    const lineOf = (path: (string | number)[]) => parsed.locate(path)?.line ?? 0;
    const mine = entries.filter((e) => e.policy_key === policy.policy_key);
    const seen = (ruleId: string) => {
      const states = new Set<string>();
      const stopped = new Set<string>();
      const invalid = new Set<string>();
      for (const e of mine.filter((x) => x.rule_id === ruleId)) {
        const isInvalid = e.fired && e.reason === "invalid_policy_input" && e.failed_condition !== null;
        states.add(isInvalid ? "invalid" : e.fired ? "fired" : "not_fired");
        const c = e.failed_condition ? `${e.failed_condition.field} ${e.failed_condition.operator}` : undefined;
        if (c) (isInvalid ? invalid : stopped).add(c);
      }
      return { states, stopped, invalid };
    };
    lines.push(`${policy.file} (policy ${policy.policy_key}):`);
    if (doc.fields && Object.keys(doc.fields).length > 0) {
      const { states, invalid } = seen("fields");
      lines.push(`  ${policy.file}:${lineOf(["fields"])}: declared fields: ${states.has("invalid") ? `missing or mistyped in some test (${[...invalid].join(", ")})` : "always as declared"}`);
    }
    doc.rules.forEach((rule, r) => {
      rules.total++;
      const { states, stopped, invalid } = seen(rule.id);
      if (states.has("fired")) rules.exercised++;
      const said = [
        states.has("fired") ? "fired" : "never fired",
        ...(states.has("not_fired") ? ["did not fire"] : []),
        ...(states.has("invalid") ? ["invalid_policy_input"] : []),
      ];
      lines.push(`  ${policy.file}:${lineOf(["rules", r])}: rule ${rule.id}: ${states.size === 0 ? "never evaluated" : said.join(", ")}`);
      for (const [field, condition] of Object.entries(rule.when ?? {})) {
        for (const [operator, expected] of Object.entries(condition)) {
          conditions.total++;
          const key = `${field} ${operator}`;
          const held = states.has("fired");
          const stop = stopped.has(key);
          if (held && stop) conditions.exercised++;
          const words = [held ? "held" : "never held", stop ? "stopped its rule" : "never stopped its rule", ...(invalid.has(key) ? ["missing or mistyped"] : [])];
          lines.push(`    ${policy.file}:${lineOf(["rules", r, "when", field, operator])}: ${field} ${operator} ${JSON.stringify(expected)}: ${words.join(", ")}`);
        }
      }
    });
  }
  lines.push(`rules fired: ${rules.exercised}/${rules.total}; conditions both held and stopped their rule: ${conditions.exercised}/${conditions.total}`);
  return { lines };
}

function rows(list: Ranges): Set<number> {
  const out = new Set<number>();
  for (const range of list ?? []) for (let r = range.start.row; r <= range.end.row; r++) out.add(r);
  return out;
}

function ranges(sorted: number[]): string {
  const parts: string[] = [];
  for (let i = 0; i < sorted.length; i++) {
    const start = sorted[i]!;
    while (i + 1 < sorted.length && sorted[i + 1] === sorted[i]! + 1) i++;
    parts.push(start === sorted[i] ? `${start}` : `${start}-${sorted[i]}`);
  }
  return parts.join(", ");
}
