import { loadPolicy } from "@open-policy-agent/opa-wasm";
import { describe, expect, it } from "vitest";
import { buildBundle, checkRegoModule } from "../../../src/policy/build.js";
import { WASM_BUILTINS } from "../../../src/policy/builtins.js";
import { PolicyEngine, type DecisionInput } from "../../../src/policy/engine.js";
import { PolicyCompileError } from "../../../src/policy/errors.js";
import { ENTRYPOINT, EXPLAIN_ENTRYPOINT, wasmCapabilities } from "../../../src/policy/opa.js";
import { compileRules } from "../../../src/policy/rules.js";
import { readTarGz } from "../../../src/policy/tar.js";

function inputFor(action: string, extra: Record<string, unknown> = {}): DecisionInput {
  return {
    intent: { agent_id: "agt_1", action, requested_at: "2026-05-01T10:00:00.000Z", nonce: "n-1", ...extra },
    agent: { agent_id: "agt_1", state: "active" },
    principal: { principal_id: "prn_1", external_ref: "E1", kind: "person" },
    now: "2026-05-01T10:00:00.000Z",
  };
}

const handwritten = (actions: string, rest = 'results contains {"outcome": "ALLOW", "reason": "fine", "rule": "r"} if true') =>
  `package mandate.policies.custom\n\n${actions}\n\n${rest}\n`;

describe("a policy's actions", () => {
  it.each([
    ["an array", 'actions := ["pay", "refund"]'],
    ["a set", 'actions := {"pay"}'],
  ])("may be a constant %s of strings", async (_name, actions) => {
    await expect(checkRegoModule("custom", handwritten(actions))).resolves.toBeUndefined();
  });

  // name -> module text, line and column of the refused rule (0: none to point at)
  const refused: [string, string, number, number][] = [
    ["computed from the input", handwritten("actions := {input.intent.action}"), 3, 1],
    ["conditional", handwritten('actions := ["pay"] if input.intent.amount > 5'), 3, 1],
    ["a partial set", handwritten('actions contains "pay"'), 3, 1],
    ["a default", handwritten('default actions := ["pay"]'), 3, 1],
    ["defined twice", handwritten('actions := ["pay"]\n\nactions := ["pay"] if false'), 5, 1],
    ["not strings", handwritten("actions := [1, 2]"), 3, 1],
    ["a reference to another rule", handwritten('actions := names\n\nnames := ["pay"]'), 3, 1],
    ["missing", handwritten("# no actions"), 0, 0],
  ];

  it.each(refused)("is refused when %s, located", async (_name, rego, line, column) => {
    let error: unknown;
    await checkRegoModule("custom", rego).catch((err: unknown) => (error = err));
    expect(error).toBeInstanceOf(PolicyCompileError);
    const [problem] = (error as PolicyCompileError).errors;
    expect(problem).toMatchObject({ file: "policies/custom.rego", policy_key: "custom", code: "mandate_actions_not_constant" });
    if (line > 0) expect(problem).toMatchObject({ line, column });
    expect(problem?.message).toContain("constant list of strings");
  });

  it("is read by opa's parser, so a syntax error is opa's located error", async () => {
    let error: unknown;
    await checkRegoModule("custom", handwritten('actions := ["pay"', "")).catch((err: unknown) => (error = err));
    expect((error as PolicyCompileError).errors[0]).toMatchObject({ file: "policies/custom.rego", code: "rego_parse_error", line: expect.any(Number) });
  });
});

