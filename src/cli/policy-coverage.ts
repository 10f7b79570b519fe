import { parseText } from "../policy/source.js";
import type { DirPolicy } from "./policy-dir.js";
import type { OpaCoverage } from "./policy-test.js";

/** Coverage as `policy test --coverage` prints it, one line each. */
export interface CoverageReport {
  lines: string[];
}

type Ranges = { start: { row: number }; end: { row: number } }[] | undefined;

/**
 * Maps OPA's line coverage of the compiled Rego back to the rules documents: for each rule
 * (at its line in the author's YAML/JSON) whether it fired, did not fire or resolved to
 * invalid_policy_input in some test, and for each condition whether it held, failed or could
 * not be evaluated (field missing or mistyped). A rule counts as exercised once it fired; a
 * condition once it both held and failed, since a condition that always holds in the tests
 * could be deleted without a test noticing. Hand-written modules get OPA's line coverage.
 *
 * It reads the structure src/policy/rules-rego.ts generates: per rule r a value
 * `rule_r` ("fired" / "not_fired" / "invalid") and per condition c a value `condition_r_c`
 * ("holds" / "fails" / "invalid"), each an else-chain whose branch heads sit on lines of their
 * own; OPA marks a branch head covered exactly when that branch produced the value.
 */
export function coverageReport(policies: readonly DirPolicy[], coverage: OpaCoverage): CoverageReport {
  const lines: string[] = ["", "coverage:"];
  const rules = { exercised: 0, total: 0 };
  const conditions = { exercised: 0, total: 0 };
  for (const policy of policies) {
    if (policy.file === null) continue;
    const bundlePath = `policies/${policy.policy_key}.rego`;
    const file = coverage.files?.[bundlePath];
    const covered = rows(file?.covered);
    if (policy.rulesText === undefined) {
      const missed = [...rows(file?.not_covered)].filter((r) => !covered.has(r)).sort((a, b) => a - b);
      const total = covered.size + missed.length;
      lines.push(`${policy.file}: ${total === 0 ? 0 : Math.round((covered.size / total) * 100)}% of its lines evaluated${missed.length ? `; never evaluated: lines ${ranges(missed)}` : ""}`);
      continue;
    }
    const branches = branchLines(policy.rego);
    const seen = (block: string): Set<string> => new Set((branches.get(block) ?? []).filter((b) => covered.has(b.line)).map((b) => b.value));
    const parsed = parseText(policy.rulesText);
    if (!parsed.ok) continue; // it compiled, so it parses
    const doc = parsed.value as { rules: { id: string; when?: Record<string, Record<string, unknown>>; authority?: boolean }[] };
    const lineOf = (path: (string | number)[]) => parsed.locate(path)?.line ?? 0;
    lines.push(`${policy.file} (policy ${policy.policy_key}):`);
    doc.rules.forEach((rule, r) => {
      rules.total++;
      const conds = Object.entries(rule.when ?? {}).flatMap(([field, condition]) =>
        Object.entries(condition).map(([operator, expected]) => ({ field, operator, expected, line: lineOf(["rules", r, "when", field, operator]) })),
      );
      let outcomes: Set<string>;
      if (conds.length === 0 && !rule.authority) {
        // A rule without conditions fires whenever its policy is evaluated.
        const head = branches.get(`results:${r}`)?.[0];
        outcomes = new Set(head && covered.has(head.line) ? ["fired"] : []);
      } else outcomes = seen(`rule_${r}`);
      if (outcomes.has("fired")) rules.exercised++;
      const said = [
        outcomes.has("fired") ? "fired" : "never fired",
        ...(outcomes.has("not_fired") ? ["did not fire"] : []),
        ...(outcomes.has("invalid") ? ["invalid_policy_input"] : []),
      ];
      lines.push(`  ${policy.file}:${lineOf(["rules", r])}: rule ${rule.id}: ${said.join(", ")}`);
      conds.forEach((c, i) => {
        conditions.total++;
        const statuses = seen(`condition_${r}_${i}`);
        const both = statuses.has("holds") && statuses.has("fails");
        if (both) conditions.exercised++;
        const words = [
          statuses.has("holds") ? "held" : "never held",
          statuses.has("fails") ? "failed" : "never failed",
          ...(statuses.has("invalid") ? ["missing or mistyped"] : []),
        ];
        lines.push(`    ${policy.file}:${c.line}: ${c.field} ${c.operator} ${JSON.stringify(c.expected)}: ${words.join(", ")}`);
      });
    });
  }
  lines.push(`rules fired: ${rules.exercised}/${rules.total}; conditions both held and failed: ${conditions.exercised}/${conditions.total}`);
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

/**
 * The branch heads of the generated module's else-chains, by value name: line (1-based) and
 * the string the branch produces. A rule without conditions is one unconditional `results
 * contains` line, followed by its `explain_<r>`: recorded as `results:<r>`.
 */
function branchLines(rego: string): Map<string, { line: number; value: string }[]> {
  const out = new Map<string, { line: number; value: string }[]>();
  let current: string | undefined;
  let unconditional: number | undefined;
  rego.split("\n").forEach((text, i) => {
    const line = i + 1;
    const start = /^([a-z_][a-z0-9_]*) := "([a-z_]+)"( if \{)?$/.exec(text);
    const next = /^\} else := "([a-z_]+)"( if \{)?$/.exec(text);
    if (start) {
      current = start[1]!;
      out.set(current, [{ line, value: start[2]! }]);
    } else if (next && current) {
      out.get(current)!.push({ line, value: next[1]! });
    } else if (/^[a-z_]/.test(text)) {
      current = undefined;
      const explain = /^explain_(\d+) := /.exec(text);
      if (explain && unconditional !== undefined) out.set(`results:${explain[1]}`, [{ line: unconditional, value: "fired" }]);
      unconditional = /^results contains /.test(text) && !/ if /.test(text) ? line : undefined;
    }
  });
  return out;
}
