import { describe, expect, it } from "vitest";
import { buildBundle, checkRegoModule } from "../../../src/policy/build.js";
import { PolicyCompileError, PolicySourceError, type CompileProblem } from "../../../src/policy/errors.js";
import { compileRules, STARTER_POLICY_KEY, STARTER_RULES } from "../../../src/policy/rules.js";
import { readTarGz } from "../../../src/policy/tar.js";
import { fixtureGraph, loadAuthorityFixture } from "../../policy-fixtures/fixture.js";

const starter = { policy_key: STARTER_POLICY_KEY, version: 1, rego: compileRules(STARTER_POLICY_KEY, STARTER_RULES) };

const module = (body: string) => `package mandate.policies.custom\n\nactions := {"custom"}\n\n${body}\n`;

async function compileProblems(run: () => Promise<unknown>): Promise<CompileProblem[]> {
  try {
    await run();
  } catch (error) {
    expect(error).toBeInstanceOf(PolicyCompileError);
    return (error as PolicyCompileError).errors;
  }
  throw new Error("opa accepted the module");
}

describe("checkRegoModule", () => {
  it("accepts a hand-written module that uses the library", async () => {
    const rego = module(
      [
        "results contains r if {",
        "\tsome r in data.mandate.authority.result",
        "\tfalse",
        "}",
        "",
        'results contains {"outcome": "DENY", "reason": "night_time", "rule": "curfew"} if {',
        '\tendswith(input.now, "Z")',
        "}",
      ].join("\n"),
    );
    await expect(checkRegoModule("custom", rego)).resolves.toBeUndefined();
  });

  // name -> [module body, line, column, opa code, part of the message]
  const refused: [string, string, number, number, string, string][] = [
    ["a parse error", "results contains x if {\n\tx := 1 +\n}", 7, 1, "rego_parse_error", "unexpected"],
    ["an unknown function", "results contains x if {\n\tx := nope(1)\n}", 6, 7, "rego_type_error", "undefined function nope"],
    ["http.send, which WebAssembly cannot run", 'results contains x if {\n\tx := http.send({"method": "get", "url": "http://x"})\n}', 6, 7, "rego_type_error", "http.send"],
    ["time.now_ns, which would make decisions depend on the clock", "results contains x if {\n\tx := time.now_ns()\n}", 6, 7, "rego_type_error", "time.now_ns"],
    ["rand.intn, which is not deterministic", 'results contains x if {\n\tx := rand.intn("s", 10)\n}', 6, 7, "rego_type_error", "rand.intn"],
    ["an unsafe variable", "results contains x if {\n\ty == 1\n}", 5, 18, "rego_unsafe_var_error", "var x is unsafe"],
  ];

  it.each(refused)("refuses %s with line and column", async (_name, body, line, column, code, message) => {
    const [first] = await compileProblems(() => checkRegoModule("custom", module(body)));
    expect(first).toMatchObject({ file: "policies/custom.rego", policy_key: "custom", line, column, code });
    expect(first?.message).toContain(message);
  });

  it("refuses a module declaring another package before running opa", async () => {
    await expect(checkRegoModule("custom", "package mandate.main\n")).rejects.toBeInstanceOf(PolicySourceError);
  });

  it("refuses a bad policy key", async () => {
    await expect(checkRegoModule("../x", "package x\n")).rejects.toBeInstanceOf(PolicySourceError);
  });
});

describe("buildBundle", () => {
  it("packs policy.wasm and data.json with the graph and its index", async () => {
    const fixture = loadAuthorityFixture();
    const graph = fixtureGraph(fixture);
    const { bundle, digest } = await buildBundle({ policies: [starter], graph, graph_version: 4 });
    expect(digest).toMatch(/^[0-9a-f]{64}$/);
    const files = readTarGz(bundle);
    expect(files.get("policy.wasm")?.subarray(0, 4)).toEqual(Buffer.from([0, 0x61, 0x73, 0x6d]));
    const data = JSON.parse(files.get("data.json")!.toString("utf8"));
    expect(data.mandate.graph).toEqual(graph);
    expect(data.mandate.graph_index.version).toBe(4);
    expect(data.mandate.graph_index.authority.E900.vendor_payment.USD).toHaveLength(2);
    expect([...files.keys()].filter((f) => f.endsWith(".rego")).sort()).toEqual([
      "dispatch.rego",
      "library/authority.rego",
      "library/bundle.rego",
      "library/main.rego",
      "policies/starter.rego",
    ]);
  });

  it("writes no graph when there is none", async () => {
    const { bundle } = await buildBundle({ policies: [starter], graph: null, graph_version: null });
    expect(JSON.parse(readTarGz(bundle).get("data.json")!.toString("utf8"))).toEqual({});
  });

  it("builds a bundle with no policy at all", async () => {
    const { digest } = await buildBundle({ policies: [], graph: null, graph_version: null });
    expect(digest).toMatch(/^[0-9a-f]{64}$/);
  });

  it("names the policy whose module does not compile", async () => {
    const broken = { policy_key: "custom", version: 3, rego: module("results contains x if {\n\tx := nope(1)\n}") };
    const [first] = await compileProblems(() => buildBundle({ policies: [starter, broken], graph: null, graph_version: null }));
    expect(first).toMatchObject({ policy_key: "custom", file: "policies/custom.rego", line: 6, column: 7 });
  });

  it("refuses a module whose package is not its policy key", async () => {
    const misnamed = { policy_key: "custom", version: 1, rego: starter.rego };
    await expect(buildBundle({ policies: [misnamed], graph: null, graph_version: null })).rejects.toBeInstanceOf(PolicySourceError);
  });

  it("refuses the same policy key twice", async () => {
    await expect(buildBundle({ policies: [starter, starter], graph: null, graph_version: null })).rejects.toBeInstanceOf(
      PolicySourceError,
    );
  });
});