describe("hand-written Rego against the input schema", () => {
  // name -> results rule reading input wrongly, line and column of the refused read, part of the message
  const misread: [string, string, number, number, string][] = [
    ["a misspelt field", 'results contains {"outcome": "DENY", "reason": "big", "rule": "r"} if input.intent.amout > 5', 5, 71, "amout"],
    ["a number compared with a string", 'results contains {"outcome": "DENY", "reason": "big", "rule": "r"} if input.intent.amount == "5"', 5, 71, "match error"],
    ["an input member that does not exist", 'results contains {"outcome": "DENY", "reason": "big", "rule": "r"} if input.user.admin', 5, 71, "user"],
  ];

  it.each(misread)("refuses %s, located", async (_name, rule, line, column, message) => {
    let error: unknown;
    await buildBundle({ policies: [{ policy_key: "custom", version: 1, rego: handwritten('actions := ["pay"]', rule), handwritten: true }], graph: null, graph_version: null }).catch(
      (err: unknown) => (error = err),
    );
    expect(error).toBeInstanceOf(PolicyCompileError);
    const [problem] = (error as PolicyCompileError).errors;
    expect(problem).toMatchObject({ file: "policies/custom.rego", policy_key: "custom", code: "rego_type_error", line, column });
    expect(problem?.message).toContain(message);
  });

  it("accepts reads the schema describes", async () => {
    const rule = 'results contains {"outcome": "DENY", "reason": "big", "rule": "r"} if {\n\tinput.intent.amount > 5\n\tinput.intent.context.vendor == "x"\n\tinput.principal.kind == "person"\n}';
    await expect(buildBundle({ policies: [{ policy_key: "custom", version: 1, rego: handwritten('actions := ["pay"]', rule), handwritten: true }], graph: null, graph_version: null })).resolves.toBeDefined();
  });
});

describe("the built-in allowlist", () => {
  it("is exactly what publish compiles with", async () => {
    const caps = JSON.parse(await wasmCapabilities()) as { builtins: { name: string }[] };
    expect(caps.builtins.map((b) => b.name).sort()).toEqual([...WASM_BUILTINS].sort());
    expect(WASM_BUILTINS).not.toContain("time.now_ns");
    expect(WASM_BUILTINS).not.toContain("rand.intn");
    expect(WASM_BUILTINS).not.toContain("http.send");
  });
});

describe("a built bundle", () => {
  const rules = {
    policy_key: "refunds",
    version: 2,
    rego: compileRules("refunds", {
      actions: ["refund"],
      rules: [
        { id: "small", when: { amount: { lte: 100 } }, outcome: "ALLOW", reason: "small_refund" },
        { id: "large", when: { amount: { gt: 100 } }, outcome: "HUMAN_REVIEW", reason: "large_refund" },
      ],
    }),
  };
  const custom = { policy_key: "custom", version: 1, rego: handwritten('actions := ["refund", "ship"]') };

  it("keeps main.rego whole: its decision rule is in the bundle, and opa-wasm alone evaluates the entrypoint", async () => {
    const { bundle } = await buildBundle({ policies: [rules, custom], graph: null, graph_version: null });
    const files = readTarGz(bundle);
    expect(files.get("library/main.rego")?.toString("utf8")).toMatch(/^decision := \{"error"/m);
    const policy = await loadPolicy(new Uint8Array(files.get("policy.wasm")!));
    policy.setData(JSON.parse(files.get("data.json")!.toString("utf8")) as object);
    const [first] = policy.evaluate(inputFor("refund", { amount: 50 }), ENTRYPOINT) as { result: { outcome: string; reason: string } }[];
    expect(first?.result).toMatchObject({ outcome: "ALLOW", reason: "fine" });
    const [review] = policy.evaluate(inputFor("refund", { amount: 500 }), ENTRYPOINT) as { result: { outcome: string; reason: string } }[];
    expect(review?.result).toMatchObject({ outcome: "HUMAN_REVIEW", reason: "large_refund" });
  });

  it("explains the rules of the policies covering the action, through its explain entrypoint", async () => {
    const { bundle, digest } = await buildBundle({ policies: [rules, custom], graph: null, graph_version: null });
    expect(Object.keys((await loadPolicy(new Uint8Array(readTarGz(bundle).get("policy.wasm")!))).entrypoints)).toContain(EXPLAIN_ENTRYPOINT);
    const engine = new PolicyEngine({ timeoutMs: 60_000 });
    try {
      await engine.load(digest, bundle);
      const explained = await engine.explain(digest, inputFor("refund", { amount: 500 }));
      // The hand-written policy covers the action too but defines no explanation.
      expect(Object.keys(explained)).toEqual(["refunds"]);
      const steps = explained.refunds as { rule_id: string; fired: boolean }[];
      expect(steps.map((s) => [s.rule_id, s.fired])).toEqual([
        ["small", false],
        ["large", true],
      ]);
      expect(await engine.explain(digest, inputFor("ship"))).toEqual({});
    } finally {
      await engine.close();
    }
  });
});
