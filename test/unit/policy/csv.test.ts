import { describe, expect, it } from "vitest";
import { parseCsv } from "../../../src/policy/csv.js";

describe("parseCsv", () => {
  // name -> [text, records' fields]
  const valid: [string, string, string[][]][] = [
    ["plain fields", "a,b\n1,2\n", [["a", "b"], ["1", "2"]]],
    ["no final line break", "a,b\n1,2", [["a", "b"], ["1", "2"]]],
    ["CRLF line ends", "a,b\r\n1,2\r\n", [["a", "b"], ["1", "2"]]],
    ["a byte order mark", "\uFEFFa,b\n", [["a", "b"]]],
    ["empty fields", "a,,c\n,,\n", [["a", "", "c"], ["", "", ""]]],
    ["a quoted comma", 'a,"b,c"\n', [["a", "b,c"]]],
    ["a doubled quote", '"say ""hi""",x\n', [['say "hi"', "x"]]],
    ["a line break inside quotes", '"line 1\nline 2",x\n', [["line 1\nline 2", "x"]]],
    ["a CRLF inside quotes", '"line 1\r\nline 2",x\r\n', [["line 1\r\nline 2", "x"]]],
    ["an empty quoted field last", 'a,""\n', [["a", ""]]],
    ["a blank line", "a\n\nb\n", [["a"], [""], ["b"]]],
    ["untrimmed fields", "a , b\n", [["a ", " b"]]],
    ["an empty text", "", []],
  ];

  it.each(valid)("parses %s", (_name, text, records) => {
    const parsed = parseCsv(text);
    expect(parsed.ok && parsed.records.map((r) => r.fields)).toEqual(records);
  });

  it("numbers records by the line they start on", () => {
    const parsed = parseCsv('a\n"x\ny"\nb\n');
    expect(parsed.ok && parsed.records.map((r) => r.line)).toEqual([1, 2, 4]);
  });

  it("returns records with the wrong number of fields, with their lines, for the caller to refuse by row", () => {
    const parsed = parseCsv('a,b,c\n1,2\n"x\ny",2,3\n4,5,6,7\n\n');
    expect(parsed.ok && parsed.records).toEqual([
      { fields: ["a", "b", "c"], line: 1 },
      { fields: ["1", "2"], line: 2 },
      { fields: ["x\ny", "2", "3"], line: 3 },
      { fields: ["4", "5", "6", "7"], line: 5 },
      { fields: [""], line: 6 },
    ]);
  });

  // name -> [text, line, column (field number) of the error, part of the message]
  const invalid: [string, string, number, number, string][] = [
    ["an unclosed quote", 'a\n"never closed\n', 2, 1, "never closed"],
    ["an unclosed quote in a later column, spanning lines", 'principal,role,reports_to\nE1,"ceo,\nE2,cfo,ceo\n', 2, 2, "never closed"],
    ["a quote inside an unquoted field", 'a\nab"c,d\n', 2, 1, "quote inside"],
    ["a stray quote in the third column", 'a,b,c\n1,2,x"y\n', 2, 3, "quote inside"],
    ["a quote after leading spaces", 'a,b\n1, "2"\n', 2, 2, "quote inside"],
    ["text after a closing quote", 'a\n"ab"c,d\n', 2, 1, "after a closing quote"],
    ["text after a closing quote, at the line the field starts on", 'a,b\nx,"ab\ncd"e\n', 2, 2, "after a closing quote"],
    ["a bare carriage return", "a\rb\n", 1, 1, "carriage return"],
    ["a bare carriage return at the end", "a,b\n1,2\r", 2, 2, "carriage return"],
    ["a quote error after a CRLF inside quotes", 'h1,h2\n"q\r\nq",x\n1,"z"z\n', 4, 2, "after a closing quote"],
    ["a quote error after multi-byte characters", 'é,ü\n"€\nx",b\n1,"2"3\n', 4, 2, "after a closing quote"],
    ["an unclosed quote after a byte order mark", '\uFEFFa,b\n1,"2\n', 2, 2, "never closed"],
  ];

  it.each(invalid)("refuses %s", (_name, text, line, column, message) => {
    const parsed = parseCsv(text);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) {
      expect({ line: parsed.line, column: parsed.column }).toEqual({ line, column });
      expect(parsed.message).toContain(message);
    }
  });
});
