// Rules documents: validation and compilation to Rego (the generated Rego is src/policy/rules-rego.ts).
// For the dry run, each compiled package also defines
//   data.mandate.policies.<key>.explain = [{policy_key, rule_id, fired, outcome, reason,
//     failed_condition: {field, operator, expected, actual} | null, line}, ...]
// in document order (a "fields" entry first when types are declared; line 0 when the document
// was not given as text), which the decision never evaluates (bundle entrypoint
// mandate/bundle/explain, src/policy/build.ts). Hand-written Rego is type-checked against the
// input schema in src/policy/input-schema.ts (INPUT_SCHEMA, for `opa check --schema`).
import { PolicySourceError, type SourceProblem } from "./errors.js";
import {
  checkDeclaration,
  describeDeclaration,
  staticKind,
  TOP_LEVEL_FIELD_TYPES,
  typesAllowedFor,
  valueFits,
  type FieldDeclaration,
  type StaticKind,
} from "./field-types.js";
import { FIELDS_RULE_ID, generateRego } from "./rules-rego.js";
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

/** Operators a `when` condition may use (see docs/architecture.md, Policies). */
export const OPERATORS = ["eq", "neq", "in", "not_in", "lt", "lte", "gt", "gte", "prefix", "exists"] as const;

/** An operator a `when` condition may use. */
export type Operator = (typeof OPERATORS)[number];

/** A scalar an Intent field can be compared with. */
export type Scalar = string | number | boolean;

/**
 * Conditions on one Intent field; every operator given must hold. `exists` tests presence
 * (a null counts as missing); every other operator needs the field present and of its type,
 * else the rule resolves to HUMAN_REVIEW `invalid_policy_input` instead of quietly not firing.
 */
export type FieldCondition = {
  eq?: Scalar;
  neq?: Scalar;
  in?: Scalar[];
  not_in?: Scalar[];
  lt?: number;
  lte?: number;
  gt?: number;
  gte?: number;
  prefix?: string;
  exists?: boolean;
};

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

/**
 * The `rules` source of a policy version: the actions it covers, its rules, and optionally
 * the declared types of the Intent fields it reads (`amount`, `context.<key>`).
 */
export interface RulesDocument {
  actions: string[];
  fields?: Record<string, FieldDeclaration>;
  rules: PolicyRule[];
}

export { FIELDS_RULE_ID, INVALID_INPUT_REASON } from "./rules-rego.js";

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
  return readRulesDocument(source).doc;
}

/**
 * Compiles a rules document into the Rego module of the policy's package ({@link regoPackage}):
 * `actions`, `results` (what the decision combines) and `explain` (what the dry run reports per
 * rule; see src/policy/rules-rego.ts). Given as text, the rules' lines are recorded in
 * `explain`. Throws PolicySourceError when the key or the document is invalid.
 */
