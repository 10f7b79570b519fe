import canonicalizeModule from "canonicalize";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CanonicalJsonError, canonicalJson, sha256Hex } from "../../../src/evidence/canonical.js";

function fromBits(hex: string): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setBigUint64(0, BigInt(`0x${hex}`));
  return view.getFloat64(0);
}

describe("canonicalJson: RFC 8785 examples", () => {
  it("serialises the §3.2.2 sample (literals, numbers, string escapes)", () => {
    const input = String.raw`{
      "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
      "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
      "literals": [null, true, false]
    }`;
    expect(canonicalJson(JSON.parse(input))).toBe(
      String.raw`{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`,
    );
  });

  it("sorts members by UTF-16 code units, as in the §3.2.3 sample", () => {
    const input = String.raw`{
      "\u20ac": "Euro Sign",
      "\r": "Carriage Return",
      "\ufb33": "Hebrew Letter Dalet With Dagesh",
      "1": "One",
      "\ud83d\ude00": "Emoji: Grinning Face",
      "\u0080": "Control",
      "\u00f6": "Latin Small Letter O With Diaeresis"
    }`;
    // U+1F600 (surrogates D83D DE00) sorts before U+FB33 by code unit, after it by code point.
    expect(canonicalJson(JSON.parse(input))).toBe(
      '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis",' +
        '"\u20ac":"Euro Sign","\u{1F600}":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
    );
  });

  // Appendix B: IEEE-754 binary64 bit patterns and their required serialisation.
  it.each([
    ["0000000000000000", "0"],
    ["8000000000000000", "0"],
    ["0000000000000001", "5e-324"],
    ["8000000000000001", "-5e-324"],
    ["7fefffffffffffff", "1.7976931348623157e+308"],
    ["ffefffffffffffff", "-1.7976931348623157e+308"],
    ["4340000000000000", "9007199254740992"],
    ["c340000000000000", "-9007199254740992"],
    ["4430000000000000", "295147905179352830000"],
    ["44b52d02c7e14af5", "9.999999999999997e+22"],
    ["44b52d02c7e14af6", "1e+23"],
    ["44b52d02c7e14af7", "1.0000000000000001e+23"],
    ["444b1ae4d6e2ef4e", "999999999999999700000"],
    ["444b1ae4d6e2ef4f", "999999999999999900000"],
    ["444b1ae4d6e2ef50", "1e+21"],
    ["3eb0c6f7a0b5ed8c", "9.999999999999997e-7"],
    ["3eb0c6f7a0b5ed8d", "0.000001"],
    ["41b3de4355555553", "333333333.3333332"],
    ["41b3de4355555554", "333333333.33333325"],
    ["41b3de4355555555", "333333333.3333333"],
    ["41b3de4355555556", "333333333.3333334"],
    ["41b3de4355555557", "333333333.33333343"],
    ["becbf647612f3696", "-0.0000033333333333333333"],
    ["43143ff3c1cb0959", "1424953923781206.2"],
  ])("serialises the number %s as %s (Appendix B)", (bits, expected) => {
    expect(canonicalJson(fromBits(bits))).toBe(expected);
  });

  it.each(["7fffffffffffffff", "7ff0000000000000", "fff0000000000000"])(
    "refuses the non-finite number %s (Appendix B)",
    (bits) => {
      expect(() => canonicalJson(fromBits(bits))).toThrow(CanonicalJsonError);
    },
  );
});

describe("canonicalJson: everyday values", () => {
  it("writes numbers the ECMAScript way", () => {
    expect(canonicalJson([1e21, 1e20, 0.1, -0, 1.0, 5, 12.5, 1e-7])).toBe("[1e+21,100000000000000000000,0.1,0,1,5,12.5,1e-7]");
  });

  it("sorts nested members at every level and keeps array order", () => {
    expect(canonicalJson({ b: [{ z: 1, a: 2 }, "x"], a: { d: null, c: true } })).toBe('{"a":{"c":true,"d":null},"b":[{"a":2,"z":1},"x"]}');
  });

  it("keeps non-ASCII text raw and escapes only what JSON requires", () => {
    expect(canonicalJson({ s: "Zürich € \u{1F600} </script> \u0000\u001f\t\"\\" })).toBe(
      '{"s":"Zürich € \u{1F600} </script> \\u0000\\u001f\\t\\"\\\\"}',
    );
  });

  it("is independent of member insertion order", () => {
    expect(canonicalJson({ a: 1, b: { c: 2, d: 3 } })).toBe(canonicalJson({ b: { d: 3, c: 2 }, a: 1 }));
  });
});

