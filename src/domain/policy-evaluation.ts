import { PolicyEngine, type Decision, type DecisionInput } from "../policy/engine.js";
import { EvaluationError, EvaluationTimeoutError, PolicyRuntimeError } from "../policy/errors.js";
import type { AuthorityGraph } from "../policy/graph-types.js";
import type { PolicyStore } from "../storage/policies.js";
import { MandateError, validationFailed, type FieldError } from "../base/errors.js";
import { buildOrgBundle } from "./bundles.js";

/** What the engine decided and against what. */
export interface Evaluation {
  outcome: "ALLOW" | "DENY" | "HUMAN_REVIEW";
  reason: string;
  trace: readonly unknown[];
  policyVersions: Record<string, number>;
  graphVersion: number;
  bundleDigest: string;
  /** What was evaluated: the decision path records it beside the Intent. */
  input: EvaluationInput;
}

/** The input document of the Rego entrypoint. */
export type EvaluationInput = DecisionInput;

/**
 * An engine failure as callers see it: 503 `evaluation_unavailable`. Past the time limit the
 * message names the policies of the bundle (an evaluation that did not finish has no trace to
 * narrow them down by) and its digest.
 */
function evaluationUnavailable(err: unknown, digest: string, policyVersions: Record<string, number>): unknown {
  if (err instanceof MandateError) return err;
  if (err instanceof EvaluationTimeoutError) {
    const keys = Object.entries(policyVersions).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    const named = keys.length === 0 ? "" : ` ${keys.length === 1 ? "policy" : "policies"} ${keys.map(([k, v]) => `${k} (version ${v})`).join(", ")} of`;
    return new MandateError(
      "evaluation_unavailable",
      `Evaluating the${named} policy bundle ${digest} did not finish within the ${err.limitMs} ms time limit (${err.message}); nothing was decided.` +
        (err.kind === "queue_full" ? "" : " The bundle is evaluated in isolation until a new version is published."),
    );
  }
  if (err instanceof PolicyRuntimeError) {
    // Located in a policy's module (the bundle holds policies/<key>.rego): that policy, which
    // is evaluated only for its own actions, so the others still decide (docs/architecture.md, Policies).
    const { file, line, column, message, policy_key: key } = err.problem;
    const failing = key === undefined ? `the policy bundle ${digest}` : `policy ${key} (version ${policyVersions[key] ?? "unknown"})`;
    return new MandateError(
      "evaluation_unavailable",
      `Evaluating ${failing} failed at ${file ?? "?"}:${line ?? "?"}:${column ?? "?"}: ${message}; nothing was decided. Actions the policy does not declare are unaffected.`,
    );
  }
  return new MandateError("evaluation_unavailable", "The decision could not be evaluated; nothing was decided.");
}

/**
 * Evaluation of the organizations' stored bundles (the decision path), and of trial bundles
 * built from named versions for dry runs and replays (domain/policy-trials.ts). Records nothing.
 */
export class PolicyEvaluation {
  constructor(
    private readonly store: Pick<PolicyStore, "bundle" | "head" | "versions" | "activeGraph" | "graphVersion">,
    private readonly engine: PolicyEngine,
    /** Told the cause of an engine failure answered with the generic 503, which names none (the service logs it). */
    private readonly onUnexplainedFailure: (failure: { digest: string; cause: unknown }) => void = () => undefined,
  ) {}

  /**
   * Loads (once per digest) and evaluates a stored bundle under the time limit. Any engine
   * failure is 503 `evaluation_unavailable`, never ALLOW; past the limit the message names the
   * bundle's policies (`policyVersions`, the head's).
   */
  async evaluateBundle(
    digest: string,
    input: EvaluationInput,
    policyVersions: Record<string, number> = {},
  ): Promise<{ outcome: Evaluation["outcome"]; reason: string; trace: readonly unknown[] }> {
    try {
      if (!this.engine.has(digest)) {
        const bundle = await this.store.bundle(digest);
        if (!bundle) throw new EvaluationError(`bundle ${digest} is missing`);
        await this.engine.load(digest, bundle);
      }
      return await this.engine.decide(digest, input);
    } catch (err) {
      throw this.unavailable(err, digest, policyVersions);
    }
  }

