import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { buildBundle } from "../../../src/policy/build.js";
import { wasmCapabilities } from "../../../src/policy/opa.js";
import { PolicyCompileError } from "../../../src/policy/errors.js";
import { compileRules, STARTER_POLICY_KEY, STARTER_RULES } from "../../../src/policy/rules.js";

/*
 * `mandate policy test` and `mandate policy build` as an author runs them: the real CLI in a
 * child process, the real opa, the WebAssembly SDK. The example directory is the realistic
 * case; small directories made here isolate one behaviour each.
 */

const run = promisify(execFile);
const mandate = (...args: string[]) =>
  run(process.execPath, ["--import", "tsx", "src/cli/main.ts", ...args], { maxBuffer: 16 * 1024 * 1024 }).then(
    (r) => ({ code: 0, out: r.stdout, err: r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, out: e.stdout, err: e.stderr }),
  );
const policyTest = (...args: string[]) => mandate("policy", "test", ...args);

const scratch: string[] = [];
afterAll(async () => {
  for (const d of scratch) await rm(d, { recursive: true, force: true });
});

/** A fresh directory holding `files`. */
async function dirWith(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "policy-test-"));
  scratch.push(dir);
  for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
  return dir;
}

const EXAMPLE = "examples/policy-test";

// A minimal policy with one rule and its test; `rego` and `test` replace either.
const PAY_RULES = `actions: [vendor_payment]
rules:
  - id: big
    when:
      amount: { gt: 100 }
    outcome: HUMAN_REVIEW
    reason: big_payment
  - id: small
    when:
      amount: { lte: 100 }
    outcome: ALLOW
    reason: small_payment
`;
const PAY_TEST = `package pay_test

import data.mandate.main

test_small if {
	d := main.decision with input as {"intent": {"action": "vendor_payment", "amount": 5}}
	d.reason == "small_payment"
}

test_big if {
	d := main.decision with input as {"intent": {"action": "vendor_payment", "amount": 500}}
	d.reason == "big_payment"
}
`;

