import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { buildBundle, type BuiltBundle } from "../../../src/policy/build.js";
import { PolicyEngine, type IntentInput } from "../../../src/policy/engine.js";
import { PolicySourceError } from "../../../src/policy/errors.js";
import { runOpa } from "../../../src/policy/opa.js";
import {
  STARTER_POLICY_KEY,
  STARTER_RULES,
  assertRegoPackage,
  compileRules,
  isPolicyKey,
  parseRulesDocument,
  type FieldCondition,
} from "../../../src/policy/rules.js";

// name -> [when, intent fields, whether the rule fires ("invalid": it resolves to HUMAN_REVIEW invalid_policy_input)]
const operatorCases: [string, Record<string, FieldCondition>, Partial<IntentInput>, boolean | "invalid"][] = [
  ["eq on a number, equal", { amount: { eq: 100 } }, { amount: 100 }, true],
  ["eq on a number, different", { amount: { eq: 100 } }, { amount: 101 }, false],
  ["eq on a number, given a string", { amount: { eq: 100 } }, { amount: "100" as unknown as number }, "invalid"],
  ["eq on a string, equal", { currency: { eq: "USD" } }, { currency: "USD" }, true],
  ["eq on a string, other case", { currency: { eq: "USD" } }, { currency: "usd" }, false],
  ["eq on a missing field", { counterparty: { eq: "acme" } }, {}, "invalid"],
  ["in, member", { counterparty: { in: ["acme", "initech"] } }, { counterparty: "initech" }, true],
  ["in, not a member", { counterparty: { in: ["acme", "initech"] } }, { counterparty: "globex" }, false],
  ["lt, below", { amount: { lt: 100 } }, { amount: 99.99 }, true],
  ["lt, at the boundary", { amount: { lt: 100 } }, { amount: 100 }, false],
  ["lt, given a string (strings sort above numbers in Rego)", { amount: { lt: 100 } }, { amount: "5" as unknown as number }, "invalid"],
  ["lte, at the boundary", { amount: { lte: 100 } }, { amount: 100 }, true],
  ["lte, above", { amount: { lte: 100 } }, { amount: 100.01 }, false],
  ["gt, above", { amount: { gt: 100 } }, { amount: 100.01 }, true],
  ["gt, at the boundary", { amount: { gt: 100 } }, { amount: 100 }, false],
  ["gte, at the boundary", { amount: { gte: 100 } }, { amount: 100 }, true],
  ["gte, below", { amount: { gte: 100 } }, { amount: 99 }, false],
  ["gte, missing", { amount: { gte: 100 } }, {}, "invalid"],
  ["a range, inside", { amount: { gt: 10, lte: 20 } }, { amount: 20 }, true],
  ["a range, outside", { amount: { gt: 10, lte: 20 } }, { amount: 10 }, false],
  ["resource eq", { resource: { eq: "order:1" } }, { resource: "order:1" }, true],
  ["context key eq", { "context.region": { eq: "eu" } }, { context: { region: "eu" } }, true],
  ["nested context key eq", { "context.risk.level": { eq: "high" } }, { context: { risk: { level: "high" } } }, true],
  ["nested context key, other value", { "context.risk.level": { eq: "high" } }, { context: { risk: { level: "low" } } }, false],
  ["context key that is a Rego keyword", { "context.if": { eq: true } }, { context: { if: true } }, true],
  ["context key with a dash", { "context.cost-centre": { in: [7, 9] } }, { context: { "cost-centre": 9 } }, true],
  ["context number gte", { "context.score": { gte: 0.8 } }, { context: { score: 0.9 } }, true],
  ["context number gte, given a string", { "context.score": { gte: 0.8 } }, { context: { score: "0.9" } }, "invalid"],
  ["every field must hold", { currency: { eq: "USD" }, amount: { lt: 10 } }, { currency: "USD", amount: 11 }, false],
  ["every field holds", { currency: { eq: "USD" }, amount: { lt: 10 } }, { currency: "USD", amount: 9 }, true],
];

