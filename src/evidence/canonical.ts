import { hash } from "node:crypto";
import canonicalizeModule from "canonicalize";

// canonicalize ships a CommonJS `module.exports = function` with a d.ts that declares an ES
// default export; under NodeNext the default import is module.exports, so the cast only
// corrects the declared type.
const canonicalize = canonicalizeModule as unknown as (value: unknown) => string | undefined;

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
 */
export function canonicalJson(value: unknown): string {
  assertJsonData(value, "$", new Set());
  // assertJsonData has ruled out every input for which canonicalize returns undefined.
  return canonicalize(value) as string;
}

/** Lower-case hex SHA-256 of `data` (strings are hashed as UTF-8), the digest format of evidence. */
export function sha256Hex(data: string | Uint8Array): string {
  return hash("sha256", data, "hex");
}

// A high surrogate not followed by a low one, or a low surrogate not preceded by a high one.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Walks `value` and throws at the first thing that is not plain JSON data. */
function assertJsonData(value: unknown, path: string, ancestors: Set<object>): void {
  switch (typeof value) {
    case "boolean":
      return;
    case "string":
      if (LONE_SURROGATE.test(value)) throw new CanonicalJsonError(path, "string contains a lone UTF-16 surrogate");
      return;
    case "number":
      if (!Number.isFinite(value)) throw new CanonicalJsonError(path, `${value} is not a JSON number`);
      return;
    case "object":
      break;
    default:
      throw new CanonicalJsonError(path, `${typeof value} is not JSON data`);
  }
  if (value === null) return;
  if (ancestors.has(value)) throw new CanonicalJsonError(path, "circular reference");
  ancestors.add(value);
  if (Array.isArray(value)) {
    // Index loop, not forEach: holes must be seen (canonicalize would skip them).
    for (let i = 0; i < value.length; i++) assertJsonData(value[i], `${path}[${i}]`, ancestors);
  } else {
    const proto: unknown = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) {
      const kind = (value as { constructor?: { name?: string } }).constructor?.name ?? "non-plain object";
      throw new CanonicalJsonError(path, `${kind} is not a plain JSON object`);
    }
    for (const [key, member] of Object.entries(value)) {
      if (LONE_SURROGATE.test(key)) throw new CanonicalJsonError(path, `member name ${JSON.stringify(key)} contains a lone UTF-16 surrogate`);
      assertJsonData(member, `${path}${memberPath(key)}`, ancestors);
    }
  }
  ancestors.delete(value);
}

function memberPath(key: string): string {
  return /^[A-Za-z_$][\w$]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
}
