import { PolicySourceError, type SourceProblem } from "./errors.js";
import { parseText, renderPath, type Path, type Position } from "./source.js";

/** The three outcomes of a decision; there is no fourth. */
export type Outcome = "ALLOW" | "DENY" | "HUMAN_REVIEW";

/** The outcomes, for validating values that claim to be one. */
export const OUTCOMES: readonly Outcome[] = ["ALLOW", "DENY", "HUMAN_REVIEW"];

/** Reason codes are stable machine-readable snake_case, never free text (see docs/architecture.md, Policies). */
export const REASON_PATTERN = /^[a-z][a-z0-9_]*$/;

/**
 * Policy keys: lowercase letters, digits, `_` and `-`, starting with a letter (at most 63, see
 * {@link isPolicyKey}). Each names its own Rego package, {@link regoPackage}.
 */
export const POLICY_KEY_PATTERN = /^[a-z][a-z0-9_-]*$/;

/**
 * The Rego package of a policy: `mandate.policies.<policy_key>`, or, for a key with a `-`
 * (which a Rego name cannot hold), the quoted reference `mandate.policies["<policy_key>"]`.
 * Either way the package's last path segment is the key itself, unchanged, so two keys never
 * share a package (`a-b` and `a_b` are `data.mandate.policies["a-b"]` and
 * `data.mandate.policies["a_b"]`) and the library's `data.mandate.policies[key]` and the
 * decision trace see the key as written.
 */
export function regoPackage(policyKey: string): string {
  return /^[a-z][a-z0-9_]*$/.test(policyKey) ? `mandate.policies.${policyKey}` : `mandate.policies[${JSON.stringify(policyKey)}]`;
}

/** Action names as Intents carry them (`vendor_payment`, `purchase_order.submit`). */
export const ACTION_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;

const RULE_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
const CONTEXT_SEGMENT_PATTERN = /^[A-Za-z0-9_-]+$/;

/** Comparison operators a `when` condition may use. */
export type Operator = "eq" | "in" | "lt" | "lte" | "gt" | "gte";

/** A scalar an Intent field can be compared with. */
export type Scalar = string | number | boolean;

/** Conditions on one Intent field; every operator given must hold. */
export type FieldCondition = { eq?: Scalar; in?: Scalar[]; lt?: number; lte?: number; gt?: number; gte?: number };

/** A rule that decides by itself when all its conditions hold. */
export interface DecisionRule {
  id: string;
  when?: Record<string, FieldCondition>;
  outcome: Outcome;
  reason: string;
}

/** A rule that hands the decision to the authority graph and approval matrix (see docs/architecture.md, Policies), optionally only when its conditions hold. */
export interface AuthorityRule {
  id: string;
  when?: Record<string, FieldCondition>;
  authority: true;
}

/** One rule of a runtime policy document. */
export type PolicyRule = DecisionRule | AuthorityRule;

/** The `rules` source of a policy version: the actions it covers and its rules. */
export interface RulesDocument {
  actions: string[];
  rules: PolicyRule[];
}

/** Key of the policy every new organization starts with. */
export const STARTER_POLICY_KEY = "starter";

/** The starter policy: allows the reference action with no configuration (see docs/architecture.md, Policies). */
export const STARTER_RULES: RulesDocument = {
  actions: ["reference_noop"],
  rules: [{ id: "reference_noop", outcome: "ALLOW", reason: "starter_reference_action" }],
};

/** Tells whether a string can name a runtime policy (and so a Rego package). */
export function isPolicyKey(key: string): boolean {
  return POLICY_KEY_PATTERN.test(key) && key.length <= 63;
}

/**
 * Validates a rules document, given parsed (an object) or as YAML/JSON text, and returns it
 * typed. Throws PolicySourceError listing every problem, with line and column when the
 * document was text.
 */
export function parseRulesDocument(source: unknown): RulesDocument {
  let value = source;
  let locate: (path: Path) => Position | undefined = () => undefined;
  if (typeof source === "string") {
    const parsed = parseText(source);
    if (!parsed.ok) throw new PolicySourceError(parsed.errors);
    value = parsed.value;
    locate = parsed.locate;
  }
  const problems: { path: Path; message: string }[] = [];
  const report = (path: Path, message: string): void => void problems.push({ path, message });
  checkDocument(value, report);
  if (problems.length > 0) {
    throw new PolicySourceError(
      problems.map(({ path, message }): SourceProblem => {
        const at = locate(path);
        const field = renderPath(path);
        return { ...(field ? { field } : {}), ...(at ? { line: at.line, column: at.column } : {}), message };
      }),
    );
  }
  return value as RulesDocument;
}

