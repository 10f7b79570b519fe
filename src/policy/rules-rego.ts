import { RFC3339_PATTERN, staticKind, type FieldDeclaration, type StaticKind } from "./field-types.js";

/*
 * Rego generated from a rules document (docs/architecture.md, Policies). The package of
 * policy `<key>` defines, besides `actions`:
 *
 * - `results`, what data.mandate.main.decision combines: per rule, its {outcome, reason, rule}
 *   when every condition holds, or {"outcome": "HUMAN_REVIEW", "reason":
 *   "invalid_policy_input", "rule", "detail": {field, operator, expected, actual}} when no
 *   condition fails but one reads a field that is missing (or null) or not of the type it
 *   needs; and per declared field (`fields`) that is mistyped, or missing when required, such
 *   a result under rule "fields". Conditions are three-valued (holds, fails, invalid), so a
 *   rule another condition already rules out is not sent to review for a field it never needed.
 *
 * - `explain`, for the dry run only (the decision never reads it): an array, in document
 *   order (the "fields" check first when fields are declared), of
 *     {"policy_key", "rule_id", "fired", "outcome", "reason", "failed_condition", "line"}
 *   where a rule resolved to invalid_policy_input counts as fired (outcome HUMAN_REVIEW) with
 *   the condition it could not evaluate as failed_condition, a rule that did not fire has
 *   outcome and reason null and the first condition that failed as
 *   failed_condition = {"field", "operator", "expected", "actual"} (actual null when missing;
 *   operator "type" for a declared field's or an authority rule's type check), and `line` is
 *   the rule's line in the document (0 when it was not given as text). Its bundle entrypoint
 *   is `mandate/policies/<key>/explain`; hand-written modules do not define it.
 */

/** The reason of a rule that could not be evaluated because a field it reads is missing or mistyped. */
export const INVALID_INPUT_REASON = "invalid_policy_input";

/** Rule id under which a document's `fields` declarations report a missing or mistyped field. */
export const FIELDS_RULE_ID = "fields";

/** The document as this module reads it (the validated RulesDocument of rules.ts). */
export interface RegoSource {
  actions: readonly string[];
  fields?: Record<string, FieldDeclaration>;
  rules: readonly {
    id: string;
    when?: Record<string, Record<string, unknown>>;
    outcome?: string;
    reason?: string;
    authority?: true;
  }[];
}

// One three-valued condition of a rule: `type` is an implicit type check (authority rules).
interface Condition {
  field: string;
  operator: string;
  expected: unknown;
  ref: string;
  typeTests: string[];
  valueTests: string[];
  /** The value tests' negation, given the type tests hold. */
  negatedTests: string[];
}

const COMPARISONS: Record<string, string> = { lt: "<", lte: "<=", gt: ">", gte: ">=" };
const NEGATED: Record<string, string> = { lt: ">=", lte: ">", gt: "<=", gte: "<" };

/**
 * The module of a validated rules document in package `pkg`; `lineOf` gives the line of a
 * path in the document's text (0 when unknown).
 */
