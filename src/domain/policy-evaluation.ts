import { PolicyEngine, type DecisionInput } from "../policy/engine.js";
import { EvaluationError, EvaluationTimeoutError } from "../policy/errors.js";
import type { AuthorityGraph } from "../policy/graph-types.js";
import type { AgentStore } from "../storage/agents.js";
import type { PolicyStore } from "../storage/policies.js";
import type { PrincipalStore } from "../storage/principals.js";
import type { OrgCaller } from "../base/caller.js";
import { MandateError, validationFailed } from "../base/errors.js";
import { buildOrgBundle } from "./bundles.js";

/** What the engine decided and against what. */
export interface Evaluation {
  outcome: "ALLOW" | "DENY" | "HUMAN_REVIEW";
  reason: string;
  trace: readonly unknown[];
  policyVersions: Record<string, number>;
  graphVersion: number;
  bundleDigest: string;
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
  return new MandateError("evaluation_unavailable", "The decision could not be evaluated; nothing was decided.");
}

/**
 * Evaluation of the organizations' stored bundles (the decision path) and dry runs against
 * named versions. Records nothing.
 */
export class PolicyEvaluation {
  constructor(
    private readonly store: Pick<PolicyStore, "bundle" | "head" | "versions" | "activeGraph">,
    private readonly principals: Pick<PrincipalStore, "get">,
    private readonly agents: Pick<AgentStore, "get">,
    private readonly engine: PolicyEngine,
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
      throw evaluationUnavailable(err, digest, policyVersions);
    }
  }

  /** Evaluates against the organization's active head. */
  async evaluate(organizationId: string, input: EvaluationInput): Promise<Evaluation> {
    const head = await this.store.head(organizationId);
    if (!head) throw new MandateError("evaluation_unavailable", "The organization has no policy bundle.");
    const result = await this.evaluateBundle(head.bundle_digest, input, head.policy_versions);
    return { ...result, policyVersions: head.policy_versions, graphVersion: head.graph_version, bundleDigest: head.bundle_digest };
  }

  /** A dry run of an unsigned Intent for one of the organization's agents; records nothing. */
  async dryRunIntent(caller: OrgCaller, intent: Record<string, unknown>, named: Record<string, number>): Promise<Evaluation> {
    const agentId = typeof intent.agent_id === "string" ? intent.agent_id : "";
    const agent = agentId ? await this.agents.get(caller.organizationId, agentId) : null;
    if (!agent) throw validationFailed([{ field: "intent.agent_id", code: "unknown_agent", message: "must name an agent of this organization" }]);
    const principal = await this.principals.get(caller.organizationId, agent.acting_for_principal_id);
    if (!principal) throw new MandateError("evaluation_unavailable", "The agent's principal is missing.");
    const input: EvaluationInput = {
      intent: intent as unknown as EvaluationInput["intent"],
      agent: { agent_id: agent.agent_id, state: agent.state },
      principal: { principal_id: principal.principal_id, external_ref: principal.external_ref, kind: principal.kind },
      now: new Date().toISOString(),
    };
    return this.dryRun(caller, input, named);
  }

  /** A dry run against named versions (any state) in place of the active ones; records nothing. */
  private async dryRun(caller: OrgCaller, input: EvaluationInput, named: Record<string, number>): Promise<Evaluation> {
    if (Object.keys(named).length === 0) return this.evaluate(caller.organizationId, input);
    const all = await this.store.versions(caller.organizationId);
    const modules = all.filter((v) => v.state === "active" && !(v.policy_key in named));
    for (const [key, version] of Object.entries(named)) {
      const v = all.find((x) => x.policy_key === key && x.version === version);
      if (!v) throw validationFailed([{ field: `policy_versions.${key}`, code: "not_found", message: "no such policy version" }]);
      modules.push(v);
    }
    const graph = await this.store.activeGraph(caller.organizationId);
    const { bundle, head } = await buildOrgBundle(modules, graph ? { version: graph.version, graph: graph.graph as AuthorityGraph } : null);
    let result;
    try {
      await this.engine.load(bundle.digest, bundle.bytes);
      result = await this.engine.decide(bundle.digest, input);
    } catch (err) {
      throw evaluationUnavailable(err, bundle.digest, head.policy_versions);
    }
    return { ...result, policyVersions: head.policy_versions, graphVersion: head.graph_version, bundleDigest: bundle.digest };
  }
}
