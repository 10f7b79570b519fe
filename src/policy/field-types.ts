/**
 * Declared types of Intent fields, shared by rules documents (`fields`, which the compiled
 * Rego checks) and integration contracts (`field_types`, which the Intent path checks before
 * evaluating). One definition, so a value a contract admits is a value the rules accept.
 */

/** The types a field can be declared with; wire names as the API spells them. */
export type FieldTypeName = "number" | "string" | "boolean" | "timestamp" | "enum";

/** Every type name, in the order the proto's FieldTypeKind numbers them. */
export const FIELD_TYPE_NAMES: readonly FieldTypeName[] = ["number", "string", "boolean", "timestamp", "enum"];

/** The declared type of one Intent field. */
export interface FieldDeclaration {
  type: FieldTypeName;
  /** A required field must be present (not missing, not null). */
  required?: boolean;
  /** The allowed values of an enum (and only of an enum). */
  values?: string[];
}

/**
 * RFC 3339 date-time (section 5.6): date, `T` (or `t`, or a space as the RFC permits), time with
 * optional fraction, and `Z` or a numeric offset. The same text is matched in Rego
 * (regex.match), so both sides accept exactly the same strings.
 */
export const RFC3339_PATTERN = "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[Tt ]([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$";
const RFC3339 = new RegExp(RFC3339_PATTERN);

/** Intent fields that are not in `context`, with the type intake already guarantees for them. */
export const TOP_LEVEL_FIELD_TYPES: ReadonlyMap<string, "number" | "string"> = new Map([
  ["amount", "number"],
  ["currency", "string"],
  ["counterparty", "string"],
  ["resource", "string"],
  ["action", "string"],
]);

/** Types a declaration may give a top-level field: the one intake guarantees, or a narrower string. */
export function typesAllowedFor(field: string): readonly FieldTypeName[] | undefined {
  const base = TOP_LEVEL_FIELD_TYPES.get(field);
  if (base === undefined) return undefined;
  return base === "number" ? ["number"] : ["string", "timestamp", "enum"];
}

/** Whether a present (not missing, not null) value has the declared type. */
export function valueFits(declaration: FieldDeclaration, value: unknown): boolean {
  switch (declaration.type) {
    case "number":
      return typeof value === "number" && Number.isFinite(value);
    case "string":
      return typeof value === "string";
    case "boolean":
      return typeof value === "boolean";
    case "timestamp":
      return typeof value === "string" && RFC3339.test(value);
    case "enum":
      return typeof value === "string" && (declaration.values ?? []).includes(value);
  }
}

/** Words for a declaration in messages: `a number`, `one of "a", "b"`. */
export function describeDeclaration(declaration: FieldDeclaration): string {
  if (declaration.type === "enum") return `one of ${(declaration.values ?? []).map((v) => JSON.stringify(v)).join(", ")}`;
  if (declaration.type === "timestamp") return "an RFC 3339 timestamp";
  return `a ${declaration.type}`;
}

/** One problem with a declaration, at a path relative to it (`[]`, `["values", 2]`). */
export interface DeclarationProblem {
  path: (string | number)[];
  message: string;
}

/**
 * Checks that `value` is a well-formed declaration: `{type, required?, values?}` with a known
 * type, `values` a non-empty list of distinct strings exactly when the type is enum. Returns
 * every problem (empty when valid).
 */
export function checkDeclaration(value: unknown): DeclarationProblem[] {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return [{ path: [], message: "a field declaration must be an object {type, required?, values?}" }];
  }
  const d = value as Record<string, unknown>;
  const problems: DeclarationProblem[] = [];
  for (const key of Object.keys(d)) {
    if (!["type", "required", "values"].includes(key)) problems.push({ path: [key], message: `unknown key "${key}" (allowed: type, required, values)` });
  }
  if (!FIELD_TYPE_NAMES.includes(d.type as FieldTypeName)) {
    problems.push({ path: ["type"], message: `\`type\` must be one of ${FIELD_TYPE_NAMES.join(", ")}` });
  }
  if ("required" in d && typeof d.required !== "boolean") problems.push({ path: ["required"], message: "`required` must be true or false" });
  if (d.type === "enum") {
    if (!Array.isArray(d.values) || d.values.length === 0) problems.push({ path: ["values"], message: "an enum needs `values`, a non-empty list of strings" });
    else {
      const seen = new Set<unknown>();
      d.values.forEach((v, i) => {
        if (typeof v !== "string") problems.push({ path: ["values", i], message: "enum values are strings" });
        else if (seen.has(v)) problems.push({ path: ["values", i], message: `"${v}" is listed twice` });
        seen.add(v);
      });
    }
  } else if ("values" in d) problems.push({ path: ["values"], message: "`values` belongs to an enum only" });
  return problems;
}

/**
 * What a field is known to be when the document is compiled: its declaration, the type intake
 * guarantees for a top-level field, or (an undeclared context key) any scalar, in which case
 * each condition's operand decides the type it needs at evaluation.
 */
export type StaticKind = FieldDeclaration | { type: "scalar" };

/** The static kind of a field given a document's declarations ({@link StaticKind}). */
export function staticKind(field: string, declared: ReadonlyMap<string, FieldDeclaration>): StaticKind {
  const declaration = declared.get(field);
  if (declaration) return declaration;
  const top = TOP_LEVEL_FIELD_TYPES.get(field);
  return top ? { type: top } : { type: "scalar" };
}