export function generateRego(policyKey: string, pkg: string, doc: RegoSource, lineOf: (path: (string | number)[]) => number): string {
  const declared = new Map(Object.entries(doc.fields ?? {}));
  const fields = new Map<string, string>();
  const fieldRef = (field: string): string => {
    let name = fields.get(field);
    if (name === undefined) fields.set(field, (name = `field_${fields.size}`));
    return name;
  };
  const blocks = [
    `package ${pkg}`,
    "# Generated from a rules document by src/policy/rules.ts; src/policy/rules-rego.ts says what each rule means.",
    `actions := {${[...doc.actions].sort().map((a) => JSON.stringify(a)).join(", ")}}`,
  ];
  const explain: string[] = [];
  const key = JSON.stringify(policyKey);

  if (declared.size > 0) {
    const checks = [...declared].map(([field, declaration], i) => ({ field, declaration, ok: `declared_ok_${i}`, ref: fieldRef(field) }));
    for (const { field, declaration, ok } of checks) {
      const ref = intentRef(field);
      blocks.push(`${ok} if {\n${indent(typeTests(declaration, ref))}\n}`);
      // `not <ref> != null` would be undefined for a missing field (opa hoists the ref out of the
      // negation), so absence is read from field_N, which is null then.
      if (!declaration.required) blocks.push(`${ok} if {\n\t${fieldRef(field)} == null\n}`);
    }
    const detail = (c: (typeof checks)[number]) =>
      `{"field": ${JSON.stringify(c.field)}, "operator": "type", "expected": ${regoValue(c.declaration)}, "actual": ${c.ref}}`;
    for (const c of checks) {
      blocks.push(`results contains {"outcome": "HUMAN_REVIEW", "reason": ${JSON.stringify(INVALID_INPUT_REASON)}, "rule": ${JSON.stringify(FIELDS_RULE_ID)}, "detail": ${detail(c)}} if not ${c.ok}`);
    }
    const entry = (fired: boolean, failed: string) =>
      `{"policy_key": ${key}, "rule_id": ${JSON.stringify(FIELDS_RULE_ID)}, "fired": ${fired}, "outcome": ${fired ? '"HUMAN_REVIEW"' : "null"}, "reason": ${fired ? JSON.stringify(INVALID_INPUT_REASON) : "null"}, "failed_condition": ${failed}, "line": ${lineOf(["fields"])}}`;
    const branches = checks.map((c) => `${entry(true, detail(c))} if {\n\tnot ${c.ok}\n}`);
    blocks.push(`explain_fields := ${branches.join(" else := ")} else := ${entry(false, "null")}`);
    explain.push("explain_fields");
  }

  doc.rules.forEach((rule, r) => {
    const id = JSON.stringify(rule.id);
    const line = lineOf(["rules", r]);
    // Each condition twice: on input refs for `results` (the decision's hot path: the same tests
    // as a plain condition, plus one type test per condition to rule out invalid input), and on
    // the field_N values for the three-valued statuses that only explain and an invalid result's
    // detail read.
    const hot: Condition[] = [];
    const conditions: Condition[] = [];
    for (const [field, condition] of Object.entries(rule.when ?? {})) {
      const kind = staticKind(field, declared);
      for (const [operator, expected] of Object.entries(condition)) {
        // exists reads presence, which only field_N (null when missing) can test.
        hot.push(compileCondition(field, operator === "exists" ? fieldRef(field) : intentRef(field), kind, operator, expected));
        conditions.push(compileCondition(field, fieldRef(field), kind, operator, expected));
      }
    }
    if (rule.authority) {
      // data.mandate.authority decides only an Intent with a non-negative amount and a currency:
      // without them this rule could not decide, which is a review, never an abstention.
      hot.push(...authorityConditions(intentRef("amount"), intentRef("currency")));
      conditions.push(...authorityConditions(fieldRef("amount"), fieldRef("currency")));
    }
    const fired = rule.authority
      ? `object.union(data.mandate.authority.result, {"rule": ${id}})`
      : `{"outcome": ${JSON.stringify(rule.outcome)}, "reason": ${JSON.stringify(rule.reason)}, "rule": ${id}}`;
    const entry = (fields: { fired: boolean; outcome: string; reason: string; failed: string }) =>
      `{"policy_key": ${key}, "rule_id": ${id}, "fired": ${fields.fired}, "outcome": ${fields.outcome}, "reason": ${fields.reason}, "failed_condition": ${fields.failed}, "line": ${line}}`;
    const firedEntry = rule.authority
      ? { fired: true, outcome: "data.mandate.authority.result.outcome", reason: "data.mandate.authority.result.reason", failed: "null" }
      : { fired: true, outcome: JSON.stringify(rule.outcome), reason: JSON.stringify(rule.reason), failed: "null" };
    if (conditions.length === 0) {
      blocks.push(`results contains ${fired}`);
      blocks.push(`explain_${r} := ${entry(firedEntry)}`);
      explain.push(`explain_${r}`);
      return;
    }
    blocks.push(`results contains ${fired} if {\n${indent(hot.flatMap((c) => [...c.typeTests, ...c.valueTests]))}\n}`);
    const typed = hot.filter((c) => c.typeTests.length > 0);
    if (typed.length > 0) {
      // Invalid: some field is missing or mistyped (not ok) and no condition fails outright.
      blocks.push(`ok_${r} if {\n${indent(typed.flatMap((c) => c.typeTests))}\n}`);
      // A type check alone (an authority rule's amount and currency) never fails, it is only invalid.
      const decidable = hot.filter((c) => c.negatedTests.length > 0);
      for (const c of decidable) blocks.push(`fails_${r} if {\n${indent([...c.typeTests, ...c.negatedTests])}\n}`);
      const body = decidable.length > 0 ? [`not ok_${r}`, `not fails_${r}`] : [`not ok_${r}`];
      blocks.push(
        `results contains {"outcome": "HUMAN_REVIEW", "reason": ${JSON.stringify(INVALID_INPUT_REASON)}, "rule": ${id}, "detail": invalid_${r}} if {\n${indent(body)}\n}`,
      );
    }
    const names = conditions.map((_, c) => `condition_${r}_${c}`);
    conditions.forEach((condition, c) => blocks.push(`${names[c]} := ${conditionStatus(condition)}`));
    const anyFails = names.length === 1 ? `${names[0]} == "fails"` : `"fails" in {${names.join(", ")}}`;
    blocks.push(`rule_${r} := "fired" if {\n${indent(names.map((n) => `${n} == "holds"`))}\n} else := "not_fired" if {\n\t${anyFails}\n} else := "invalid"`);
    blocks.push(`invalid_${r} := ${firstWith(conditions, names, "invalid")}`);
    blocks.push(`failed_${r} := ${firstWith(conditions, names, "fails")}`);
    blocks.push(
      `explain_${r} := ${entry(firedEntry)} if {\n\trule_${r} == "fired"\n} else := ${entry({ fired: true, outcome: '"HUMAN_REVIEW"', reason: JSON.stringify(INVALID_INPUT_REASON), failed: `invalid_${r}` })} if {\n\trule_${r} == "invalid"\n} else := ${entry({ fired: false, outcome: "null", reason: "null", failed: `failed_${r}` })}`,
    );
    explain.push(`explain_${r}`);
  });

  if (doc.rules.length === 0) blocks.push("results := set()");
  blocks.push(`explain := [${explain.join(", ")}]`);
  // The fields the conditions read, null when missing, so a status or an explanation can name the value seen.
  for (const [field, name] of fields) blocks.push(`# ${field}\ndefault ${name} := null\n\n${name} := ${intentRef(field)}`);
  return blocks.join("\n\n") + "\n";
}

