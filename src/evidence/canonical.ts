import { hash } from "node:crypto";

/** Thrown for a value that has no RFC 8785 form, so callers never sign a lossy serialisation. */
export class CanonicalJsonError extends Error {
  override readonly name = "CanonicalJsonError";

  constructor(
    /** JSONPath-like location of the offending value, `$` being the root. */
    readonly path: string,
    reason: string,
  ) {
    super(`cannot canonicalize ${path}: ${reason}`);
  }
}

/**
 * Serialises `value` as RFC 8785 (JCS) canonical JSON, the byte form every evidence digest is
 * computed over.
 *
 * Only plain JSON data is accepted: null, booleans, finite numbers, strings without lone
 * surrogates (I-JSON, RFC 7493 §2.1, which RFC 8785 builds on), arrays without holes and plain
 * objects. Anything JSON.stringify would silently drop or rewrite (undefined, functions, symbols,
 * NaN/Infinity, bigint, Date and other class instances, Maps, cycles) throws a
 * {@link CanonicalJsonError} naming the path, because a digest over a silently altered value
 * would not verify against the stored one.
 *
 * Written here in one pass that checks and writes together, rather than with the reference
 * implementation (the `canonicalize` package, which the tests compare against on generated
 * values) after a separate check: that pair made the largest allocation of a decision, at twice
 * the CPU time (docs/performance.md, CPU per request).
 */
export function canonicalJson(value: unknown): string {
  return writeJson(value, new Set(), []);
}

/** Lower-case hex SHA-256 of `data` (strings are hashed as UTF-8), the digest format of evidence. */
export function sha256Hex(data: string | Uint8Array): string {
  return hash("sha256", data, "hex");
}

// A high surrogate not followed by a low one, or a low surrogate not preceded by a high one.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Strings JSON.stringify would escape; others are written between quotes as they are. */
const NEEDS_ESCAPE = /["\\\u0000-\u001f]/;

/**
 * RFC 8785's form of `value`: members ordered by their names' UTF-16 code units (what
 * Array.prototype.sort does with strings); numbers and string escapes as JSON.stringify writes
 * them, which is where the RFC takes them from. Throws at the first thing that is not plain
 * JSON data. `path` holds the keys and indices down to `value`, turned into text only for an error.
 */
function writeJson(value: unknown, ancestors: Set<object>, path: (string | number)[]): string {
  switch (typeof value) {
    case "boolean":
      return value ? "true" : "false";
    case "string":
      return writeString(value, path, "string");
    case "number":
      if (!Number.isFinite(value)) throw new CanonicalJsonError(pathText(path), `${value} is not a JSON number`);
      return JSON.stringify(value);
    case "object":
      break;
    default:
      throw new CanonicalJsonError(pathText(path), `${typeof value} is not JSON data`);
  }
  if (value === null) return "null";
  if (ancestors.has(value)) throw new CanonicalJsonError(pathText(path), "circular reference");
  ancestors.add(value);
  let out: string;
  if (Array.isArray(value)) {
    out = "[";
    // Index loop, not forEach: holes must be seen.
    for (let i = 0; i < value.length; i++) {
      path.push(i);
      out += (i === 0 ? "" : ",") + writeJson(value[i], ancestors, path);
      path.pop();
    }
    out += "]";
  } else {
    const proto: unknown = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) {
      const kind = (value as { constructor?: { name?: string } }).constructor?.name ?? "non-plain object";
      throw new CanonicalJsonError(pathText(path), `${kind} is not a plain JSON object`);
    }
    const record = value as Record<string, unknown>;
    const names = Object.keys(record).sort();
    out = "{";
    for (let i = 0; i < names.length; i++) {
      const name = names[i]!;
      const written = writeString(name, path, "member name");
      path.push(name);
      out += (i === 0 ? "" : ",") + written + ":" + writeJson(record[name], ancestors, path);
      path.pop();
    }
    out += "}";
  }
  ancestors.delete(value);
  return out;
}

function writeString(text: string, path: readonly (string | number)[], what: "string" | "member name"): string {
  if (LONE_SURROGATE.test(text)) {
    throw new CanonicalJsonError(pathText(path), what === "string" ? "string contains a lone UTF-16 surrogate" : `member name ${JSON.stringify(text)} contains a lone UTF-16 surrogate`);
  }
  return NEEDS_ESCAPE.test(text) ? JSON.stringify(text) : `"${text}"`;
}

/** `$` followed by `.name`, `["odd name"]` or `[index]` for each step of `path`. */
function pathText(path: readonly (string | number)[]): string {
  let text = "$";
  for (const step of path) {
    if (typeof step === "number") text += `[${step}]`;
    else text += /^[A-Za-z_$][\w$]*$/.test(step) ? `.${step}` : `[${JSON.stringify(step)}]`;
  }
  return text;
}
