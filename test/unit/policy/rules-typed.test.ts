import { loadPolicy, type LoadedPolicy } from "@open-policy-agent/opa-wasm";
import { beforeAll, describe, expect, it } from "vitest";
import { buildBundle, type BuiltBundle } from "../../../src/policy/build.js";
import { PolicyEngine, type Decision, type IntentInput } from "../../../src/policy/engine.js";
import { PolicySourceError, type SourceProblem } from "../../../src/policy/errors.js";
import { EXPLAIN_ENTRYPOINT } from "../../../src/policy/opa.js";
import { compileRules, type FieldCondition, type RulesDocument } from "../../../src/policy/rules.js";
import { readTarGz } from "../../../src/policy/tar.js";

// Every bundle here goes through buildBundle (opa build -t wasm, the publish path) and is
// evaluated by PolicyEngine (opa-wasm), as a published policy would be.

type Expect = "fires" | "not" | "invalid";
const VERDICT: Record<Expect, [string, string]> = {
  fires: ["ALLOW", "matched"],
  not: ["HUMAN_REVIEW", "no_matching_rule"],
  invalid: ["HUMAN_REVIEW", "invalid_policy_input"],
};

// operator -> condition on context.f (undeclared) and on `amount` or `currency` (typed by intake),
// with a value that holds, one that fails, and one of the wrong type. exists is the one operator
// that reads presence only, so missing or mistyped values are ordinary values to it.
const operators: { op: string; when: FieldCondition; holds: unknown; fails: unknown; mistyped: unknown; top: [string, unknown, unknown, unknown] }[] = [
  { op: "eq", when: { eq: 5 }, holds: 5, fails: 6, mistyped: "5", top: ["amount", 5, 6, "5"] },
  { op: "neq", when: { neq: 5 }, holds: 6, fails: 5, mistyped: "6", top: ["amount", 6, 5, "6"] },
  { op: "in", when: { in: ["a", "b"] }, holds: "b", fails: "c", mistyped: 1, top: ["currency", "USD", "EUR", 1] },
  { op: "not_in", when: { not_in: ["a", "b"] }, holds: "c", fails: "a", mistyped: true, top: ["currency", "EUR", "USD", true] },
  { op: "lt", when: { lt: 30 }, holds: 3, fails: 30, mistyped: "3", top: ["amount", 3, 30, "3"] },
  { op: "lte", when: { lte: 30 }, holds: 30, fails: 31, mistyped: "30", top: ["amount", 30, 31, "30"] },
  { op: "gt", when: { gt: 30 }, holds: 31, fails: 30, mistyped: "31", top: ["amount", 31, 30, "31"] },
  { op: "gte", when: { gte: 30 }, holds: 30, fails: 29, mistyped: "30", top: ["amount", 30, 29, "30"] },
  { op: "prefix", when: { prefix: "ven" }, holds: "vendor", fails: "payee", mistyped: 7, top: ["currency", "venX", "USD", 7] },
];

// The `when` on a top-level field compares with that field's own kind of value.
const topWhen: Record<string, FieldCondition> = {
  eq: { eq: 5 }, neq: { neq: 5 }, in: { in: ["USD"] }, not_in: { not_in: ["USD"] },
  lt: { lt: 30 }, lte: { lte: 30 }, gt: { gt: 30 }, gte: { gte: 30 }, prefix: { prefix: "ven" },
};

// name -> [rules document, intent fields, expected verdict]
const cases: [string, RulesDocument, Partial<IntentInput>, Expect][] = [];
const allow = (when: Record<string, FieldCondition>, fields?: RulesDocument["fields"]): RulesDocument => ({
  actions: ["x"],
  ...(fields ? { fields } : {}),
  rules: [{ id: "r", when, outcome: "ALLOW", reason: "matched" }],
});

