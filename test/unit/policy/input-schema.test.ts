import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { INPUT_SCHEMA } from "../../../src/policy/input-schema.js";
import { projectRoot, runOpa } from "../../../src/policy/opa.js";
import { compileRules } from "../../../src/policy/rules.js";

// INPUT_SCHEMA as publish hands it to `opa check --schema`: the library, the fixture policies and
// compiled rules documents pass; a hand-written module reading a field input never has, or
// comparing one with a value of another type, is refused with its line.

let dir: string;
let schema: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "mandate-schema-"));
  schema = join(dir, "input.json");
  await writeFile(schema, JSON.stringify(INPUT_SCHEMA));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function check(name: string, rego: string) {
  const file = join(dir, `${name}.rego`);
  await writeFile(file, rego);
  return runOpa(["check", "--format", "json", "--schema", schema, join(projectRoot(), "policies"), file]);
}

const module = (body: string) => `package mandate.policies.custom\n\nactions := {"custom"}\n\n${body}\n`;

describe("INPUT_SCHEMA", () => {
  it("accepts the library and every fixture policy", async () => {
    const fixtures = join(projectRoot(), "test", "policy-fixtures", "policies");
    expect((await readdir(fixtures)).length).toBeGreaterThan(0);
    const run = await runOpa(["check", "--schema", schema, join(projectRoot(), "policies"), fixtures]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
  });

  it("accepts Rego compiled from a rules document using every operator and declared types", async () => {
    const rego = compileRules("custom", {
      actions: ["custom"],
      fields: { "context.tier": { type: "enum", values: ["a"] }, "context.at": { type: "timestamp", required: true } },
      rules: [
        { id: "all", when: { amount: { gt: 1, lte: 9, neq: 5 }, currency: { in: ["USD"], not_in: ["EUR"] }, counterparty: { prefix: "ac", exists: true }, "context.tier": { eq: "a" } }, outcome: "DENY", reason: "x" },
        { id: "graph", authority: true },
      ],
    });
    const run = await check("compiled", rego);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
  });

  // name -> [module body, line, part of the message]
  const refused: [string, string, number, string][] = [
    ["a misspelt Intent field", 'results contains {"outcome": "DENY", "reason": "x", "rule": "r"} if {\n\tinput.intent.amout > 5\n}', 6, "undefined ref: input.intent.amout"],
    ["an input member that does not exist", 'results contains {"outcome": "DENY", "reason": "x", "rule": "r"} if {\n\tinput.user.role == "admin"\n}', 6, "undefined ref: input.user"],
    ["a number compared with a string", 'results contains {"outcome": "DENY", "reason": "x", "rule": "r"} if {\n\tinput.intent.amount == "5"\n}', 6, "match error"],
  ];

  it.each(refused)("refuses %s with its line", async (_name, body, line, message) => {
    const run = await check("custom", module(body));
    expect(run.code).not.toBe(0);
    const [first] = (JSON.parse(run.stderr) as { errors: { message: string; code: string; location: { row: number } }[] }).errors;
    expect(first).toMatchObject({ code: "rego_type_error", location: { row: line } });
    expect(first!.message).toContain(message);
  });
});