describe("rules documents compiled to Rego, evaluated in WebAssembly", () => {
  let built: BuiltBundle;
  const engine = new PolicyEngine();

  beforeAll(async () => {
    // One policy per case, each covering its own action, all in one bundle.
    const perCase = operatorCases.map(([, when], i) => ({
      policy_key: `op_${i}`,
      version: 1,
      rego: compileRules(`op_${i}`, { actions: [`op_${i}`], rules: [{ id: "r", when, outcome: "ALLOW", reason: "matched" }] }),
    }));
    const byAction = {
      policy_key: "by_action",
      version: 1,
      rego: compileRules("by_action", {
        actions: ["pay", "refund"],
        rules: [{ id: "no_refunds", when: { action: { in: ["refund"] } }, outcome: "DENY", reason: "refunds_closed" }],
      }),
    };
    built = await buildBundle({ policies: [...perCase, byAction], graph: null, graph_version: null });
    await engine.load(built.digest, built.bundle);
  });

  const decide = (intent: Partial<IntentInput> & { action: string }) =>
    engine.evaluate(built.digest, {
      intent: { agent_id: "a", requested_at: "2026-01-01T00:00:00.000Z", nonce: "n", ...intent },
      agent: { agent_id: "a", state: "active" },
      principal: { principal_id: "p", external_ref: null, kind: "person" },
      now: "2026-01-01T00:00:00.000Z",
    });

  it.each(operatorCases.map((c, i) => [c[0], i, c] as const))("%s", (_name, i, [, , fields, fires]) => {
    const decision = decide({ ...fields, action: `op_${i}` });
    const expected = fires === "invalid" ? ["HUMAN_REVIEW", "invalid_policy_input"] : fires ? ["ALLOW", "matched"] : ["HUMAN_REVIEW", "no_matching_rule"];
    expect([decision.outcome, decision.reason]).toEqual(expected);
  });

  it("conditions on the action within a policy covering several", () => {
    expect(decide({ action: "refund" }).reason).toBe("refunds_closed");
    expect(decide({ action: "pay" }).reason).toBe("no_matching_rule");
  });
});

describe("policy keys with a dash", () => {
  it("a-b and a_b are two packages in one bundle, each deciding its own actions", async () => {
    const policy = (key: string, actions: string[], outcome: "ALLOW" | "DENY", reason: string) => ({
      policy_key: key,
      version: 1,
      rego: compileRules(key, { actions, rules: [{ id: "r", outcome, reason }] }),
    });
    const built = await buildBundle({
      policies: [policy("a-b", ["dash", "both"], "ALLOW", "from_dash"), policy("a_b", ["underscore", "both"], "DENY", "from_underscore")],
      graph: null,
      graph_version: null,
    });
    const engine = new PolicyEngine();
    await engine.load(built.digest, built.bundle);
    const decide = (action: string) =>
      engine.evaluate(built.digest, {
        intent: { agent_id: "a", action, requested_at: "2026-01-01T00:00:00.000Z", nonce: "n" },
        agent: { agent_id: "a", state: "active" },
        principal: { principal_id: "p", external_ref: null, kind: "person" },
        now: "2026-01-01T00:00:00.000Z",
      });
    const dash = { policy: "a-b", rule: "r", outcome: "ALLOW", reason: "from_dash", detail: null };
    const underscore = { policy: "a_b", rule: "r", outcome: "DENY", reason: "from_underscore", detail: null };
    expect(decide("dash")).toEqual({ outcome: "ALLOW", reason: "from_dash", trace: [dash] });
    expect(decide("underscore")).toEqual({ outcome: "DENY", reason: "from_underscore", trace: [underscore] });
    expect(decide("both")).toEqual({ outcome: "DENY", reason: "from_underscore", trace: [dash, underscore] });
  });

  it("compile to a quoted package reference", () => {
    expect(compileRules("vendor-payments", STARTER_RULES).split("\n")[0]).toBe('package mandate.policies["vendor-payments"]');
    expect(compileRules("vendor_payments", STARTER_RULES).split("\n")[0]).toBe("package mandate.policies.vendor_payments");
  });

  it("are lowercase letters, digits, _ and -, starting with a letter, at most 63", () => {
    for (const key of ["a", "a-b", "vendor-payments", "a_b-c9", "a--b", "a-"]) expect(isPolicyKey(key)).toBe(true);
    for (const key of ["", "-a", "_a", "9a", "A-b", "a.b", "a b", "a\"b", "a]b", `a${"-".repeat(63)}`]) expect(isPolicyKey(key)).toBe(false);
  });
});