describe("mandate policy test", () => {
  it("runs the example (AP payments, procurement, refunds, deploys; governance CSVs and principals) and passes", async () => {
    const r = await policyTest(EXAMPLE);
    expect(r.out).toMatch(/^PASS: (\d+)\/\1$/m);
    expect(Number(/^PASS: (\d+)/m.exec(r.out)![1])).toBeGreaterThanOrEqual(25);
    expect(r.out).toContain("data.refunds_test.test_small_store_credit_allowed: PASS");
    expect(r.code).toBe(0);
  });

  it("fails a policy that uses a built-in publishing refuses, with the message publishing gives and the author's path", async () => {
    const clock = `package mandate.policies.clock

actions := {"late_payment"}

results contains {"outcome": "DENY", "reason": "too_late", "rule": "clock"} if {
	time.now_ns() > 0
}
`;
    const dir = await dirWith({
      "clock.rego": clock,
      "clock_test.rego": `package clock_test\n\nimport data.mandate.main\n\ntest_denied if {\n\tmain.decision.outcome == "DENY" with input as {"intent": {"action": "late_payment"}}\n}\n`,
    });
    // What publishing throws for the same module (src/domain/bundles.ts calls buildBundle).
    const published = await buildBundle({
      policies: [
        { policy_key: "clock", version: 1, rego: clock, handwritten: true },
        { policy_key: STARTER_POLICY_KEY, version: 1, rego: compileRules(STARTER_POLICY_KEY, STARTER_RULES) },
      ],
      graph: null,
      graph_version: null,
    }).then(
      () => null,
      (err: unknown) => err,
    );
    expect(published).toBeInstanceOf(PolicyCompileError);
    const problem = (published as PolicyCompileError).errors[0]!;
    expect(problem.message).toContain("time.now_ns");

    const r = await policyTest(dir);
    expect(r.code).toBe(1);
    expect(r.out).toContain(`${join(dir, "clock.rego")}:${problem.line}:${problem.column}: ${problem.code}: ${problem.message}`);
  });

  it("compiles the tests themselves to WebAssembly with publishing's built-ins: a test calling a refused built-in errors", async () => {
    // opa test (the interpreter, every built-in) passes this test; the WebAssembly build refuses it.
    const dir = await dirWith({
      "pay.rules.yaml": PAY_RULES,
      "pay_test.rego": `${PAY_TEST}\ntest_clock if {\n\ttime.now_ns() > 0\n}\n`,
    });
    const r = await policyTest(dir);
    expect(r.code).toBe(1);
    expect(r.out).toContain("data.pay_test.test_clock: ERROR");
    expect(r.out).toContain(`${join(dir, "pay_test.rego")}`);
    expect(r.out).toContain("time.now_ns");
  });

  it("exits 1 when a test fails, naming it", async () => {
    const dir = await dirWith({ "pay.rules.yaml": PAY_RULES.replace("reason: small_payment", "reason: tiny_payment"), "pay_test.rego": PAY_TEST });
    const r = await policyTest(dir);
    expect(r.code).toBe(1);
    expect(r.out).toContain("data.pay_test.test_small: FAIL");
    expect(r.out).toContain("data.pay_test.test_big: PASS");
    expect(r.out).toContain("FAIL: 1/2");
  });

  it("--run runs only the tests whose name matches", async () => {
    const r = await policyTest(EXAMPLE, "--run", "refunds_test\\.test_refund_");
    expect(r.code).toBe(0);
    expect(r.out).toContain("PASS: 3/3");
    expect(r.out).not.toContain("payments_test");
    const none = await policyTest(EXAMPLE, "--run", "no_such_test");
    expect(none.code).toBe(1);
    expect(none.out).toContain("no test matches --run no_such_test");
  });

  it("--junit writes JUnit XML that a parser reads: one testcase per test, failures marked", async () => {
    const dir = await dirWith({ "pay.rules.yaml": PAY_RULES.replace("reason: small_payment", "reason: tiny_payment"), "pay_test.rego": PAY_TEST });
    const xml = join(dir, "report.xml");
    expect((await policyTest(dir, "--junit", xml)).code).toBe(1);
    const summary = await run("python3", [
      "-c",
      `import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
cases = root.iter("testcase")
print(root.tag, root.get("tests"), root.get("failures"), *sorted(c.get("name") + ":" + ("failed" if c.find("failure") is not None else "passed") + ":" + c.get("file") for c in cases))`,
      xml,
    ]);
    expect(summary.stdout.trim().split(" ")).toEqual([
      "testsuites",
      "2",
      "1",
      `test_big:passed:${join(dir, "pay_test.rego")}`,
      `test_small:failed:${join(dir, "pay_test.rego")}`,
    ]);
  });

  it("--coverage reports, by rules-document line, which rules fired and which conditions held or stopped their rule", async () => {
    // Only test_small runs: rule `big` (line 3) never fires, its condition (line 5) stops it;
    // rule `small` (line 8) fires, its condition (line 10) holds but never decides.
    const dir = await dirWith({ "pay.rules.yaml": PAY_RULES, "pay_test.rego": PAY_TEST });
    const r = await policyTest(dir, "--coverage", "--run", "test_small");
    expect(r.code).toBe(0);
    const file = join(dir, "pay.rules.yaml");
    expect(r.out).toContain(`${file}:3: rule big: never fired, did not fire`);
    expect(r.out).toContain(`${file}:5: amount gt 100: never held, stopped its rule`);
    expect(r.out).toContain(`${file}:8: rule small: fired`);
    expect(r.out).toContain(`${file}:10: amount lte 100: held, never stopped its rule`);
    expect(r.out).toContain("rules fired: 1/2; conditions both held and stopped their rule: 0/2");

    const all = await policyTest(dir, "--coverage");
    expect(all.out).toContain(`${file}:5: amount gt 100: held, stopped its rule`);
    expect(all.out).toContain("rules fired: 2/2; conditions both held and stopped their rule: 2/2");

    // A field sent with the wrong type is seen as such, at the condition that reads it.
    const mistyped = await dirWith({
      "pay.rules.yaml": PAY_RULES,
      "pay_test.rego": `package pay_test\n\nimport data.mandate.main\n\ntest_text_amount if main.decision.reason == "invalid_policy_input" with input as {"intent": {"action": "vendor_payment", "amount": "5"}}\n`,
    });
    const typed = await policyTest(mistyped, "--coverage");
    expect(typed.code).toBe(0);
    expect(typed.out).toContain(`${join(mistyped, "pay.rules.yaml")}:5: amount gt 100: never held, never stopped its rule, missing or mistyped`);
  });

  it("builds the graph from governance CSVs recognised by header, checked against principals.csv", async () => {
    const files = {
      "pay.rules.yaml": "actions: [vendor_payment]\nrules:\n  - id: authority\n    authority: true\n",
      "pay_test.rego": `package pay_test

import data.mandate.main

input_for(amount) := {"intent": {"action": "vendor_payment", "amount": amount, "currency": "EUR"}, "principal": {"external_ref": "ann"}, "now": "2026-11-25T10:00:00.000Z"}

test_within if main.decision.reason == "within_delegated_authority" with input as input_for(50)

test_review if main.decision.reason == "requires_approval" with input as input_for(500)
`,
      // Names that say nothing: the header decides the kind.
      "2026-roles.csv": "principal,role,reports_to\nann,clerk,\n",
      "2026-limits.csv": "holder,delegate,action,currency,max_amount,valid_until\nrole:clerk,,vendor_payment,EUR,1000,\n",
      "2026-bands.csv": "action,currency,up_to_amount,approvals_required\nvendor_payment,EUR,100,0\nvendor_payment,EUR,1000,1\n",
      "principals.csv": "external_ref,display_name,kind\nann,Ann,person\n",
    };
    const ok = await policyTest(await dirWith(files));
    expect(ok.out).toContain("PASS: 2/2");
    expect(ok.code).toBe(0);

    // A principal the organization does not have: refused as the service refuses it, at its file and line.
    const unknown = await dirWith({ ...files, "2026-roles.csv": "principal,role,reports_to\nann,clerk,\nzed,clerk,\n" });
    const refused = await policyTest(unknown);
    expect(refused.code).toBe(2);
    expect(refused.err).toContain(`${join(unknown, "2026-roles.csv")}:3`);
    expect(refused.err).toContain("zed");

    // The same graph from a YAML approval matrix (recognised by its name) and a graph fixture.
    const { "2026-bands.csv": _bands, ...withoutBands } = files;
    const yamlBands = await dirWith({
      ...withoutBands,
      "approval_matrix.yaml": "- { action: vendor_payment, currency: EUR, up_to_amount: 100, approvals_required: 0 }\n- { action: vendor_payment, currency: EUR, up_to_amount: 1000, approvals_required: 1 }\n",
    });
    expect((await policyTest(yamlBands)).out).toContain("PASS: 2/2");
    const fixture = await dirWith({
      "pay.rules.yaml": files["pay.rules.yaml"],
      "pay_test.rego": files["pay_test.rego"],
      "graph.yaml": `roles: [{ role: clerk, reports_to: "" }]
memberships: [{ principal: ann, role: clerk }]
limits: [{ holder: "role:clerk", action: vendor_payment, currency: EUR, max_amount: 1000 }]
approval_matrix:
  - { action: vendor_payment, currency: EUR, up_to_amount: 100, approvals_required: 0 }
  - { action: vendor_payment, currency: EUR, up_to_amount: 1000, approvals_required: 1 }
`,
    });
    expect((await policyTest(fixture)).out).toContain("PASS: 2/2");
    // Both a fixture and documents: which graph is meant is not guessed.
    const both = await dirWith({ ...files, "graph.yaml": "roles: []\n" });
    const bothRun = await policyTest(both);
    expect(bothRun.code).toBe(2);
    expect(bothRun.err).toContain(`${join(both, "graph.yaml")}: a graph fixture and governance documents`);

    // A CSV that is no governance document is not ignored without a word.
    const stray = await dirWith({ ...files, "notes.csv": "a,b\n1,2\n" });
    const strayRun = await policyTest(stray);
    expect(strayRun.code).toBe(2);
    expect(strayRun.err).toContain(`${join(stray, "notes.csv")}: not a governance document`);
  });

  it("exits 2 on bad input, naming the author's file", async () => {
    const missing = await policyTest("/no/such/dir");
    expect(missing.code).toBe(2);
    expect(missing.err).toContain("/no/such/dir: no such directory");

    const flag = await policyTest(EXAMPLE, "--no-such-flag");
    expect(flag.code).toBe(2);
    expect(flag.err).toContain("--no-such-flag");

    const yaml = await dirWith({ "pay.rules.yaml": "actions: [vendor_payment\nrules: []\n", "pay_test.rego": PAY_TEST });
    const badYaml = await policyTest(yaml);
    expect(badYaml.code).toBe(2);
    expect(badYaml.err).toMatch(new RegExp(`${join(yaml, "pay.rules.yaml")}:\\d+:\\d+: `));

    const invalid = await dirWith({ "pay.rules.yaml": "actions: [vendor_payment]\nrules:\n  - id: r\n    outcome: MAYBE\n    reason: ok\n", "pay_test.rego": PAY_TEST });
    const badRule = await policyTest(invalid);
    expect(badRule.code).toBe(2);
    expect(badRule.err).toContain(`${join(invalid, "pay.rules.yaml")}:4:14: rules[0].outcome: \`outcome\` must be ALLOW, DENY or HUMAN_REVIEW`);

    const syntax = await dirWith({ "pay.rules.yaml": PAY_RULES, "pay_test.rego": "package pay_test\n\ntest_x if {\n" });
    const badRego = await policyTest(syntax);
    expect(badRego.code).toBe(2);
    expect(badRego.err).toContain(join(syntax, "pay_test.rego"));

    const csv = await dirWith({ "pay.rules.yaml": PAY_RULES, "pay_test.rego": PAY_TEST, "approval_matrix.csv": 'action,currency,up_to_amount,approvals_required\nvendor_payment,EUR,"100,0\n' });
    const badCsv = await policyTest(csv);
    expect(badCsv.code).toBe(2);
    expect(badCsv.err).toContain(join(csv, "approval_matrix.csv"));
  });
});

