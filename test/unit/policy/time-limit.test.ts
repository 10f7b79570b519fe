import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { buildBundle, type BuiltBundle } from "../../../src/policy/build.js";
import { PolicyEngine, type DecisionInput, type QuarantineEvent } from "../../../src/policy/engine.js";
import { EvaluationTimeoutError } from "../../../src/policy/errors.js";
import { compileRules, STARTER_POLICY_KEY, STARTER_RULES } from "../../../src/policy/rules.js";

// Issue 19 item 5; docs/architecture.md, Policies: the per-evaluation time limit, probation and quarantine.

const starter = { policy_key: STARTER_POLICY_KEY, version: 1, rego: compileRules(STARTER_POLICY_KEY, STARTER_RULES) };
// Far past a 50 ms limit: a comprehension over a million numbers (about a second in-process).
const slow = {
  policy_key: "busy_loop",
  version: 1,
  rego: [
    "package mandate.policies.busy_loop",
    "",
    'actions := {"reference_noop"}',
    "",
    'results contains {"outcome": "ALLOW", "reason": "counted", "rule": "count"} if {',
    "  count({n | some n in numbers.range(1, 1000000); n % 7 == 0}) > 0",
    "}",
    "",
  ].join("\n"),
};

// Fast unless the Intent asks otherwise: a probe of the first evaluation cannot catch it.
const sometimesSlow = {
  policy_key: "sometimes_slow",
  version: 1,
  handwritten: true,
  rego: [
    "package mandate.policies.sometimes_slow",
    "",
    'actions := {"reference_noop"}',
    "",
    'results contains {"outcome": "ALLOW", "reason": "counted", "rule": "count"} if {',
    "  input.intent.context.slow",
    "  count({n | some n in numbers.range(1, 1000000); n % 7 == 0}) > 0",
    "}",
    "",
  ].join("\n"),
};

const input: DecisionInput = {
  intent: { agent_id: "agt_1", action: "reference_noop", requested_at: "2026-05-01T10:00:00.000Z", nonce: "n-1" },
  agent: { agent_id: "agt_1", state: "active" },
  principal: { principal_id: "prn_1", external_ref: "E1", kind: "person" },
  now: "2026-05-01T10:00:00.000Z",
};

describe("the evaluation time limit", () => {
  let fast: BuiltBundle;
  let busy: BuiltBundle;
  let handwritten: BuiltBundle;
  let engine: PolicyEngine | undefined;

  beforeAll(async () => {
    [fast, busy, handwritten] = await Promise.all([
      buildBundle({ policies: [starter], graph: null, graph_version: null }),
      buildBundle({ policies: [starter, slow], graph: null, graph_version: null }),
      buildBundle({ policies: [starter, sometimesSlow], graph: null, graph_version: null }),
    ]);
  });

  afterEach(async () => {
    await engine?.close();
    engine = undefined;
  });

  it("evaluates a new bundle once in a worker, then in-process", async () => {
    engine = new PolicyEngine();
    await engine.load(fast.digest, fast.bundle);
    const first = await engine.decide(fast.digest, input);
    expect(engine.stats().isolatedEvaluations).toBe(1);
    const second = engine.decide(fast.digest, input);
    // In-process: a value, not a promise.
    expect(second).not.toBeInstanceOf(Promise);
    expect(second).toEqual(first);
    expect(first).toMatchObject({ outcome: "ALLOW", reason: "starter_reference_action" });
    expect(engine.stats()).toMatchObject({ isolatedEvaluations: 1, quarantined: 0, timeouts: 0 });
  });

  it("stops an evaluation past the limit in the worker, quarantines the bundle and keeps the event loop free", async () => {
    const events: QuarantineEvent[] = [];
    engine = new PolicyEngine({ timeoutMs: 50, onQuarantine: (e) => events.push(e) });
    await engine.load(busy.digest, busy.bundle);
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 5);
    const attempt = () =>
      Promise.resolve()
        .then(() => engine!.decide(busy.digest, input))
        .catch((e: unknown) => e);
    try {
      // Stopped at the limit; then held to the end of that second and refused; then, the second
      // over (a timer's margin past it), tried and stopped again.
      for (const kind of ["timeout", "cooling_down", "timeout"]) {
        if (kind === "timeout") await new Promise((resolve) => setTimeout(resolve, 20));
        const err = await attempt();
        expect(err).toBeInstanceOf(EvaluationTimeoutError);
        expect(err).toMatchObject({ digest: busy.digest, limitMs: 50, kind });
      }
    } finally {
      clearInterval(ticker);
    }
    // The main thread ran timers while the worker counted (an in-process evaluation would have blocked them).
    expect(ticks).toBeGreaterThan(0);
    expect(engine.isQuarantined(busy.digest)).toBe(true);
    expect(events).toEqual([{ digest: busy.digest, reason: "timeout", ms: 50, limitMs: 50, where: "worker" }]);
    expect(engine.stats()).toMatchObject({ quarantined: 1, timeouts: 2, isolatedEvaluations: 2, workersTerminated: 2 });
    // Another bundle is unaffected.
    await engine.load(fast.digest, fast.bundle);
    expect(await engine.decide(fast.digest, input)).toMatchObject({ outcome: "ALLOW" });
    expect(engine.isQuarantined(fast.digest)).toBe(false);
  });

  it("refuses an in-process evaluation that took longer than the limit, and quarantines its bundle", async () => {
    const events: QuarantineEvent[] = [];
    engine = new PolicyEngine({ timeoutMs: 50, onQuarantine: (e) => events.push(e) });
    await engine.load(busy.digest, busy.bundle);
    // evaluate() is the synchronous in-process call: it cannot be interrupted, only timed.
    expect(() => engine!.evaluate(busy.digest, input)).toThrow(EvaluationTimeoutError);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ digest: busy.digest, reason: "timeout", where: "in_process" });
    expect(events[0]!.ms).toBeGreaterThan(50);
    expect(engine.isQuarantined(busy.digest)).toBe(true);
  });

  it("never evaluates a bundle holding hand-written Rego on the event loop, so a slow later input is stopped at the limit", async () => {
    // A generous limit, so that the fast inputs are never judged slow on a loaded machine.
    const events: QuarantineEvent[] = [];
    engine = new PolicyEngine({ timeoutMs: 1_000, onQuarantine: (e) => events.push(e) });
    await engine.load(handwritten.digest, handwritten.bundle);
    for (let i = 0; i < 5; i++) {
      const result = engine.decide(handwritten.digest, input);
      // In a worker, every time: a promise, never a value computed on this thread.
      expect(result).toBeInstanceOf(Promise);
      expect(await result).toMatchObject({ outcome: "ALLOW", reason: "starter_reference_action" });
    }
    const slowInput = { ...input, intent: { ...input.intent, context: { slow: true } } };
    const slow = engine.decide(handwritten.digest, slowInput);
    expect(slow).toBeInstanceOf(Promise);
    const err = await Promise.resolve(slow).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EvaluationTimeoutError);
    expect(err).toMatchObject({ kind: "timeout" });
    // Past the limit in the worker: stopped at the hard deadline, or finished past the limit and refused.
    expect(events).toEqual([expect.objectContaining({ reason: "timeout", where: "worker" })]);
    expect(engine.stats()).toMatchObject({ isolatedEvaluations: 6 });
  });
});