function authorityConditions(amount: string, currency: string): Condition[] {
  return [
    { field: "amount", operator: "type", expected: { type: "number", minimum: 0 }, ref: amount, typeTests: [`is_number(${amount})`, `${amount} >= 0`], valueTests: [], negatedTests: [] },
    { field: "currency", operator: "type", expected: { type: "string" }, ref: currency, typeTests: [`is_string(${currency})`], valueTests: [], negatedTests: [] },
  ];
}

function compileCondition(field: string, ref: string, kind: StaticKind, operator: string, expected: unknown): Condition {
  const base = { field, operator, expected, ref };
  const value = JSON.stringify(expected);
  switch (operator) {
    case "exists": {
      const [holds, fails] = expected ? [`${ref} != null`, `${ref} == null`] : [`${ref} == null`, `${ref} != null`];
      return { ...base, typeTests: [], valueTests: [holds], negatedTests: [fails] };
    }
    case "eq":
      return { ...base, typeTests: kindTests(kind, [expected], ref), valueTests: [`${ref} == ${value}`], negatedTests: [`${ref} != ${value}`] };
    case "neq":
      return { ...base, typeTests: kindTests(kind, [expected], ref), valueTests: [`${ref} != ${value}`], negatedTests: [`${ref} == ${value}`] };
    case "in":
    case "not_in": {
      const members = expected as unknown[];
      const set = `{${[...new Set(members.map((v) => JSON.stringify(v)))].join(", ")}}`;
      const [member, notMember] = [`${ref} in ${set}`, `not ${ref} in ${set}`];
      return { ...base, typeTests: kindTests(kind, members, ref), valueTests: [operator === "in" ? member : notMember], negatedTests: [operator === "in" ? notMember : member] };
    }
    case "prefix":
      return { ...base, typeTests: kindTests(kind, [""], ref), valueTests: [`startswith(${ref}, ${value})`], negatedTests: [`not startswith(${ref}, ${value})`] };
    default:
      // lt, lte, gt, gte: Rego orders values of different types (any string sorts above any
      // number), so the comparison means something only once the field is known to be a number.
      return { ...base, typeTests: kindTests(kind, [0], ref), valueTests: [`${ref} ${COMPARISONS[operator]} ${value}`], negatedTests: [`${ref} ${NEGATED[operator]} ${value}`] };
  }
}

