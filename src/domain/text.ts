import { validationFailed } from "./errors.js";

/**
 * Characters Postgres text and jsonb cannot hold: U+0000 (refused by the
 * server) and lone UTF-16 surrogates (which the driver would silently store as
 * U+FFFD, changing the value). Refusing them where input arrives keeps a bad
 * byte from becoming a 500 deep in a transaction, or a quietly altered record.
 */
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

const snake = (name: string) => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/**
 * The path of the first string (value or object key) that cannot be stored,
 * in a parsed JSON document or a protobuf-es message; `undefined` if all are fine.
 * Message field names are reported in their wire (snake_case) spelling.
 */
export function unstorableTextPath(value: unknown, path = ""): string | undefined {
  if (typeof value === "string") return UNSTORABLE.test(value) ? path || "(body)" : undefined;
  if (value === null || typeof value !== "object" || value instanceof Uint8Array) return undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = unstorableTextPath(value[i], `${path}[${i}]`);
      if (found) return found;
    }
    return undefined;
  }
  const isMessage = "$typeName" in value;
  const at = (key: string) => (path ? `${path}.${key}` : key);
  for (const [key, v] of Object.entries(value)) {
    if (key === "$typeName") continue;
    if (UNSTORABLE.test(key)) return at(key);
    // A protobuf-es oneof is `{case, value}`: report it under the chosen field's name.
    if (isMessage && v && typeof v === "object" && "case" in v && "value" in v) {
      const found = unstorableTextPath(v.value, at(snake(String(v.case))));
      if (found) return found;
      continue;
    }
    const found = unstorableTextPath(v, at(isMessage ? snake(key) : key));
    if (found) return found;
  }
  return undefined;
}

/** Throws 422 `validation_failed` naming the first string that cannot be stored. */
export function requireStorableText(value: unknown): void {
  const field = unstorableTextPath(value);
  if (field) throw validationFailed([{ field, code: "invalid_character", message: "contains U+0000 or an unpaired surrogate, which cannot be stored" }]);
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** Parses a JSON body; the bytes must be valid UTF-8 (a replacement character would silently change the value). */
export function parseJson(bytes: Uint8Array): unknown {
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    throw validationFailed([{ field: "(body)", code: "invalid_encoding", message: "the body is not valid UTF-8" }]);
  }
  try {
    return JSON.parse(text);
  } catch {
    throw validationFailed([{ field: "(body)", code: "malformed_json", message: "the body is not valid JSON" }]);
  }
}

/**
 * Parses signed bytes as a JSON object whose every string can be stored: the
 * document kept as evidence is exactly the one that was signed.
 */
export function parseJsonObject(bytes: Uint8Array): Record<string, unknown> {
  const doc = parseJson(bytes);
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) {
    throw validationFailed([{ field: "(body)", code: "invalid_type", message: "expected a JSON object" }]);
  }
  requireStorableText(doc);
  return doc as Record<string, unknown>;
}