for (const o of operators) {
  const ctx = (value: unknown): Partial<IntentInput> => ({ context: { f: value } });
  cases.push(
    [`${o.op} on context.f: holds`, allow({ "context.f": o.when }), ctx(o.holds), "fires"],
    [`${o.op} on context.f: fails`, allow({ "context.f": o.when }), ctx(o.fails), "not"],
    [`${o.op} on context.f: missing`, allow({ "context.f": o.when }), {}, "invalid"],
    [`${o.op} on context.f: null`, allow({ "context.f": o.when }), ctx(null), "invalid"],
    [`${o.op} on context.f: mistyped`, allow({ "context.f": o.when }), ctx(o.mistyped), "invalid"],
  );
  const [field, holds, fails, mistyped] = o.top;
  const when = { [field]: topWhen[o.op]! };
  cases.push(
    [`${o.op} on ${field}: holds`, allow(when), { [field]: holds }, "fires"],
    [`${o.op} on ${field}: fails`, allow(when), { [field]: fails }, "not"],
    [`${o.op} on ${field}: missing`, allow(when), {}, "invalid"],
    [`${o.op} on ${field}: mistyped`, allow(when), { [field]: mistyped } as Partial<IntentInput>, "invalid"],
  );
  // Declared optional: absence is allowed by the declaration, but a condition that reads the
  // field still cannot be decided without it.
  const declared = allow({ "context.f": o.when }, { "context.f": { type: typeof o.holds === "number" ? "number" : "string" } });
  cases.push(
    [`${o.op} on a declared field: holds`, declared, ctx(o.holds), "fires"],
    [`${o.op} on a declared field: missing`, declared, {}, "invalid"],
    [`${o.op} on a declared field: mistyped`, declared, ctx(o.mistyped), "invalid"],
  );
}

cases.push(
  ["exists true: present", allow({ "context.f": { exists: true } }), { context: { f: "x" } }, "fires"],
  ["exists true: present with any type", allow({ "context.f": { exists: true } }), { context: { f: 0 } }, "fires"],
  ["exists true: missing", allow({ "context.f": { exists: true } }), {}, "not"],
  ["exists true: null", allow({ "context.f": { exists: true } }), { context: { f: null } }, "not"],
  ["exists false: missing", allow({ "context.f": { exists: false } }), {}, "fires"],
  ["exists false: present", allow({ "context.f": { exists: false } }), { context: { f: false } }, "not"],
  ["exists false on amount: missing", allow({ amount: { exists: false } }), {}, "fires"],
  ["exists true on amount: missing", allow({ amount: { exists: true } }), {}, "not"],
  // exists guards a condition: the rule is out when the field is absent, instead of invalid.
  ["exists true + lt: missing", allow({ "context.f": { exists: true, lt: 30 } }), {}, "not"],
  ["exists true + lt: mistyped", allow({ "context.f": { exists: true, lt: 30 } }), { context: { f: "3" } }, "invalid"],
  // Three-valued: a condition that fails rules the rule out whatever the others could not decide.
  ["another condition fails", allow({ currency: { eq: "EUR" }, "context.f": { lt: 30 } }), { currency: "USD" }, "not"],
  ["another condition holds", allow({ currency: { eq: "EUR" }, "context.f": { lt: 30 } }), { currency: "EUR" }, "invalid"],
  ["in with mixed types, either type", allow({ "context.f": { in: [1, "one"] } }), { context: { f: "one" } }, "fires"],
  ["in with mixed types, a third type", allow({ "context.f": { in: [1, "one"] } }), { context: { f: true } }, "invalid"],
  ["eq on a boolean", allow({ "context.f": { eq: true } }), { context: { f: "true" } }, "invalid"],
);

// Declared types checked on their own (a `fields` result), whether or not a rule reads the field.
const typed = (fields: RulesDocument["fields"]): RulesDocument => ({ actions: ["x"], fields, rules: [{ id: "r", outcome: "ALLOW", reason: "matched" }] });
const TS = "2026-11-26T21:00:00.123+01:00";
cases.push(
  ["declared number: a number", typed({ "context.n": { type: "number" } }), { context: { n: 1.5 } }, "fires"],
  ["declared number: a string", typed({ "context.n": { type: "number" } }), { context: { n: "1.5" } }, "invalid"],
  ["declared string: a number", typed({ "context.s": { type: "string" } }), { context: { s: 1 } }, "invalid"],
  ["declared boolean: a boolean", typed({ "context.b": { type: "boolean" } }), { context: { b: false } }, "fires"],
  ["declared boolean: a string", typed({ "context.b": { type: "boolean" } }), { context: { b: "false" } }, "invalid"],
  ["declared timestamp: RFC 3339", typed({ "context.t": { type: "timestamp" } }), { context: { t: TS } }, "fires"],
  ["declared timestamp: Z", typed({ "context.t": { type: "timestamp" } }), { context: { t: "2026-11-26T21:00:00Z" } }, "fires"],
  ["declared timestamp: a date only", typed({ "context.t": { type: "timestamp" } }), { context: { t: "2026-11-26" } }, "invalid"],
  ["declared timestamp: month 13", typed({ "context.t": { type: "timestamp" } }), { context: { t: "2026-13-26T21:00:00Z" } }, "invalid"],
  ["declared enum: a value", typed({ "context.tier": { type: "enum", values: ["a", "b"] } }), { context: { tier: "b" } }, "fires"],
  ["declared enum: another string", typed({ "context.tier": { type: "enum", values: ["a", "b"] } }), { context: { tier: "c" } }, "invalid"],
  ["declared currency enum", typed({ currency: { type: "enum", values: ["USD"] } }), { currency: "EUR" }, "invalid"],
  ["declared optional: missing", typed({ "context.n": { type: "number" } }), {}, "fires"],
  ["declared optional: null", typed({ "context.n": { type: "number" } }), { context: { n: null } }, "fires"],
  ["declared required: missing", typed({ "context.n": { type: "number", required: true } }), {}, "invalid"],
  ["declared required: present", typed({ "context.n": { type: "number", required: true } }), { context: { n: 0 } }, "fires"],
  ["declared enum in a condition", allow({ "context.tier": { eq: "a" } }, { "context.tier": { type: "enum", values: ["a", "b"] } }), { context: { tier: "b" } }, "not"],
);

