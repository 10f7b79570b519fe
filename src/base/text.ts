import { MandateError, validationFailed, type FieldError } from "./errors.js";
import { findJsonAmbiguities } from "./json-scan.js";

/**
 * Characters Postgres text and jsonb cannot hold: U+0000 (refused by the
 * server) and lone UTF-16 surrogates (which the driver would silently store as
 * U+FFFD, changing the value). Refusing them where input arrives keeps a bad
 * byte from becoming a 500 deep in a transaction, or a quietly altered record.
 */
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

const snake = (name: string) => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** Deepest nesting of objects and arrays a request may carry; deeper input is refused, not recursed into. */
export const MAX_NESTING = 64;

/**
 * The first problem with the strings of a parsed JSON document or a protobuf-es message: a
 * string (value or object key) that cannot be stored, or nesting deeper than
 * {@link MAX_NESTING}. Message field names are reported in their wire (snake_case) spelling.
 * Iterative, so no input can exhaust the stack.
 */
export function findUnstorableText(root: unknown): FieldError | undefined {
  const stack: [unknown, string, number][] = [[root, "", 0]];
  while (stack.length > 0) {
    const [value, path, depth] = stack.pop()!;
    if (typeof value === "string") {
      if (UNSTORABLE.test(value)) return { field: path || "(body)", code: "invalid_character", message: INVALID_CHARACTER };
      continue;
    }
    if (value === null || typeof value !== "object" || value instanceof Uint8Array) continue;
    if (depth >= MAX_NESTING) return { field: path || "(body)", code: "too_deep", message: `nested more than ${MAX_NESTING} levels` };
    if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) stack.push([value[i], `${path}[${i}]`, depth + 1]);
      continue;
    }
    const isMessage = "$typeName" in value;
    const at = (key: string) => (path ? `${path}.${key}` : key);
    for (const [key, v] of Object.entries(value)) {
      if (key === "$typeName") continue;
      if (UNSTORABLE.test(key)) return { field: at(key), code: "invalid_character", message: INVALID_CHARACTER };
      // A protobuf-es oneof is `{case, value}`: report it under the chosen field's name.
      if (isMessage && v && typeof v === "object" && "case" in v && "value" in v) stack.push([v.value, at(snake(String(v.case))), depth + 1]);
      else stack.push([v, at(isMessage ? snake(key) : key), depth + 1]);
    }
  }
  return undefined;
}

const INVALID_CHARACTER = "contains U+0000 or an unpaired surrogate, which cannot be stored";

/** Throws 422 `validation_failed` naming the first string that cannot be stored, or the first too-deep value. */
export function requireStorableText(value: unknown): void {
  const problem = findUnstorableText(value);
  if (problem) throw validationFailed([problem]);
}

// ignoreBOM keeps a leading U+FEFF in the text (the default drops it silently), so JSON.parse refuses it:
// two byte strings, with and without a byte order mark, must not read as one signed document.
const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** Parses a JSON body; the bytes must be valid UTF-8 (a replacement character would silently change the value). */
export function parseJson(bytes: Uint8Array): unknown {
  return parseJsonText(decodeUtf8(bytes));
}

function decodeUtf8(bytes: Uint8Array): string {
  try {
    return utf8.decode(bytes);
  } catch {
    throw validationFailed([{ field: "(body)", code: "invalid_encoding", message: "the body is not valid UTF-8" }]);
  }
}

function parseJsonText(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw validationFailed([{ field: "(body)", code: "malformed_json", message: "the body is not valid JSON" }]);
  }
}

/**
 * Parses signed bytes (an Intent, a heartbeat, an execution receipt or adapter report) as a
 * JSON object that means one thing and whose every string can be stored: the document
 * evaluated and kept as evidence is exactly the one that was signed. A member name twice in one
 * object is 422 `duplicate_key`, a number no double holds exactly 422 `imprecise_number`, each
 * with a field error per occurrence (docs/architecture.md, The Intent path, step 5). Unsigned
 * request bodies (`parseJson`) become protobuf messages and are not checked this way.
 */
export function parseJsonObject(bytes: Uint8Array): Record<string, unknown> {
  const text = decodeUtf8(bytes);
  const doc = parseJsonText(text);
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) {
    throw validationFailed([{ field: "(body)", code: "invalid_type", message: "expected a JSON object" }]);
  }
  const { duplicateKeys, impreciseNumbers } = findJsonAmbiguities(text);
  if (duplicateKeys.length) {
    throw new MandateError(
      "duplicate_key",
      "The signed document names a member twice in one object, so it does not mean one thing.",
      duplicateKeys.map((field) => ({ field, code: "duplicate_key", message: "this member name occurs more than once in its object" })),
    );
  }
  if (impreciseNumbers.length) {
    throw new MandateError(
      "imprecise_number",
      "The signed document holds a number a double cannot hold exactly.",
      impreciseNumbers.map((field) => ({ field, code: "imprecise_number", message: "a double cannot hold this number exactly; it would be evaluated and recorded as another value" })),
    );
  }
  requireStorableText(doc);
  return doc as Record<string, unknown>;
}
