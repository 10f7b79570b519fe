import { Counter, Gauge, type Registry } from "prom-client";
import type { EngineStats, PolicyEngine } from "./engine.js";

/** Exposes the engine's time-limit and isolation figures in `registry` (GET /metrics), read at each scrape. */
export function registerPolicyMetrics(registry: Registry, engine: PolicyEngine): void {
  new Gauge({
    name: "mandate_policy_bundles_quarantined",
    help: "Policy bundles quarantined by the evaluation time limit: their evaluations run in a worker thread.",
    registers: [registry],
    collect() {
      this.set(engine.stats().quarantined);
    },
  });
  const counters: [string, string, Exclude<keyof EngineStats, "policyFailures">][] = [
    ["mandate_policy_evaluation_timeouts_total", "Policy evaluations past the time limit (503 evaluation_unavailable).", "timeouts"],
    ["mandate_policy_isolated_evaluations_total", "Policy evaluations run in a worker thread (bundles on probation, holding hand-written Rego, or quarantined).", "isolatedEvaluations"],
    ["mandate_policy_workers_terminated_total", "Evaluation worker threads terminated at the deadline and replaced.", "workersTerminated"],
  ];
  // Per policy key (the organization and version are in the 503's message and the log): which
  // policy fails, not just that evaluations do.
  const reportedFailures = new Map<string, number>();
  new Counter({
    name: "mandate_policy_runtime_errors_total",
    help: "Policy evaluations that failed with a Rego runtime error (503 evaluation_unavailable), by the policy key the error is located in (empty outside any policy).",
    labelNames: ["policy"],
    registers: [registry],
    collect() {
      for (const [policy, value] of engine.stats().policyFailures) {
        this.inc({ policy }, value - (reportedFailures.get(policy) ?? 0));
        reportedFailures.set(policy, value);
      }
    },
  });
  for (const [name, help, key] of counters) {
    let reported = 0;
    new Counter({
      name,
      help,
      registers: [registry],
      collect() {
        const value = engine.stats()[key];
        this.inc(value - reported);
        reported = value;
      },
    });
  }
}