let built: BuiltBundle;
// A generous limit: this test is about outcomes, and the machine running it may be busy.
const engine = new PolicyEngine({ timeoutMs: 60_000 });

let explainer: LoadedPolicy;

const inputFor = (action: string, fields: Partial<IntentInput>) => ({
  intent: { agent_id: "a", requested_at: "2026-01-01T00:00:00.000Z", nonce: "n", ...fields, action },
  agent: { agent_id: "a", state: "active" },
  principal: { principal_id: "p", external_ref: "E1", kind: "person" },
  now: "2026-01-01T00:00:00.000Z",
});

function decide(action: string, fields: Partial<IntentInput> = {}): Decision {
  return engine.evaluate(built.digest, inputFor(action, fields));
}

// What the dry run's explanation says of the same input: the decision's hot path and explain are
// generated separately, so they are checked against each other.
function explained(action: string, fields: Partial<IntentInput>): Expect {
  const [result] = explainer.evaluate(inputFor(action, fields), EXPLAIN_ENTRYPOINT) as { result: Record<string, { fired: boolean; reason: string | null }[]> }[];
  const rules = result!.result[action]!;
  if (rules.some((r) => r.fired && r.reason === "invalid_policy_input")) return "invalid";
  return rules.some((r) => r.fired) ? "fires" : "not";
}

// The reproduction, and what deny-overrides makes of an invalid rule next to others.
const vendorPolicy = [
  "actions: [vendor_payment]",
  "rules:",
  "  - id: new_vendor",
  "    when:",
  "      context.vendor_age_days: {lt: 30}",
  "    outcome: HUMAN_REVIEW",
  "    reason: new_vendor",
  "  - id: sanctioned",
  "    when:",
  "      counterparty: {eq: blocked}",
  "    outcome: DENY",
  "    reason: sanctioned_counterparty",
  "  - id: otherwise",
  "    outcome: ALLOW",
  "    reason: within_delegated_authority",
].join("\n");

beforeAll(async () => {
  const policies = cases.map(([, doc], i) => ({ policy_key: `t${i}`, version: 1, rego: compileRules(`t${i}`, { ...doc, actions: [`t${i}`] }) }));
  policies.push({ policy_key: "vendor", version: 1, rego: compileRules("vendor", vendorPolicy) });
  policies.push({
    policy_key: "authority",
    version: 1,
    rego: compileRules("authority", { actions: ["pay"], rules: [{ id: "graph", authority: true }] }),
  });
  built = await buildBundle({ policies, graph: null, graph_version: null });
  await engine.load(built.digest, built.bundle);
  explainer = await loadPolicy(readTarGz(built.bundle).get("policy.wasm")!);
});

