/**
 * What JSON.parse smooths over in a signed document: a member name given twice in one object
 * (JSON.parse keeps the last value, another parser the first) and a number literal no double
 * holds (JSON.parse rounds it). Either way the parsed document would not be exactly what was
 * signed (docs/architecture.md, The Intent path, step 5). JSON.parse stays the parser: this is a
 * single pass over a text it has already accepted, with an explicit stack instead of recursion,
 * so its cost is linear in the text and no nesting exhausts the call stack.
 */
export interface JsonAmbiguities {
  /** Paths of members whose name already occurred in the same object, in text order (`nonce`, `context.po`, `items[1].x`). */
  duplicateKeys: string[];
  /** Paths of number literals whose parsed double is written back as another decimal value. */
  impreciseNumbers: string[];
}

/** One open object (names seen, current member) or array (current index). */
interface Frame {
  names: Set<string> | null;
  key: string;
  index: number;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * Finds the duplicate member names and imprecise numbers of `text`, which must be a JSON text
 * JSON.parse accepts, reporting at most `limit` of each.
 */
export function findJsonAmbiguities(text: string, limit = 100): JsonAmbiguities {
  const found: JsonAmbiguities = { duplicateKeys: [], impreciseNumbers: [] };
  const stack: Frame[] = [];
  // Inside an object, whether the next string is a member name (after `{` or `,`) or a value.
  let expectName = false;
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      stack.push({ names: c === 0x7b ? new Set() : null, key: "", index: 0 });
      expectName = c === 0x7b;
      i++;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      stack.pop();
      expectName = false;
      i++;
    } else if (c === 0x2c /* , */) {
      const top = stack[stack.length - 1]!;
      if (top.names) expectName = true;
      else top.index++;
      i++;
    } else if (c === QUOTE) {
      let end = i + 1;
      for (;;) {
        const s = text.charCodeAt(end);
        if (s === QUOTE) break;
        end += s === BACKSLASH ? 2 : 1;
      }
      end++; // past the closing quote
      if (expectName) {
        const top = stack[stack.length - 1]!;
        const raw = text.slice(i + 1, end - 1);
        // Names compare as decoded: "p\u006f" is "po".
        const name = raw.includes("\\") ? (JSON.parse(text.slice(i, end)) as string) : raw;
        top.key = name;
        if (top.names!.has(name)) {
          if (found.duplicateKeys.length < limit) found.duplicateKeys.push(pathOf(stack));
        } else top.names!.add(name);
        expectName = false;
      }
      i = end;
    } else if (c === 0x2d /* - */ || (c >= 0x30 && c <= 0x39)) {
      let end = i + 1;
      while (end < n && isNumberChar(text.charCodeAt(end))) end++;
      if (found.impreciseNumbers.length < limit && !isExactNumber(text.slice(i, end))) found.impreciseNumbers.push(pathOf(stack));
      i = end;
    } else {
      // Whitespace, `:`, and the letters of true, false and null.
      i++;
    }
  }
  return found;
}

/** Digits, sign, point and exponent: what may follow the first character of a JSON number. */
function isNumberChar(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || c === 0x2e /* . */ || c === 0x65 /* e */ || c === 0x45 /* E */ || c === 0x2b /* + */ || c === 0x2d; /* - */
}

/** The path of the value the innermost open container is at, as field errors name it. */
function pathOf(stack: readonly Frame[]): string {
  let path = "";
  for (const f of stack) path = f.names ? (path ? `${path}.${f.key}` : f.key) : `${path}[${f.index}]`;
  return stack.length === 0 ? "(body)" : path;
}

/**
 * Whether the JSON number `literal` is exactly what its parsed double reads back as: the
 * decimal value JavaScript writes for the double (as evidence and storage write it) equals the
 * literal's. `1.50`, `1e2` and `100` are exact; `100000.0000000000001` and `9007199254740993`
 * (past 2^53) are not, nor is anything that overflows or underflows.
 */
export function isExactNumber(literal: string): boolean {
  const d = Number(literal);
  return Number.isFinite(d) && decimalValue(literal) === decimalValue(String(d));
}

/**
 * A canonical form of a decimal number written as JSON or by Number#toString: sign, the
 * significant digits without leading or trailing zeros, and the power of ten of the last one;
 * "0" for zero of either sign.
 */
function decimalValue(s: string): string {
  const negative = s.charCodeAt(0) === 0x2d;
  const e = s.search(/[eE]/);
  const mantissa = s.slice(negative ? 1 : 0, e < 0 ? s.length : e);
  const dot = mantissa.indexOf(".");
  const fraction = dot < 0 ? "" : mantissa.slice(dot + 1);
  const digits = dot < 0 ? mantissa : mantissa.slice(0, dot) + fraction;
  let exponent = (e < 0 ? 0 : Number(s.slice(e + 1))) - fraction.length;
  let start = 0;
  while (start < digits.length && digits.charCodeAt(start) === 0x30) start++;
  let end = digits.length;
  while (end > start && digits.charCodeAt(end - 1) === 0x30) {
    end--;
    exponent++;
  }
  if (start === end) return "0";
  return `${negative ? "-" : ""}${digits.slice(start, end)}e${exponent}`;
}