// The type a condition needs of its field: the declared or top-level type, or for an undeclared
// context key the type(s) of the operands it is compared with.
function kindTests(kind: StaticKind, operands: readonly unknown[], ref: string): string[] {
  if (kind.type !== "scalar") return typeTests(kind, ref);
  const types = [...new Set(operands.map((v) => (typeof v === "number" ? "number" : typeof v === "boolean" ? "boolean" : "string")))].sort();
  if (types.length === 1) return [`is_${types[0]}(${ref})`];
  return [`type_name(${ref}) in {${types.map((t) => JSON.stringify(t)).join(", ")}}`];
}

function typeTests(declaration: FieldDeclaration, ref: string): string[] {
  switch (declaration.type) {
    case "number":
      return [`is_number(${ref})`];
    case "string":
      return [`is_string(${ref})`];
    case "boolean":
      return [`is_boolean(${ref})`];
    case "timestamp":
      return [`is_string(${ref})`, `regex.match(${JSON.stringify(RFC3339_PATTERN)}, ${ref})`];
    case "enum":
      return [`${ref} in {${(declaration.values ?? []).map((v) => JSON.stringify(v)).join(", ")}}`];
  }
}

// holds / fails / invalid; a missing (or null) field is invalid for every operator but exists.
function conditionStatus(c: Condition): string {
  if (c.operator === "exists") return `"holds" if {\n${indent(c.valueTests)}\n} else := "fails"`;
  if (c.operator === "type") return `"holds" if {\n${indent(c.typeTests)}\n} else := "invalid"`;
  return [
    `"invalid" if {\n\t${c.ref} == null\n}`,
    `"holds" if {\n${indent([...c.typeTests, ...c.valueTests])}\n}`,
    `"fails" if {\n${indent(c.typeTests)}\n}`,
    `"invalid"`,
  ].join(" else := ");
}

// The first condition whose status is `status`, as {field, operator, expected, actual}; null when none is.
function firstWith(conditions: readonly Condition[], names: readonly string[], status: string): string {
  const branches = conditions.map(
    (c, i) =>
      `{"field": ${JSON.stringify(c.field)}, "operator": ${JSON.stringify(c.operator)}, "expected": ${regoValue(c.expected)}, "actual": ${c.ref}} if {\n\t${names[i]} == ${JSON.stringify(status)}\n}`,
  );
  return `${branches.join(" else := ")} else := null`;
}

// A JSON value as opa fmt writes a Rego literal (a space after each `:` and `,`).
function regoValue(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(regoValue).join(", ")}]`;
  if (typeof value === "object" && value !== null) {
    return `{${Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}: ${regoValue(v)}`).join(", ")}}`;
  }
  return JSON.stringify(value);
}

function indent(lines: readonly string[]): string {
  return lines.map((line) => `\t${line}`).join("\n");
}

// Rego keywords cannot follow a dot in a reference; opa fmt writes them in brackets.
const REGO_KEYWORDS = new Set([
  "as", "contains", "default", "else", "every", "false", "if", "import", "in", "not", "null", "package", "some", "true", "with",
]);

function intentRef(field: string): string {
  return field
    .split(".")
    .reduce(
      (ref, segment) =>
        /^[A-Za-z_][A-Za-z0-9_]*$/.test(segment) && !REGO_KEYWORDS.has(segment) ? `${ref}.${segment}` : `${ref}[${JSON.stringify(segment)}]`,
      "input.intent",
    );
}