describe("a condition on a missing or mistyped field resolves its rule to HUMAN_REVIEW invalid_policy_input", () => {
  it.each(cases.map((c, i) => [c[0], i, c[3]] as const))("%s", (_name, i, expected) => {
    const decision = decide(`t${i}`, cases[i]![2]);
    expect([decision.outcome, decision.reason]).toEqual(VERDICT[expected]);
  });

  it.each(cases.map((c, i) => [c[0], i, c[3]] as const))("explain agrees: %s", (_name, i, expected) => {
    expect(explained(`t${i}`, cases[i]![2])).toBe(expected);
  });

  it("covers every operator with a missing and a mistyped value", () => {
    for (const op of ["eq", "neq", "in", "not_in", "lt", "lte", "gt", "gte", "prefix"]) {
      for (const what of ["missing", "mistyped"]) {
        expect(cases.some(([name, , , e]) => name.startsWith(`${op} on context.f: ${what}`) && e === "invalid"), `${op} ${what}`).toBe(true);
      }
    }
  });

  it("reports which condition could not be evaluated, and the value seen, in the trace", () => {
    const decision = decide("vendor_payment", { counterparty: "acme", context: { vendor_age_days: "3" } });
    expect(decision).toEqual({
      outcome: "HUMAN_REVIEW",
      reason: "invalid_policy_input",
      trace: [
        {
          policy: "vendor",
          rule: "new_vendor",
          outcome: "HUMAN_REVIEW",
          reason: "invalid_policy_input",
          detail: { field: "context.vendor_age_days", operator: "lt", expected: 30, actual: "3" },
        },
        { policy: "vendor", rule: "otherwise", outcome: "ALLOW", reason: "within_delegated_authority", detail: null },
      ],
    });
  });

  it("the issue's reproduction: vendor_age_days \"3\" is a review, not ALLOW; a number decides as written", () => {
    expect(decide("vendor_payment", { counterparty: "acme", context: { vendor_age_days: 3 } }).reason).toBe("new_vendor");
    expect(decide("vendor_payment", { counterparty: "acme", context: { vendor_age_days: 40 } })).toMatchObject({ outcome: "ALLOW", reason: "within_delegated_authority" });
    expect(decide("vendor_payment", { counterparty: "acme" })).toMatchObject({ outcome: "HUMAN_REVIEW", reason: "invalid_policy_input" });
    // A DENY rule reading a field the Intent lacks is a review too, never an abstention.
    expect(decide("vendor_payment", { context: { vendor_age_days: 40 } })).toMatchObject({ outcome: "HUMAN_REVIEW", reason: "invalid_policy_input" });
  });

  it("stays deny-overrides: a DENY from another rule wins over an invalid rule", () => {
    expect(decide("vendor_payment", { counterparty: "blocked", context: { vendor_age_days: "3" } })).toMatchObject({
      outcome: "DENY",
      reason: "sanctioned_counterparty",
    });
  });

  it("an authority rule reviews an Intent without a usable amount or currency", () => {
    expect(decide("pay", { currency: "USD" })).toMatchObject({ outcome: "HUMAN_REVIEW", reason: "invalid_policy_input" });
    expect(decide("pay", { amount: 5 })).toMatchObject({ outcome: "HUMAN_REVIEW", reason: "invalid_policy_input" });
    expect(decide("pay", { amount: -1, currency: "USD" })).toMatchObject({ outcome: "HUMAN_REVIEW", reason: "invalid_policy_input" });
    // With both, the authority graph decides (here there is none: no authority).
    expect(decide("pay", { amount: 5, currency: "USD" })).toMatchObject({ outcome: "DENY", reason: "no_delegated_authority" });
  });
});

function problems(source: unknown): SourceProblem[] {
  try {
    compileRules("p", source);
  } catch (error) {
    expect(error).toBeInstanceOf(PolicySourceError);
    return (error as PolicySourceError).errors;
  }
  throw new Error("the document was accepted");
}

