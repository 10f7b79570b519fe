import { loadPolicy, type LoadedPolicy } from "@open-policy-agent/opa-wasm";
import { beforeAll, describe, expect, it } from "vitest";
import { buildBundle } from "../../../src/policy/build.js";
import type { IntentInput } from "../../../src/policy/engine.js";
import { EXPLAIN_ENTRYPOINT } from "../../../src/policy/opa.js";
import { compileRules } from "../../../src/policy/rules.js";
import { readTarGz } from "../../../src/policy/tar.js";

// `explain` (src/policy/rules-rego.ts) as a published bundle carries it: built by buildBundle
// (the publish path) and read through the bundle's explain entrypoint with opa-wasm.

const policies: Record<string, unknown> = {
  vendor: [
    "actions: [vendor_payment]",
    "fields:",
    "  context.tier: {type: enum, values: [gold, silver]}",
    "rules:",
    "  - id: new_vendor",
    "    when:",
    "      context.vendor_age_days: {lt: 30}",
    "    outcome: HUMAN_REVIEW",
    "    reason: new_vendor",
    "  - id: big_eur",
    "    when:",
    "      currency: {eq: EUR}",
    "      amount: {gt: 1000, lte: 5000}",
    "    outcome: DENY",
    "    reason: too_big",
    "  - id: graph",
    "    when:",
    "      counterparty: {prefix: acme}",
    "    authority: true",
    "  - id: otherwise",
    "    outcome: ALLOW",
    "    reason: fine",
  ].join("\n"),
  "as-object": { actions: ["obj"], rules: [{ id: "r", when: { "context.x": { exists: true } }, outcome: "ALLOW", reason: "ok" }] },
};

let wasm: LoadedPolicy;

beforeAll(async () => {
  const built = await buildBundle({
    policies: Object.entries(policies).map(([key, source]) => ({ policy_key: key, version: 1, rego: compileRules(key, source) })),
    graph: null,
    graph_version: null,
  });
  wasm = await loadPolicy(readTarGz(built.bundle).get("policy.wasm")!);
});

function explain(key: string, fields: Partial<IntentInput>): unknown[] {
  const input = {
    intent: { agent_id: "a", action: key === "vendor" ? "vendor_payment" : "obj", requested_at: "2026-01-01T00:00:00.000Z", nonce: "n", ...fields },
    agent: { agent_id: "a", state: "active" },
    principal: { principal_id: "p", external_ref: "E1", kind: "person" },
    now: "2026-01-01T00:00:00.000Z",
  };
  const [result] = wasm.evaluate(input, EXPLAIN_ENTRYPOINT) as { result: Record<string, unknown[]> }[];
  // Only the policies covering the Intent's action are explained.
  expect(Object.keys(result!.result)).toEqual([key]);
  return result!.result[key]!;
}

const entry = (rule_id: string, line: number, rest: object) => ({ policy_key: "vendor", rule_id, line, ...rest });
const notFired = { fired: false, outcome: null, reason: null };
const invalid = { fired: true, outcome: "HUMAN_REVIEW", reason: "invalid_policy_input" };

describe("explain: each rule of a rules document, whether it fired and if not why", () => {
  it("reports the condition a mistyped field made undecidable, with the value seen and the rule's line", () => {
    expect(explain("vendor", { amount: 10, currency: "USD", counterparty: "globex", context: { vendor_age_days: "3" } })).toEqual([
      entry("fields", 3, { ...notFired, failed_condition: null }),
      entry("new_vendor", 5, { ...invalid, failed_condition: { field: "context.vendor_age_days", operator: "lt", expected: 30, actual: "3" } }),
      entry("big_eur", 10, { ...notFired, failed_condition: { field: "currency", operator: "eq", expected: "EUR", actual: "USD" } }),
      entry("graph", 16, { ...notFired, failed_condition: { field: "counterparty", operator: "prefix", expected: "acme", actual: "globex" } }),
      entry("otherwise", 20, { fired: true, outcome: "ALLOW", reason: "fine", failed_condition: null }),
    ]);
  });

  it("names the first condition that failed, in document order, and null for a missing field", () => {
    const rules = explain("vendor", { amount: 6000, currency: "EUR", counterparty: "acme ltd", context: { vendor_age_days: 40, tier: "bronze" } });
    expect(rules).toEqual([
      entry("fields", 3, { ...invalid, failed_condition: { field: "context.tier", operator: "type", expected: { type: "enum", values: ["gold", "silver"] }, actual: "bronze" } }),
      entry("new_vendor", 5, { ...notFired, failed_condition: { field: "context.vendor_age_days", operator: "lt", expected: 30, actual: 40 } }),
      entry("big_eur", 10, { ...notFired, failed_condition: { field: "amount", operator: "lte", expected: 5000, actual: 6000 } }),
      // The authority rule fired: its outcome is the graph's (none here: no authority).
      entry("graph", 16, { fired: true, outcome: "DENY", reason: "no_delegated_authority", failed_condition: null }),
      entry("otherwise", 20, { fired: true, outcome: "ALLOW", reason: "fine", failed_condition: null }),
    ]);
    const [, missing] = explain("vendor", { amount: 1, currency: "EUR", counterparty: "x" });
    expect(missing).toEqual(entry("new_vendor", 5, { ...invalid, failed_condition: { field: "context.vendor_age_days", operator: "lt", expected: 30, actual: null } }));
  });

  it("has line 0 for a document given as an object, and works for a dashed key", () => {
    expect(explain("as-object", {})).toEqual([
      { policy_key: "as-object", rule_id: "r", fired: false, outcome: null, reason: null, failed_condition: { field: "context.x", operator: "exists", expected: true, actual: null }, line: 0 },
    ]);
  });
});