describe("compileRules", () => {
  it("writes modules opa fmt leaves alone", async () => {
    const dir = await mkdtemp(join(tmpdir(), "mandate-rules-"));
    try {
      await writeFile(join(dir, "starter.rego"), compileRules(STARTER_POLICY_KEY, STARTER_RULES));
      await writeFile(
        join(dir, "all.rego"),
        compileRules("all", {
          actions: ["b", "a"],
          rules: [
            { id: "x", when: Object.assign({}, ...operatorCases.map(([, when]) => when)), outcome: "DENY", reason: "x" },
            { id: "auth", authority: true, when: { currency: { eq: "USD" } } },
            { id: "always", authority: true },
          ],
        }),
      );
      await writeFile(join(dir, "empty.rego"), compileRules("empty", { actions: ["a"], rules: [] }));
      await writeFile(join(dir, "dashed.rego"), compileRules("vendor-payments", STARTER_RULES));
      const fmt = await runOpa(["fmt", "--list", dir]);
      expect(fmt.stderr).toBe("");
      expect(fmt.stdout).toBe("");
      const check = await runOpa(["check", "--strict", dir]);
      expect(check.stderr).toBe("");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("compiles the starter policy", () => {
    expect(compileRules(STARTER_POLICY_KEY, STARTER_RULES)).toBe(
      [
        "package mandate.policies.starter",
        "",
        "# Generated from a rules document by src/policy/rules.ts; src/policy/rules-rego.ts says what each rule means.",
        "",
        'actions := {"reference_noop"}',
        "",
        'results contains {"outcome": "ALLOW", "reason": "starter_reference_action", "rule": "reference_noop"}',
        "",
        'explain_0 := {"policy_key": "starter", "rule_id": "reference_noop", "fired": true, "outcome": "ALLOW", "reason": "starter_reference_action", "failed_condition": null, "line": 0}',
        "",
        "explain := [explain_0]",
        "",
      ].join("\n"),
    );
  });

  it("quotes every value, so no string can escape into Rego", () => {
    const rego = compileRules("q", {
      actions: ["a"],
      rules: [{ id: "r", when: { counterparty: { eq: '"}\ninput.x == 1 #' } }, outcome: "ALLOW", reason: "ok" }],
    });
    expect(rego).toContain('field_0 == "\\"}\\ninput.x == 1 #"');
    expect(rego).toContain("field_0 := input.intent.counterparty");
  });

  it("refuses a bad policy key", () => {
    expect(() => compileRules("Bad-Key", STARTER_RULES)).toThrow(PolicySourceError);
  });
});

function problems(source: unknown): { field?: string; line?: number; column?: number; message: string }[] {
  try {
    parseRulesDocument(source);
  } catch (error) {
    expect(error).toBeInstanceOf(PolicySourceError);
    return (error as PolicySourceError).errors;
  }
  throw new Error("the document was accepted");
}

const rule = { id: "r", outcome: "ALLOW", reason: "ok" };

// name -> [document, field of the (first) problem, part of its message]
const invalidDocuments: [string, unknown, string | undefined, string][] = [
  ["not an object", ["a"], undefined, "must be an object"],
  ["unknown top-level key", { actions: ["a"], rules: [], version: 2 }, "version", 'unknown key "version"'],
  ["missing actions", { rules: [] }, undefined, "`actions` is required"],
  ["empty actions", { actions: [], rules: [] }, "actions", "non-empty"],
  ["duplicate action", { actions: ["a", "a"], rules: [] }, "actions[1]", "listed twice"],
  ["bad action name", { actions: ["a b"], rules: [] }, "actions[0]", "action name"],
  ["missing rules", { actions: ["a"] }, undefined, "`rules` is required"],
  ["rules not a list", { actions: ["a"], rules: {} }, "rules", "must be a list"],
  ["rule not an object", { actions: ["a"], rules: ["r"] }, "rules[0]", "must be an object"],
  ["unknown rule key", { actions: ["a"], rules: [{ ...rule, priority: 1 }] }, "rules[0].priority", 'unknown key "priority"'],
  ["missing id", { actions: ["a"], rules: [{ outcome: "ALLOW", reason: "ok" }] }, "rules[0].id", "`id` is required"],
  ["duplicate rule ids", { actions: ["a"], rules: [rule, rule] }, "rules[1].id", "used twice"],
  ["bad outcome", { actions: ["a"], rules: [{ ...rule, outcome: "PERMIT" }] }, "rules[0].outcome", "ALLOW, DENY or HUMAN_REVIEW"],
  ["reason not snake_case", { actions: ["a"], rules: [{ ...rule, reason: "Too-Big" }] }, "rules[0].reason", "snake_case"],
  ["reason missing", { actions: ["a"], rules: [{ id: "r", outcome: "DENY" }] }, "rules[0].reason", "snake_case"],
  ["bad operator", { actions: ["a"], rules: [{ ...rule, when: { amount: { ne: 5 } } }] }, "rules[0].when.amount.ne", 'unknown operator "ne"'],
  ["unknown field", { actions: ["a"], rules: [{ ...rule, when: { amt: { eq: 5 } } }] }, "rules[0].when.amt", 'unknown field "amt"'],
  ["bare context", { actions: ["a"], rules: [{ ...rule, when: { context: { eq: 5 } } }] }, "rules[0].when.context", "unknown field"],
  ["when not an object", { actions: ["a"], rules: [{ ...rule, when: [] }] }, "rules[0].when", "must be an object"],
  ["condition without operators", { actions: ["a"], rules: [{ ...rule, when: { amount: {} } }] }, "rules[0].when.amount", "at least one"],
  ["eq of the wrong type", { actions: ["a"], rules: [{ ...rule, when: { amount: { eq: "5" } } }] }, "rules[0].when.amount.eq", "a number"],
  ["in with an empty list", { actions: ["a"], rules: [{ ...rule, when: { currency: { in: [] } } }] }, "rules[0].when.currency.in", "non-empty list"],
  ["in with a wrong member", { actions: ["a"], rules: [{ ...rule, when: { currency: { in: ["USD", 1] } } }] }, "rules[0].when.currency.in", "a string"],
  ["lt on a string field", { actions: ["a"], rules: [{ ...rule, when: { currency: { lt: 5 } } }] }, "rules[0].when.currency.lt", "is a string"],
  ["gte with a string", { actions: ["a"], rules: [{ ...rule, when: { amount: { gte: "5" } } }] }, "rules[0].when.amount.gte", "needs a number"],
  ["authority not true", { actions: ["a"], rules: [{ id: "r", authority: false }] }, "rules[0].authority", "must be true"],
  ["authority with an outcome", { actions: ["a"], rules: [{ id: "r", authority: true, outcome: "ALLOW" }] }, "rules[0].outcome", "unknown key"],
];

describe("parseRulesDocument", () => {
  it.each(invalidDocuments)("refuses %s", (_name, doc, field, message) => {
    const [first] = problems(doc);
    expect(first?.field).toBe(field);
    expect(first?.message).toContain(message);
  });

  it("reports every problem at once", () => {
    const errors = problems({ actions: [], rules: [{ id: "r", outcome: "NO", reason: "Bad" }], extra: 1 });
    expect(errors.map((e) => e.field)).toEqual(["extra", "actions", "rules[0].outcome", "rules[0].reason"]);
  });

  it("locates problems in YAML text by line and column", () => {
    const yaml = [
      "actions: [vendor_payment]",
      "rules:",
      "  - id: big",
      "    when:",
      "      amount: {ne: 5}",
      "    outcome: DENY",
      "    reason: Too_Big",
    ].join("\n");
    expect(problems(yaml)).toEqual([
      { field: "rules[0].when.amount.ne", line: 5, column: 20, message: expect.stringContaining("unknown operator") },
      { field: "rules[0].reason", line: 7, column: 13, message: expect.stringContaining("snake_case") },
    ]);
  });

  it("locates syntax errors in JSON text", () => {
    const [first] = problems('{\n  "actions": ["a"],\n  "rules": [\n}');
    expect(first?.line).toBeGreaterThanOrEqual(3);
    expect(first?.column).toBeGreaterThan(0);
  });

  it("refuses duplicate keys in text", () => {
    expect(problems("actions: [a]\nactions: [b]\nrules: []")[0]?.line).toBe(2);
  });

  it("accepts a valid document given as YAML text", () => {
    const doc = parseRulesDocument("actions: [a]\nrules:\n  - {id: r, authority: true}\n");
    expect(doc).toEqual({ actions: ["a"], rules: [{ id: "r", authority: true }] });
  });
});

describe("assertRegoPackage", () => {
  it("accepts the policy's own package after comments", () => {
    expect(() => assertRegoPackage("payments", "# METADATA\n# title: x\n\npackage mandate.policies.payments\n")).not.toThrow();
  });

  it("accepts a dashed key's package only as a quoted reference, which no other key shares", () => {
    expect(() => assertRegoPackage("vendor-payments", 'package mandate.policies["vendor-payments"]\n')).not.toThrow();
    for (const rego of ["package mandate.policies.vendor-payments\n", "package mandate.policies.vendor_payments\n", 'package mandate.policies["vendor_payments"]\n']) {
      expect(() => assertRegoPackage("vendor-payments", rego)).toThrow(PolicySourceError);
    }
    expect(() => assertRegoPackage("vendor_payments", 'package mandate.policies["vendor-payments"]\n')).toThrow(PolicySourceError);
  });

  // name -> [module, line of the problem]
  const refused: [string, string, number | undefined][] = [
    ["another policy's package", "package mandate.policies.other\n", 1],
    ["the library's package", "\n\npackage mandate.main\n", 3],
    ["a sub-package", "package mandate.policies.payments.sub\n", 1],
    ["a bracketed package", 'package mandate.policies["payments"]\n', 1],
    ["no package line first", 'x := 1\npackage mandate.policies.payments\n', 1],
    ["an empty module", "# nothing\n", undefined],
  ];

  it.each(refused)("refuses %s", (_name, rego, line) => {
    try {
      assertRegoPackage("payments", rego);
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(PolicySourceError);
      expect((error as PolicySourceError).errors[0]?.line).toBe(line);
    }
  });
});