describe("field declarations and the new operators are checked at compile", () => {
  const rule = { id: "r", outcome: "ALLOW", reason: "ok" };
  // name -> [document, field of the first problem, part of its message]
  const invalid: [string, unknown, string, string][] = [
    ["fields not an object", { actions: ["a"], fields: [], rules: [] }, "fields", "must be an object"],
    ["an unknown field", { actions: ["a"], fields: { amt: { type: "number" } }, rules: [] }, "fields.amt", 'unknown field "amt"'],
    ["an unknown type", { actions: ["a"], fields: { "context.x": { type: "integer" } }, rules: [] }, "fields.context.x.type", "must be one of number, string, boolean, timestamp, enum"],
    ["an enum without values", { actions: ["a"], fields: { "context.x": { type: "enum" } }, rules: [] }, "fields.context.x.values", "non-empty list"],
    ["an enum with a number", { actions: ["a"], fields: { "context.x": { type: "enum", values: ["a", 1] } }, rules: [] }, "fields.context.x.values[1]", "strings"],
    ["values on a string", { actions: ["a"], fields: { "context.x": { type: "string", values: ["a"] } }, rules: [] }, "fields.context.x.values", "enum only"],
    ["required not a boolean", { actions: ["a"], fields: { "context.x": { type: "string", required: "yes" } }, rules: [] }, "fields.context.x.required", "true or false"],
    ["an unknown declaration key", { actions: ["a"], fields: { "context.x": { type: "string", min: 1 } }, rules: [] }, "fields.context.x.min", 'unknown key "min"'],
    ["amount as a string", { actions: ["a"], fields: { amount: { type: "string" } }, rules: [] }, "fields.amount.type", "always a number"],
    ["currency as a number", { actions: ["a"], fields: { currency: { type: "number" } }, rules: [] }, "fields.currency.type", "always a string"],
    ["lt on a declared string", { actions: ["a"], fields: { "context.x": { type: "string" } }, rules: [{ ...rule, when: { "context.x": { lt: 5 } } }] }, "rules[0].when.context.x.lt", "compares numbers"],
    ["lt on a timestamp", { actions: ["a"], fields: { "context.x": { type: "timestamp" } }, rules: [{ ...rule, when: { "context.x": { lt: 5 } } }] }, "rules[0].when.context.x.lt", "compares numbers"],
    ["eq outside the enum", { actions: ["a"], fields: { "context.x": { type: "enum", values: ["a"] } }, rules: [{ ...rule, when: { "context.x": { eq: "b" } } }] }, "rules[0].when.context.x.eq", 'one of "a"'],
    ["eq with a bad timestamp", { actions: ["a"], fields: { "context.x": { type: "timestamp" } }, rules: [{ ...rule, when: { "context.x": { eq: "yesterday" } } }] }, "rules[0].when.context.x.eq", "RFC 3339"],
    ["neq of the wrong type", { actions: ["a"], rules: [{ ...rule, when: { amount: { neq: "5" } } }] }, "rules[0].when.amount.neq", "a number"],
    ["not_in empty", { actions: ["a"], rules: [{ ...rule, when: { currency: { not_in: [] } } }] }, "rules[0].when.currency.not_in", "non-empty list"],
    ["prefix on a number", { actions: ["a"], rules: [{ ...rule, when: { amount: { prefix: "1" } } }] }, "rules[0].when.amount.prefix", "compares strings"],
    ["prefix with a number", { actions: ["a"], rules: [{ ...rule, when: { currency: { prefix: 1 } } }] }, "rules[0].when.currency.prefix", "non-empty string"],
    ["exists with a string", { actions: ["a"], rules: [{ ...rule, when: { currency: { exists: "yes" } } }] }, "rules[0].when.currency.exists", "true or false"],
    ["a rule named fields beside declarations", { actions: ["a"], fields: { amount: { type: "number" } }, rules: [{ ...rule, id: "fields" }] }, "rules[0].id", "declared fields"],
  ];

  it.each(invalid)("refuses %s", (_name, doc, field, message) => {
    const [first] = problems(doc);
    expect(first?.field).toBe(field);
    expect(first?.message).toContain(message);
  });

  it("locates declaration and operator errors in YAML by line and column", () => {
    const yaml = [
      "actions: [vendor_payment]",
      "fields:",
      "  context.vendor_age_days: {type: integer}",
      "  context.tier: {type: enum}",
      "rules:",
      "  - id: new_vendor",
      "    when:",
      "      context.tier: {prefix: 5}",
      "    outcome: HUMAN_REVIEW",
      "    reason: new_vendor",
    ].join("\n");
    expect(problems(yaml)).toEqual([
      { field: "fields.context.vendor_age_days.type", line: 3, column: 35, message: expect.stringContaining("must be one of") },
      { field: "fields.context.tier.values", line: 4, column: 17, message: expect.stringContaining("enum needs `values`") },
      { field: "rules[0].when.context.tier.prefix", line: 8, column: 30, message: expect.stringContaining("non-empty string") },
    ]);
  });

  it("locates errors in JSON given as text by line and column", () => {
    const json = '{\n  "actions": ["a"],\n  "rules": [\n    {"id": "r", "when": {"amount": {"neq": "5"}}, "outcome": "ALLOW", "reason": "ok"}\n  ]\n}';
    expect(problems(json)).toEqual([{ field: "rules[0].when.amount.neq", line: 4, column: 44, message: expect.stringContaining("a number") }]);
  });

  it("has no line for a document given as an object", () => {
    const [first] = problems({ actions: ["a"], rules: [{ id: "r", when: { amount: { neq: "5" } }, outcome: "ALLOW", reason: "ok" }] });
    expect(first).toEqual({ field: "rules[0].when.amount.neq", message: expect.any(String) });
  });
});