/** Compiles a rules document into the Rego module of the policy's package ({@link regoPackage}); throws PolicySourceError when either is invalid. */
export function compileRules(policyKey: string, source: unknown): string {
  if (!isPolicyKey(policyKey)) {
    throw new PolicySourceError([{ message: `policy key ${JSON.stringify(policyKey)} must match ${POLICY_KEY_PATTERN.source}` }]);
  }
  const doc = parseRulesDocument(source);
  const actions = [...doc.actions].sort().map((a) => JSON.stringify(a));
  const blocks = [
    `package ${regoPackage(policyKey)}`,
    "# Generated from a rules document by src/policy/rules.ts.",
    `actions := {${actions.join(", ")}}`,
  ];
  if (doc.rules.length === 0) blocks.push("results := set()");
  for (const rule of doc.rules) blocks.push(compileRule(rule));
  return blocks.join("\n\n") + "\n";
}

/**
 * Checks that a hand-written module declares exactly its policy's package ({@link regoPackage}:
 * `package mandate.policies.<policyKey>`, quoted in brackets for a key with a `-`), so one
 * policy can never define rules in another's (or the library's) namespace. Throws
 * PolicySourceError pointing at the offending line.
 */
export function assertRegoPackage(policyKey: string, rego: string): void {
  const lines = rego.split(/\r?\n/);
  const index = lines.findIndex((line) => !/^\s*(#.*)?$/.test(line));
  const line = lines[index];
  const expected = `package ${regoPackage(policyKey)}`;
  if (line === undefined) {
    throw new PolicySourceError([{ message: `the module is empty; it must start with "${expected}"` }]);
  }
  const match = /^\s*package\s+(\S+)\s*(#.*)?$/.exec(line);
  if (match?.[1] !== regoPackage(policyKey) || !isPolicyKey(policyKey)) {
    const column = line.search(/\S/) + 1;
    throw new PolicySourceError([{ line: index + 1, column, message: `the package must be "${expected}"` }]);
  }
}

type Report = (path: Path, message: string) => void;

const FIELD_TYPES = new Map<string, FieldType>([
  ["amount", "number"],
  ["currency", "string"],
  ["counterparty", "string"],
  ["resource", "string"],
  ["action", "string"],
]);

function checkDocument(doc: unknown, report: Report): void {
  if (!isRecord(doc)) return report([], "the rules document must be an object with `actions` and `rules`");
  checkKeys(doc, [], ["actions", "rules"], report);
  if (!("actions" in doc)) report([], "`actions` is required");
  else if (!Array.isArray(doc.actions) || doc.actions.length === 0) {
    report(["actions"], "`actions` must be a non-empty list of action names");
  } else {
    const seen = new Set<unknown>();
    doc.actions.forEach((action, i) => {
      if (typeof action !== "string" || !ACTION_PATTERN.test(action)) {
        report(["actions", i], `an action name must match ${ACTION_PATTERN.source}`);
      } else if (seen.has(action)) report(["actions", i], `action "${action}" is listed twice`);
      seen.add(action);
    });
  }
  if (!("rules" in doc)) report([], "`rules` is required");
  else if (!Array.isArray(doc.rules)) report(["rules"], "`rules` must be a list");
  else {
    const ids = new Set<unknown>();
    doc.rules.forEach((rule, i) => {
      checkRule(rule, ["rules", i], report);
      if (isRecord(rule) && typeof rule.id === "string") {
        if (ids.has(rule.id)) report(["rules", i, "id"], `rule id "${rule.id}" is used twice`);
        ids.add(rule.id);
      }
    });
  }
}

function checkRule(rule: unknown, path: Path, report: Report): void {
  if (!isRecord(rule)) return report(path, "a rule must be an object");
  if (typeof rule.id !== "string" || !RULE_ID_PATTERN.test(rule.id)) {
    report([...path, "id"], `\`id\` is required and must match ${RULE_ID_PATTERN.source}`);
  }
  if ("when" in rule) checkWhen(rule.when, [...path, "when"], report);
  if ("authority" in rule) {
    checkKeys(rule, path, ["id", "when", "authority"], report);
    if (rule.authority !== true) report([...path, "authority"], "`authority` must be true");
    return;
  }
  checkKeys(rule, path, ["id", "when", "outcome", "reason"], report);
  if (!OUTCOMES.includes(rule.outcome as Outcome)) {
    report([...path, "outcome"], "`outcome` must be ALLOW, DENY or HUMAN_REVIEW");
  }
  if (typeof rule.reason !== "string" || !REASON_PATTERN.test(rule.reason) || rule.reason.length > 64) {
    report([...path, "reason"], "`reason` must be a snake_case code (^[a-z][a-z0-9_]*$, at most 64 characters)");
  }
}

function checkWhen(when: unknown, path: Path, report: Report): void {
  if (!isRecord(when)) return report(path, "`when` must be an object mapping Intent fields to conditions");
  for (const [field, condition] of Object.entries(when)) {
    const at = [...path, field];
    const type = fieldType(field);
    if (type === undefined) {
      report(at, `unknown field "${field}": use amount, currency, counterparty, resource, action or context.<key>`);
      continue;
    }
    if (!isRecord(condition) || Object.keys(condition).length === 0) {
      report(at, "a condition must be an object with at least one of eq, in, lt, lte, gt, gte");
      continue;
    }
    for (const [operator, value] of Object.entries(condition)) {
      checkOperand(field, type, operator, value, [...at, operator], report);
    }
  }
}

function checkOperand(field: string, type: FieldType, operator: string, value: unknown, path: Path, report: Report): void {
  switch (operator) {
    case "eq":
      if (!fits(value, type)) report(path, `eq needs ${describe(type)} for ${field}`);
      return;
    case "in":
      if (!Array.isArray(value) || value.length === 0 || !value.every((v) => fits(v, type))) {
        report(path, `in needs a non-empty list of ${describe(type)} for ${field}`);
      }
      return;
    case "lt":
    case "lte":
    case "gt":
    case "gte":
      if (type === "string") report(path, `${operator} compares numbers; ${field} is a string`);
      else if (!isFiniteNumber(value)) report(path, `${operator} needs a number`);
      return;
    default:
      report(path, `unknown operator "${operator}": use eq, in, lt, lte, gt or gte`);
  }
}

type FieldType = "number" | "string" | "scalar";

function fieldType(field: string): FieldType | undefined {
  const known = FIELD_TYPES.get(field);
  if (known) return known;
  const segments = field.split(".");
  if (segments[0] !== "context" || segments.length < 2) return undefined;
  return segments.slice(1).every((s) => CONTEXT_SEGMENT_PATTERN.test(s)) ? "scalar" : undefined;
}

function fits(value: unknown, type: FieldType): boolean {
  if (type === "number") return isFiniteNumber(value);
  if (type === "string") return typeof value === "string";
  return typeof value === "string" || typeof value === "boolean" || isFiniteNumber(value);
}

function describe(type: FieldType): string {
  return type === "scalar" ? "a string, number or boolean" : `a ${type}`;
}

function checkKeys(object: Record<string, unknown>, path: Path, allowed: string[], report: Report): void {
  for (const key of Object.keys(object)) {
    if (!allowed.includes(key)) report([...path, key], `unknown key "${key}" (allowed: ${allowed.join(", ")})`);
  }
}

function compileRule(rule: PolicyRule): string {
  const head =
    "authority" in rule
      ? `results contains object.union(data.mandate.authority.result, {"rule": ${JSON.stringify(rule.id)}})`
      : `results contains {"outcome": ${JSON.stringify(rule.outcome)}, "reason": ${JSON.stringify(rule.reason)}, "rule": ${JSON.stringify(rule.id)}}`;
  const body = Object.entries(rule.when ?? {}).flatMap(([field, condition]) => compileCondition(field, condition));
  return body.length === 0 ? head : `${head} if {\n${body.map((line) => `\t${line}`).join("\n")}\n}`;
}

const OPERATOR_SYMBOLS = { lt: "<", lte: "<=", gt: ">", gte: ">=" } as const;

function compileCondition(field: string, condition: FieldCondition): string[] {
  const ref = intentRef(field);
  const lines: string[] = [];
  // Rego orders values of different types (any string sorts above any number), so an
  // ordering comparison is only meaningful once the field is known to be a number.
  if (Object.keys(condition).some((op) => op in OPERATOR_SYMBOLS)) lines.push(`is_number(${ref})`);
  for (const [operator, value] of Object.entries(condition) as [Operator, Scalar | Scalar[]][]) {
    if (operator === "eq") lines.push(`${ref} == ${JSON.stringify(value)}`);
    else if (operator === "in") {
      const members = [...new Set((value as Scalar[]).map((v) => JSON.stringify(v)))];
      lines.push(`${ref} in {${members.join(", ")}}`);
    } else lines.push(`${ref} ${OPERATOR_SYMBOLS[operator]} ${JSON.stringify(value)}`);
  }
  return lines;
}

// Rego keywords cannot follow a dot in a reference; opa fmt writes them in brackets.
const REGO_KEYWORDS = new Set([
  "as", "contains", "default", "else", "every", "false", "if", "import", "in", "not", "null", "package", "some", "true", "with",
]);

function intentRef(field: string): string {
  const segments = field.split(".");
  return segments.reduce(
    (ref, segment) =>
      /^[A-Za-z_][A-Za-z0-9_]*$/.test(segment) && !REGO_KEYWORDS.has(segment)
        ? `${ref}.${segment}`
        : `${ref}[${JSON.stringify(segment)}]`,
    "input.intent",
  );
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isFiniteNumber(value: unknown): value is number {
  return typeof value === "number" && Number.isFinite(value);
}