  /** Evaluates against the organization's active head. */
  async evaluate(organizationId: string, input: EvaluationInput): Promise<Evaluation> {
    const head = await this.store.head(organizationId);
    if (!head) throw new MandateError("evaluation_unavailable", "The organization has no policy bundle.");
    const result = await this.evaluateBundle(head.bundle_digest, input, head.policy_versions);
    return { ...result, policyVersions: head.policy_versions, graphVersion: head.graph_version, bundleDigest: head.bundle_digest, input };
  }

  /**
   * The bundle a dry run or replay evaluates, loaded: the organization's active versions with
   * `named` ones (any state) in their place, and graph version `graphVersion` (any state; 0 for
   * the active one). With nothing named it is the active head's stored bundle. 422 naming a
   * version or graph version the organization lacks, or a bundle that does not compile.
   */
  async trialBundle(organizationId: string, named: Record<string, number>, graphVersion: number): Promise<TrialBundle> {
    if (Object.keys(named).length === 0 && graphVersion === 0) {
      const head = await this.store.head(organizationId);
      if (!head) throw new MandateError("evaluation_unavailable", "The organization has no policy bundle.");
      if (!this.engine.has(head.bundle_digest)) {
        const bytes = await this.store.bundle(head.bundle_digest);
        if (!bytes) throw new MandateError("evaluation_unavailable", "The organization's policy bundle is missing.");
        await this.load(head.bundle_digest, bytes, head.policy_versions);
      }
      return { digest: head.bundle_digest, policyVersions: head.policy_versions, graphVersion: head.graph_version };
    }
    const all = await this.store.versions(organizationId);
    const modules = all.filter((v) => v.state === "active" && !Object.hasOwn(named, v.policy_key));
    const missing: FieldError[] = [];
    for (const [key, version] of Object.entries(named)) {
      const v = all.find((x) => x.policy_key === key && x.version === version);
      if (v) modules.push(v);
      else missing.push({ field: `policy_versions.${key}`, code: "not_found", message: "no such policy version" });
    }
    const graph = graphVersion === 0 ? await this.store.activeGraph(organizationId) : await this.store.graphVersion(organizationId, graphVersion);
    if (graphVersion !== 0 && !graph) missing.push({ field: "graph_version", code: "not_found", message: "no such graph version" });
    if (missing.length) throw validationFailed(missing);
    const { bundle, head } = await buildOrgBundle(modules, graph ? { version: graph.version, graph: graph.graph as AuthorityGraph } : null);
    await this.load(bundle.digest, bundle.bytes, head.policy_versions);
    return { digest: bundle.digest, policyVersions: head.policy_versions, graphVersion: head.graph_version };
  }

  /**
   * Evaluates one input against a trial bundle under the time limit, as the decision path does
   * (`decide`: a bundle on probation goes to a worker first, then in-process once proven). A rule
   * failing at run time is the author's to fix: 422 `policy_runtime_error`, located when opa
   * names the place; past the time limit it is 503 `evaluation_unavailable`, as on the decision path.
   */
  async decideTrial(bundle: TrialBundle, input: EvaluationInput): Promise<Decision> {
    try {
      return await this.engine.decide(bundle.digest, input);
    } catch (err) {
      // After a trap the engine drops the instance; the next trial loads the bundle again.
      throw trialFailure(err, bundle);
    }
  }

