import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { findJsonAmbiguities, isExactNumber } from "../../../src/base/json-scan.js";
import { MandateError } from "../../../src/base/errors.js";
import { parseJsonObject } from "../../../src/base/text.js";

/*
 * docs/architecture.md, The Intent path, step 5: signed bytes must mean one thing. The scanner
 * finds, in a text JSON.parse accepted, every member name that occurs twice in one object and
 * every number literal whose parsed double is written back as another decimal value.
 */

const SEED = Number(process.env.FUZZ_SEED ?? 20_261_126);
const bytes = (text: string) => new TextEncoder().encode(text);

/** The code and field errors parseJsonObject refuses `text` with. */
function refusal(text: string): { code: string; fields: string[]; errorCodes: string[] } {
  try {
    parseJsonObject(bytes(text));
  } catch (err) {
    if (!(err instanceof MandateError)) throw err;
    return { code: err.code, fields: err.fieldErrors.map((e) => e.field), errorCodes: err.fieldErrors.map((e) => e.code) };
  }
  throw new Error(`accepted: ${text}`);
}

describe("duplicate member names", () => {
  it.each([
    ['{"action":"wire_transfer","action":"reference_noop"}', ["action"]],
    ['{"a":1,"b":{"c":true,"d":null,"c":false}}', ["b.c"]],
    ['{"context":{"po":"1","p\\u006f":"2"}}', ["context.po"]],
    ['{"list":[{"x":1},{"x":2,"x":3}]}', ["list[1].x"]],
    ['{"a":[[1,{"k":0,"k":0}]]}', ["a[0][1].k"]],
    ['{"__proto__":1,"__proto__":2}', ["__proto__"]],
    ['{"constructor":1,"toString":2,"constructor":3}', ["constructor"]],
    ['{"":1,"":2}', [""]],
    ['{"n":1,"n":2,"n":3,"m":{"n":1}}', ["n", "n"]],
    [' { "a" : 1 , "a" : 2 } ', ["a"]],
  ])("%s → %j", (text, paths) => {
    expect(findJsonAmbiguities(text)).toEqual({ duplicateKeys: paths, impreciseNumbers: [] });
  });

  it("the same name in different objects, or as a value, is no duplicate", () => {
    const text = '{"a":{"x":1},"b":{"x":1},"c":["a","a"],"d":"a","x":{"a":"x","b":"\\"a\\""},"e":[{"x":1},{"x":1}]}';
    expect(findJsonAmbiguities(text)).toEqual({ duplicateKeys: [], impreciseNumbers: [] });
  });

  it("escapes inside names and values are read, not matched as text", () => {
    // "a\"" and "a" differ; "\\" ends before the quote; a brace inside a string is text.
    expect(findJsonAmbiguities('{"a\\"":1,"a":2,"b\\\\":"}{","c":"\\\\"}').duplicateKeys).toEqual([]);
    expect(findJsonAmbiguities('{"\\ud83d\\ude00":1,"😀":2}').duplicateKeys).toEqual(["😀"]);
  });
});

describe("numbers a double cannot hold exactly", () => {
  it.each(["0", "-0", "0.0", "1", "100", "1e2", "1E+2", "1.50", "12.5", "0.1", "-3.25e-3", "5e-324", "1.7976931348623157e308", "9007199254740992", "123456789012345680000", "1e21", "0e999999", "0.000001", "1e-7"])(
    "%s is exact",
    (literal) => {
      expect(isExactNumber(literal)).toBe(true);
    },
  );

  it.each(["100000.0000000000001", "9007199254740993", "1152921504606846976", "0.30000000000000001", "1e400", "-1e400", "1e-400", "123456789012345678901", "2.00000000000000000001"])(
    "%s is not",
    (literal) => {
      expect(isExactNumber(literal)).toBe(false);
    },
  );

  it("names every imprecise number by its path", () => {
    const text = '{"amount":100000.0000000000001,"context":{"ok":1.50,"big":9007199254740993},"list":[1,9007199254740993]}';
    expect(findJsonAmbiguities(text)).toEqual({ duplicateKeys: [], impreciseNumbers: ["amount", "context.big", "list[1]"] });
  });

  it("every double JavaScript writes reads back as exact (seeded)", () => {
    fc.assert(
      fc.property(fc.double({ noNaN: true, noDefaultInfinity: true }), (d) => isExactNumber(JSON.stringify(d))),
      { numRuns: 2000, seed: SEED },
    );
  });
});

describe("parseJsonObject", () => {
  it("refuses a duplicate key with 422 duplicate_key, one field error per duplicate, before anything else", () => {
    expect(refusal('{"nonce":"a","nonce":"b","x":{"y":1,"y":1}}')).toEqual({ code: "duplicate_key", fields: ["nonce", "x.y"], errorCodes: ["duplicate_key", "duplicate_key"] });
    // Duplicates are named even when a number is imprecise too.
    expect(refusal('{"a":9007199254740993,"a":1}').code).toBe("duplicate_key");
  });

  it("refuses an imprecise number with 422 imprecise_number naming it", () => {
    expect(refusal('{"amount":9007199254740993}')).toEqual({ code: "imprecise_number", fields: ["amount"], errorCodes: ["imprecise_number"] });
  });

  it("still reports text that is not JSON, or not an object, as validation_failed", () => {
    expect(refusal('{"a":1,"a":').code).toBe("validation_failed");
    expect(refusal("[1,1]").code).toBe("validation_failed");
  });

  it("accepts exact numbers and distinct names, parsed as JSON.parse parses them", () => {
    const text = '{"amount":1.50,"n":1e2,"m":-0,"context":{"a":"1","b":[1,2,3]}}';
    expect(parseJsonObject(bytes(text))).toEqual(JSON.parse(text));
  });

  it("reports at most 100 field errors for a body full of duplicates", () => {
    const text = `{${Array.from({ length: 500 }, () => '"k":1').join(",")}}`;
    const r = refusal(text);
    expect(r.code).toBe("duplicate_key");
    expect(r.fields).toHaveLength(100);
  });

  it("no JSON document JSON.stringify writes is ambiguous (seeded)", () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 4 })), (doc) => {
        const found = findJsonAmbiguities(JSON.stringify(doc));
        return found.duplicateKeys.length === 0 && found.impreciseNumbers.length === 0;
      }),
      { numRuns: 500, seed: SEED },
    );
  });

  it("scans nesting far deeper than a stack would allow, and a body-sized object, without recursion", () => {
    const deep = `${'{"a":['.repeat(100_000)}1${"]}".repeat(100_000)}`;
    expect(findJsonAmbiguities(deep)).toEqual({ duplicateKeys: [], impreciseNumbers: [] });
    expect(findJsonAmbiguities(`${'{"a":['.repeat(100_000)}{"b":1,"b":2}${"]}".repeat(100_000)}`).duplicateKeys).toEqual([`a${"[0].a".repeat(99_999)}[0].b`]);
    const wide = `{${Array.from({ length: 6000 }, (_, i) => `"k${i}":${i}.5`).join(",")}}`;
    expect(findJsonAmbiguities(wide)).toEqual({ duplicateKeys: [], impreciseNumbers: [] });
  });
});