describe("canonicalJson: agrees with the reference implementation", () => {
  // canonicalize is RFC 8785's reference JavaScript implementation, by its authors.
  const reference = canonicalizeModule as unknown as (value: unknown) => string;
  // Member names that could trip a serialiser: inherited ones, toJSON, index-like, code-unit order.
  const trickyName = fc.constantFrom("__proto__", "constructor", "toString", "toJSON", "valueOf", "1", "01", "a", "A", "\u20ac", "\u{1F600}", "\ufb33", "");
  const name = fc.oneof(trickyName, fc.string({ unit: "grapheme", maxLength: 4 }));
  const { json } = fc.letrec((tie) => ({
    json: fc.oneof({ depthSize: "small" }, fc.constant(null), fc.boolean(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.string(), tie("array"), tie("object")),
    array: fc.array(tie("json"), { maxLength: 4 }),
    // Own data members, so `__proto__` is a member as JSON.parse makes it, not a prototype.
    object: fc.array(fc.tuple(name, tie("json")), { maxLength: 5 }).map((members) => {
      const o: Record<string, unknown> = {};
      for (const [k, v] of members) Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
      return o;
    }),
  }));

  it("writes exactly what canonicalize writes for any JSON data", () => {
    fc.assert(
      fc.property(json, (value) => {
        expect(canonicalJson(value)).toBe(reference(value));
      }),
      { numRuns: 2_000, seed: 20_261_126 },
    );
  });

  it("writes a __proto__ member only where there is one", () => {
    const value = JSON.parse('{"b":{"__proto__":1},"a":{"x":2}}') as unknown;
    expect(canonicalJson(value)).toBe('{"a":{"x":2},"b":{"__proto__":1}}');
  });

  it("names the first offending path in member-name order", () => {
    expect(() => canonicalJson({ z: Number.NaN, a: { b: [1, undefined] } })).toThrow(expect.objectContaining({ path: "$.a.b[1]" }));
  });
});

describe("canonicalJson: refuses what has no faithful JSON form", () => {
  class Point {
    x = 1;
  }
  const cyclic: Record<string, unknown> = { a: 1 };
  cyclic.self = cyclic;

  it.each([
    ["undefined at the root", undefined, "$"],
    ["undefined member", { a: { b: undefined } }, "$.a.b"],
    ["undefined element", [1, undefined], "$[1]"],
    // eslint-disable-next-line no-sparse-arrays -- the hole is the case under test
    ["array hole", [1, , 3], "$[1]"],
    ["NaN", { n: Number.NaN }, "$.n"],
    ["Infinity", [Infinity], "$[0]"],
    ["-Infinity", { "odd key": -Infinity }, '$["odd key"]'],
    ["bigint", { n: 1n }, "$.n"],
    ["function", { f: () => 1 }, "$.f"],
    ["symbol", { s: Symbol("s") }, "$.s"],
    ["Date", { at: new Date(0) }, "$.at"],
    ["Map", { m: new Map() }, "$.m"],
    ["class instance", { p: new Point() }, "$.p"],
    ["cycle", cyclic, "$.self"],
    ["lone high surrogate", { s: "a\ud800b" }, "$.s"],
    ["lone low surrogate in a member name", { "\udc00": 1 }, "$"],
  ])("%s", (_name, value, path) => {
    let thrown: unknown;
    try {
      canonicalJson(value);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(CanonicalJsonError);
    expect((thrown as CanonicalJsonError).path).toBe(path);
    expect((thrown as Error).message).toMatch(/^cannot canonicalize /);
  });

  it("accepts shared (non-cyclic) references and null-prototype objects", () => {
    const shared = { x: 1 };
    const bare = Object.assign(Object.create(null) as object, { k: "v" });
    expect(canonicalJson({ a: shared, b: shared, c: bare })).toBe('{"a":{"x":1},"b":{"x":1},"c":{"k":"v"}}');
  });
});

describe("sha256Hex", () => {
  it("matches the FIPS 180-2 vector and hashes strings as UTF-8", () => {
    expect(sha256Hex("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    expect(sha256Hex("€")).toBe(sha256Hex(new Uint8Array([0xe2, 0x82, 0xac])));
  });
});