  /**
   * What each rule of the policies covering the input's action did (engine.explain): whether it
   * fired and, if not, the first condition that failed with the value seen. Policies written as
   * Rego by hand have no rules to explain and are left out; so is everything when the bundle was
   * built before bundles carried the explanation (an active head published before then).
   */
  async explainTrial(bundle: TrialBundle, input: EvaluationInput): Promise<RuleExplanation[]> {
    let byPolicy: Record<string, unknown>;
    try {
      byPolicy = await this.engine.explain(bundle.digest, input);
    } catch (err) {
      if (err instanceof EvaluationError && / was built without /.test(err.message)) return [];
      throw trialFailure(err, bundle);
    }
    const rules: RuleExplanation[] = [];
    for (const key of Object.keys(byPolicy).sort()) {
      const entries = byPolicy[key];
      if (!Array.isArray(entries)) continue;
      for (const e of entries as Record<string, unknown>[]) {
        const failed = e.failed_condition as Record<string, unknown> | null | undefined;
        rules.push({
          policy_key: key,
          policy_version: bundle.policyVersions[key] ?? 0,
          rule_id: String(e.rule_id ?? ""),
          fired: e.fired === true,
          outcome: typeof e.outcome === "string" ? (e.outcome as Evaluation["outcome"]) : null,
          reason: typeof e.reason === "string" ? e.reason : null,
          failed_condition: failed ? { field: String(failed.field ?? ""), operator: String(failed.operator ?? ""), expected: failed.expected ?? null, actual: failed.actual ?? null } : null,
          line: typeof e.line === "number" ? e.line : 0,
        });
      }
    }
    return rules;
  }

  private async load(digest: string, bytes: Uint8Array, policyVersions: Record<string, number>): Promise<void> {
    try {
      await this.engine.load(digest, bytes);
    } catch (err) {
      throw this.unavailable(err, digest, policyVersions);
    }
  }

  private unavailable(err: unknown, digest: string, policyVersions: Record<string, number>): unknown {
    const explained = err instanceof MandateError || err instanceof EvaluationTimeoutError || err instanceof PolicyRuntimeError;
    if (!explained) this.onUnexplainedFailure({ digest, cause: err });
    return evaluationUnavailable(err, digest, policyVersions);
  }
}

/** What one rule of a covering policy did with a dry run's input. */
export interface RuleExplanation {
  policy_key: string;
  policy_version: number;
  rule_id: string;
  fired: boolean;
  /** Set when fired. */
  outcome: Evaluation["outcome"] | null;
  reason: string | null;
  /** Set when not fired: the first condition that did not hold, with the value the input had (null when missing). */
  failed_condition: { field: string; operator: string; expected: unknown; actual: unknown } | null;
  /** The rule's line in its rules document; 0 when unknown. */
  line: number;
}

/** A bundle loaded for a dry run or replay, and what was compiled into it. */
export interface TrialBundle {
  digest: string;
  policyVersions: Record<string, number>;
  graphVersion: number;
}

/**
 * A dry run's or replay's failure as callers see it. Time limits and engine trouble stay 503
 * `evaluation_unavailable`; a rule that fails at run time (located by opa: file, line, column),
 * or policies whose result is malformed, is the author's to fix: 422 `policy_runtime_error`.
 */
function trialFailure(err: unknown, bundle: TrialBundle): unknown {
  if (err instanceof MandateError || !(err instanceof EvaluationError) || err instanceof EvaluationTimeoutError) {
    return evaluationUnavailable(err, bundle.digest, bundle.policyVersions);
  }
  if (err instanceof PolicyRuntimeError) {
    const p = err.problem;
    const where = `${p.file ?? "?"}:${p.line ?? "?"}:${p.column ?? "?"}`;
    return new MandateError("policy_runtime_error", `${p.policy_key ? `Policy ${p.policy_key}` : "A policy"} failed at run time: ${where}: ${p.message}`, [
      { field: p.file ?? "bundle", code: "runtime_error", message: p.message, line: p.line, column: p.column },
    ]);
  }
  if (/^(policy error|the decision|the bundle produced no decision)/.test(err.message)) {
    return new MandateError("policy_runtime_error", `The policies did not produce a well-formed decision: ${err.message}`, [
      { field: "bundle", code: "runtime_error", message: err.message },
    ]);
  }
  return evaluationUnavailable(err, bundle.digest, bundle.policyVersions);
}
