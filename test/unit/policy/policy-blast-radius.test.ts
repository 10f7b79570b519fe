import { beforeAll, describe, expect, it } from "vitest";
import { buildBundle, type BuiltBundle } from "../../../src/policy/build.js";
import { PolicyEngine, type DecisionInput } from "../../../src/policy/engine.js";
import { PolicyRuntimeError } from "../../../src/policy/errors.js";
import { registerPolicyMetrics } from "../../../src/policy/metrics.js";
import { Registry } from "prom-client";

function inputFor(action: string): DecisionInput {
  return {
    intent: { agent_id: "agt_1", action, amount: 5, requested_at: "2026-05-01T10:00:00.000Z", nonce: "n-1" },
    agent: { agent_id: "agt_1", state: "active" },
    principal: { principal_id: "prn_1", external_ref: "E1", kind: "person" },
    now: "2026-05-01T10:00:00.000Z",
  };
}

// Two rules giving one complete rule different values: a Rego runtime error (var assignment
// conflict) whenever `limit` is evaluated, i.e. for every Intent this policy decides.
const conflicting = {
  policy_key: "conflicting",
  version: 3,
  rego: [
    "package mandate.policies.conflicting",
    "",
    'actions := ["wire_transfer"]',
    "",
    "limit := 1 if input.intent",
    "",
    "limit := 2 if input.intent",
    "",
    'results contains {"outcome": "DENY", "reason": "too_much", "rule": "cap"} if input.intent.amount > limit',
    "",
  ].join("\n"),
};

const healthy = {
  policy_key: "healthy",
  version: 1,
  rego: ["package mandate.policies.healthy", "", 'actions := ["refund"]', "", 'results contains {"outcome": "ALLOW", "reason": "small_refund", "rule": "r"} if input.intent.amount < 10', ""].join("\n"),
};

async function runtimeError(run: () => unknown): Promise<PolicyRuntimeError> {
  try {
    await run();
  } catch (err) {
    expect(err).toBeInstanceOf(PolicyRuntimeError);
    return err as PolicyRuntimeError;
  }
  throw new Error("the evaluation did not fail");
}

describe("a policy failing at run time", () => {
  let built: BuiltBundle;

  beforeAll(async () => {
    built = await buildBundle({ policies: [conflicting, healthy], graph: null, graph_version: null });
  });

  it("fails only its own actions, located in its module, in the worker and in-process alike", async () => {
    const engine = new PolicyEngine();
    try {
      await engine.load(built.digest, built.bundle);
      // The bundle's first evaluation runs on probation, in a worker thread.
      const inWorker = await runtimeError(() => engine.decide(built.digest, inputFor("wire_transfer")));
      expect(inWorker.problem).toMatchObject({ file: "policies/conflicting.rego", policy_key: "conflicting", line: 7, column: 1 });
      expect(inWorker.problem.message).toContain("var assignment conflict");
      // The worker dropped its instance after the failure; the next evaluation loads it again.
      expect(await engine.decide(built.digest, inputFor("refund"))).toMatchObject({ outcome: "ALLOW", reason: "small_refund" });
      // Now known fast: in-process. The failure keeps the instance, and other actions still decide.
      const inProcess = await runtimeError(() => engine.decide(built.digest, inputFor("wire_transfer")));
      expect(inProcess.policyKey).toBe("conflicting");
      expect(engine.has(built.digest)).toBe(true);
      expect(engine.evaluate(built.digest, inputFor("refund"))).toMatchObject({ outcome: "ALLOW", reason: "small_refund" });
      expect(engine.evaluate(built.digest, inputFor("unknown_action")).reason).toBe("unrecognized_action");
      expect(engine.stats().policyFailures.get("conflicting")).toBe(2);
      expect(engine.stats().policyFailures.get("healthy")).toBeUndefined();
      const registry = new Registry();
      registerPolicyMetrics(registry, engine);
      expect(await registry.metrics()).toContain('mandate_policy_runtime_errors_total{policy="conflicting"} 2');
    } finally {
      await engine.close();
    }
  });
});