describe("mandate policy build", () => {
  it("writes the bundle publishing builds from the same sources and prints its sha256", async () => {
    const dir = await dirWith({ "pay.rules.yaml": PAY_RULES });
    const out = join(dir, "bundle.tar.gz");
    const r = await mandate("policy", "build", dir, "-o", out);
    expect(r.code).toBe(0);
    const bytes = await readFile(out);
    const digest = createHash("sha256").update(bytes).digest("hex");
    expect(r.out).toContain(`sha256 ${digest}`);
    // The service's bundle for an organization with this policy and its starter policy.
    const service = await buildBundle({
      policies: [
        { policy_key: "pay", version: 1, rego: compileRules("pay", PAY_RULES) },
        { policy_key: STARTER_POLICY_KEY, version: 1, rego: compileRules(STARTER_POLICY_KEY, STARTER_RULES) },
      ],
      graph: null,
      graph_version: null,
    });
    expect(digest).toBe(service.digest);
  });

  it("exits 2 without -o", async () => {
    const r = await mandate("policy", "build", EXAMPLE);
    expect(r.code).toBe(2);
    expect(r.err).toContain("policy build DIR -o BUNDLE.tar.gz");
  });
});

// README, Writing policies, lists the built-ins an author may call: the list must be the one
// publishing enforces, or authors are told wrong.
it("the README lists exactly the built-ins publishing allows", async () => {
  const readme = await readFile("README.md", "utf8");
  const section = readme.slice(readme.indexOf("## Writing policies"));
  const listed = /The (\d+) allowed:\n([^\n]+)/.exec(section);
  expect(listed).not.toBeNull();
  const names = [...listed![2]!.matchAll(/`([^`]+)`/g)].map((m) => m[1]);
  const caps = JSON.parse(await wasmCapabilities()) as { builtins: { name: string }[] };
  const allowed = [...new Set(caps.builtins.map((b) => b.name).filter((n) => !n.startsWith("internal.")))].sort();
  expect(names).toEqual(allowed);
  expect(Number(listed![1])).toBe(allowed.length);
});
