/** One test's result, as `policy test` prints it and writes it to JUnit XML. */
export interface TestCaseResult {
  /** data.<package>.<rule> (or `bundle.build` when the bundle itself does not build). */
  name: string;
  /** The package, which JUnit readers show as the class. */
  suite: string;
  /** The author's file. */
  file: string;
  line: number;
  status: "passed" | "failed" | "error" | "skipped";
  seconds: number;
  message?: string;
}

/**
 * JUnit XML in the shape CI systems (Jenkins, GitLab, GitHub test reporters) read: one
 * <testsuite> per Rego package, a <testcase> per test with <failure>, <error> or <skipped>.
 * Written by hand: the format needs only elements, attributes and escaping, which is less
 * than a dependency would bring.
 */
export function junitXml(cases: readonly TestCaseResult[]): string {
  const suites = new Map<string, TestCaseResult[]>();
  for (const c of cases) suites.set(c.suite, [...(suites.get(c.suite) ?? []), c]);
  const count = (list: readonly TestCaseResult[], status: TestCaseResult["status"]) => list.filter((c) => c.status === status).length;
  const totals = (list: readonly TestCaseResult[]) =>
    `tests="${list.length}" failures="${count(list, "failed")}" errors="${count(list, "error")}" skipped="${count(list, "skipped")}" time="${seconds(list)}"`;
  const lines = ['<?xml version="1.0" encoding="UTF-8"?>', `<testsuites name="mandate policy test" ${totals(cases)}>`];
  for (const [suite, list] of suites) {
    lines.push(`  <testsuite name="${attr(suite)}" ${totals(list)}>`);
    for (const c of list) {
      const open = `    <testcase classname="${attr(c.suite)}" name="${attr(c.name.slice(c.suite.length + 1) || c.name)}" file="${attr(c.file)}" line="${c.line}" time="${c.seconds.toFixed(3)}"`;
      if (c.status === "passed") {
        lines.push(`${open}/>`);
        continue;
      }
      lines.push(`${open}>`);
      const message = c.message ?? "";
      if (c.status === "skipped") lines.push(`      <skipped/>`);
      else {
        const tag = c.status === "error" ? "error" : "failure";
        lines.push(`      <${tag} message="${attr(message.split("\n")[0] ?? "")}">${text(message)}</${tag}>`);
      }
      lines.push("    </testcase>");
    }
    lines.push("  </testsuite>");
  }
  lines.push("</testsuites>");
  return `${lines.join("\n")}\n`;
}

function seconds(list: readonly TestCaseResult[]): string {
  return list.reduce((sum, c) => sum + c.seconds, 0).toFixed(3);
}

// Characters XML 1.0 cannot carry at all, even escaped (control characters other than tab,
// line feed and carriage return, lone surrogates, U+FFFE/U+FFFF): replaced so the file parses.
const INVALID = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

function text(value: string): string {
  return value.replace(INVALID, "\uFFFD").replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

function attr(value: string): string {
  return text(value).replace(/"/g, "&quot;").replace(/\n/g, "&#10;").replace(/\r/g, "&#13;").replace(/\t/g, "&#9;");
}