export function compileRules(policyKey: string, source: unknown): string {
  if (!isPolicyKey(policyKey)) {
    throw new PolicySourceError([{ message: `policy key ${JSON.stringify(policyKey)} must match ${POLICY_KEY_PATTERN.source}` }]);
  }
  const { doc, locate } = readRulesDocument(source);
  return generateRego(policyKey, regoPackage(policyKey), doc, (path) => locate(path)?.line ?? 0);
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

function readRulesDocument(source: unknown): { doc: RulesDocument; locate: (path: Path) => Position | undefined } {
  let value = source;
  let locate: (path: Path) => Position | undefined = () => undefined;
  if (typeof source === "string") {
    const parsed = parseText(source);
    if (!parsed.ok) throw new PolicySourceError(parsed.errors);
    value = parsed.value;
    locate = parsed.locate;
  }
  const problems: { path: Path; message: string }[] = [];
  checkDocument(value, (path, message) => void problems.push({ path, message }));
  if (problems.length > 0) {
    throw new PolicySourceError(
      problems.map(({ path, message }): SourceProblem => {
        const at = locate(path);
        const field = renderPath(path);
        return { ...(field ? { field } : {}), ...(at ? { line: at.line, column: at.column } : {}), message };
      }),
    );
  }
  return { doc: value as RulesDocument, locate };
}

function checkDocument(doc: unknown, report: Report): void {
  if (!isRecord(doc)) return report([], "the rules document must be an object with `actions` and `rules`");
  checkKeys(doc, [], ["actions", "fields", "rules"], report);
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
  const declared = "fields" in doc ? checkFields(doc.fields, report) : new Map<string, FieldDeclaration>();
  if (!("rules" in doc)) report([], "`rules` is required");
  else if (!Array.isArray(doc.rules)) report(["rules"], "`rules` must be a list");
  else {
    const ids = new Set<unknown>();
    doc.rules.forEach((rule, i) => {
      checkRule(rule, ["rules", i], declared, report);
      if (isRecord(rule) && typeof rule.id === "string") {
        if (ids.has(rule.id)) report(["rules", i, "id"], `rule id "${rule.id}" is used twice`);
        else if (rule.id === FIELDS_RULE_ID && "fields" in doc) {
          report(["rules", i, "id"], `rule id "${FIELDS_RULE_ID}" names the check of the declared fields; choose another`);
        }
        ids.add(rule.id);
      }
    });
  }
}

// The valid declarations of `fields`, by field; problems with the others are reported.
function checkFields(fields: unknown, report: Report): Map<string, FieldDeclaration> {
  const valid = new Map<string, FieldDeclaration>();
  if (!isRecord(fields)) {
    report(["fields"], "`fields` must be an object mapping Intent fields to {type, required?, values?}");
    return valid;
  }
  for (const [field, declaration] of Object.entries(fields)) {
    const at = ["fields", field];
    if (!isIntentField(field)) {
      report(at, `unknown field "${field}": use amount, currency, counterparty, resource, action or context.<key>`);
      continue;
    }
    const problems = checkDeclaration(declaration);
    for (const p of problems) report([...at, ...p.path], p.message);
    if (problems.length > 0) continue;
    const d = declaration as FieldDeclaration;
    const allowed = typesAllowedFor(field);
    if (allowed && !allowed.includes(d.type)) {
      report([...at, "type"], `${field} is always a ${TOP_LEVEL_FIELD_TYPES.get(field)}; declare it as ${allowed.join(" or ")}`);
      continue;
    }
    valid.set(field, d);
  }
  return valid;
}

function checkRule(rule: unknown, path: Path, declared: Map<string, FieldDeclaration>, report: Report): void {
  if (!isRecord(rule)) return report(path, "a rule must be an object");
  if (typeof rule.id !== "string" || !RULE_ID_PATTERN.test(rule.id)) {
    report([...path, "id"], `\`id\` is required and must match ${RULE_ID_PATTERN.source}`);
  }
  if ("when" in rule) checkWhen(rule.when, [...path, "when"], declared, report);
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

function checkWhen(when: unknown, path: Path, declared: Map<string, FieldDeclaration>, report: Report): void {
  if (!isRecord(when)) return report(path, "`when` must be an object mapping Intent fields to conditions");
  for (const [field, condition] of Object.entries(when)) {
    const at = [...path, field];
    if (!isIntentField(field)) {
      report(at, `unknown field "${field}": use amount, currency, counterparty, resource, action or context.<key>`);
      continue;
    }
    if (!isRecord(condition) || Object.keys(condition).length === 0) {
      report(at, `a condition must be an object with at least one of ${OPERATORS.join(", ")}`);
      continue;
    }
    const kind = staticKind(field, declared);
    for (const [operator, value] of Object.entries(condition)) {
      checkOperand(field, kind, operator, value, [...at, operator], report);
    }
  }
}

function checkOperand(field: string, kind: StaticKind, operator: string, value: unknown, path: Path, report: Report): void {
  switch (operator) {
    case "eq":
    case "neq":
      if (!operandFits(value, kind)) report(path, `${operator} needs ${describeKind(kind)} for ${field}`);
      return;
    case "in":
    case "not_in":
      if (!Array.isArray(value) || value.length === 0 || !value.every((v) => operandFits(v, kind))) {
        report(path, `${operator} needs a non-empty list of ${describeKind(kind)} for ${field}`);
      }
      return;
    case "lt":
    case "lte":
    case "gt":
    case "gte":
      if (kind.type !== "number" && kind.type !== "scalar") report(path, `${operator} compares numbers; ${field} is ${describeKind(kind)}`);
      else if (!isFiniteNumber(value)) report(path, `${operator} needs a number`);
      return;
    case "prefix":
      if (kind.type === "number" || kind.type === "boolean") report(path, `prefix compares strings; ${field} is ${describeKind(kind)}`);
      else if (typeof value !== "string" || value === "") report(path, "prefix needs a non-empty string");
      return;
    case "exists":
      if (typeof value !== "boolean") report(path, "exists needs true or false");
      return;
    default:
      report(path, `unknown operator "${operator}": use ${OPERATORS.join(", ")}`);
  }
}

function operandFits(value: unknown, kind: StaticKind): boolean {
  if (kind.type === "scalar") return typeof value === "string" || typeof value === "boolean" || isFiniteNumber(value);
  return valueFits(kind, value);
}

function describeKind(kind: StaticKind): string {
  return kind.type === "scalar" ? "a string, number or boolean" : describeDeclaration(kind);
}

function isIntentField(field: string): boolean {
  if (TOP_LEVEL_FIELD_TYPES.has(field)) return true;
  const segments = field.split(".");
  return segments[0] === "context" && segments.length >= 2 && segments.slice(1).every((s) => CONTEXT_SEGMENT_PATTERN.test(s));
}

function checkKeys(object: Record<string, unknown>, path: Path, allowed: string[], report: Report): void {
  for (const key of Object.keys(object)) {
    if (!allowed.includes(key)) report([...path, key], `unknown key "${key}" (allowed: ${allowed.join(", ")})`);
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isFiniteNumber(value: unknown): value is number {
  return typeof value === "number" && Number.isFinite(value);
}
