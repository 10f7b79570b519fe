import type { OrgCaller } from "../base/caller.js";
import { MandateError, validationFailed, type FieldError } from "../base/errors.js";
import { parseJsonObject } from "../base/text.js";
import type { AgentStore } from "../storage/agents.js";
import type { DecisionStore, Outcome, RecordedEvaluation } from "../storage/decisions.js";
import type { IntegrationStore } from "../storage/integrations.js";
import type { PrincipalStore } from "../storage/principals.js";
import { parseIntent, requireContractFields, type Intent } from "./intents.js";
import type { Evaluation, EvaluationInput, PolicyEvaluation, RuleExplanation } from "./policy-evaluation.js";

/** How many recorded Intents a replay evaluates unless told, and at most. */
export const REPLAY_DEFAULT_LIMIT = 1000;
export const REPLAY_MAX_LIMIT = 10_000;

// A replay evaluates in-process on the event loop once its bundle is proven fast; it gives the
// loop back this often so other requests are not held up behind thousands of evaluations.
const YIELD_EVERY_MS = 5;

/** A dry run as asked for. */
export interface DryRunRequest {
  /** The unsigned Intent document. */
  intent: Record<string, unknown>;
  /**
   * The request's JSON text as received, when it came as text (`/v1`): checked for duplicate
   * member names and imprecise numbers as a signed Intent's bytes are, which the parsed
   * `intent` can no longer show.
   */
  json?: Uint8Array;
  /** Versions (any state) in place of the active ones, by policy key. */
  policyVersions: Record<string, number>;
  /** A graph version (any state) in place of the active one; 0 for the active one. */
  graphVersion: number;
  /** The evaluation's `now`; the server's clock when null. */
  now: Date | null;
}

/** A dry run's answer: the evaluation, the `now` it used and what each rule of the covering policies did. */
export interface DryRun extends Evaluation {
  now: string;
  rules: RuleExplanation[];
}

/** A replay as asked for. */
export interface ReplayRequest {
  policyVersions: Record<string, number>;
  graphVersion: number;
  /** 0 for the default. */
  limit: number;
}

/** A recorded decision the replayed policies decide otherwise. */
export interface ReplayFlip {
  decision_id: string;
  old: { outcome: Outcome; reason: string };
  new: { outcome: Outcome; reason: string };
}

/** A replay's answer. */
export interface Replay {
  evaluated: number;
  unchanged: number;
  /** Newest first, as the decisions were recorded. */
  flipped: ReplayFlip[];
  /** Flips counted by old and new outcome, ordered by both. */
  flipsByOutcome: { old: Outcome; new: Outcome; count: number }[];
  policyVersions: Record<string, number>;
  graphVersion: number;
  bundleDigest: string;
}

/**
 * The input a recorded decision was evaluated with. Decisions recorded before their evidence
 * held the input's `now`, agent and principal (docs/architecture.md, Policies, Replay) are
 * evaluated at their `evaluated_at` (taken just after the evaluation), with the agent `active`
 * (only an active agent's Intent is evaluated) and the agent's acting principal as stored
 * (neither an agent's acting principal nor a principal's attributes ever change).
 */
export function recordedInput(r: RecordedEvaluation): EvaluationInput {
  const intent = r.intent as unknown as EvaluationInput["intent"];
  return {
    intent,
    agent: r.agent ?? { agent_id: intent.agent_id, state: "active" },
    principal: r.principal ?? r.acting_principal,
    now: r.now ?? r.evaluated_at.toISOString(),
  };
}

/**
 * Trials of policies that record nothing: a dry run of one unsigned Intent, and a replay of the
 * organization's recorded Intents against other versions (a shadow diff).
 */
export class PolicyTrials {
  constructor(
    private readonly evaluation: PolicyEvaluation,
    private readonly decisions: Pick<DecisionStore, "recordedEvaluations">,
    private readonly agents: Pick<AgentStore, "get">,
    private readonly principals: Pick<PrincipalStore, "get">,
    private readonly integrations: Pick<IntegrationStore, "list" | "contracts">,
  ) {}

  /**
   * Evaluates an unsigned Intent of one of the organization's agents. The Intent is validated as
   * the Intent path validates signed ones (docs/architecture.md, The Intent path, steps 5 and 8:
   * the same functions, so the same 422 codes, with field paths under `intent.`); the signature,
   * nonce and `requested_at` window do not apply.
   */
  async dryRun(caller: OrgCaller, request: DryRunRequest): Promise<DryRun> {
    if (request.json) parseJsonObject(request.json);
    let intent;
    try {
      intent = parseIntent(Buffer.from(JSON.stringify(request.intent), "utf8"));
    } catch (err) {
      throw underIntent(err);
    }
    if (request.now && !Number.isFinite(request.now.getTime())) {
      throw validationFailed([{ field: "now", code: "out_of_range", message: "not a time a Date can hold" }]);
    }
    const agent = await this.agents.get(caller.organizationId, intent.agent_id);
    if (!agent) throw validationFailed([{ field: "intent.agent_id", code: "unknown_agent", message: "must name an agent of this organization" }]);
    await this.requireDeclared(caller.organizationId, intent);
    const principal = await this.principals.get(caller.organizationId, agent.acting_for_principal_id);
    if (!principal) throw new MandateError("evaluation_unavailable", "The agent's principal is missing.");
    const now = (request.now ?? new Date()).toISOString();
    const input: EvaluationInput = {
      intent: intent as unknown as EvaluationInput["intent"],
      agent: { agent_id: agent.agent_id, state: agent.state },
      principal: { principal_id: principal.principal_id, external_ref: principal.external_ref, kind: principal.kind },
      now,
    };
    const bundle = await this.evaluation.trialBundle(caller.organizationId, request.policyVersions, request.graphVersion);
    const result = await this.evaluation.decideTrial(bundle, input);
    const rules = await this.evaluation.explainTrial(bundle, input);
    return {
      outcome: result.outcome,
      reason: result.reason,
      trace: result.trace,
      policyVersions: bundle.policyVersions,
      graphVersion: bundle.graphVersion,
      bundleDigest: bundle.digest,
      input,
      now,
      rules,
    };
  }

  /**
   * Evaluates the named versions (and/or graph version) in place of the active ones against the
   * organization's latest recorded, evaluated Intents, each with the input it was evaluated with,
   * and compares with what was recorded. The bundle is built and loaded once; its first input goes
   * through the decision path's probation like any new bundle, the rest in-process once it is
   * proven fast. 422 for a limit outside 1..10,000, an unknown version, a bundle that does not
   * compile or a rule failing at run time (naming the decision).
   */
  async replay(caller: OrgCaller, request: ReplayRequest): Promise<Replay> {
    const limit = request.limit === 0 ? REPLAY_DEFAULT_LIMIT : request.limit;
    if (!Number.isInteger(limit) || limit < 1 || limit > REPLAY_MAX_LIMIT) {
      throw validationFailed([{ field: "limit", code: "out_of_range", message: `must be between 1 and ${REPLAY_MAX_LIMIT}` }]);
    }
    const bundle = await this.evaluation.trialBundle(caller.organizationId, request.policyVersions, request.graphVersion);
    const recorded = await this.decisions.recordedEvaluations(caller.organizationId, limit);
    const flipped: ReplayFlip[] = [];
    const counts = new Map<string, { old: Outcome; new: Outcome; count: number }>();
    let yielded = performance.now();
    for (const r of recorded) {
      let result;
      try {
        result = await this.evaluation.decideTrial(bundle, recordedInput(r));
      } catch (err) {
        throw err instanceof MandateError && err.code === "policy_runtime_error"
          ? new MandateError(err.code, `Replaying decision ${r.decision_id}: ${err.message}`, err.fieldErrors)
          : err;
      }
      if (result.outcome !== r.outcome || result.reason !== r.reason) {
        flipped.push({ decision_id: r.decision_id, old: { outcome: r.outcome, reason: r.reason }, new: { outcome: result.outcome, reason: result.reason } });
        const key = `${r.outcome} ${result.outcome}`;
        const count = counts.get(key);
        if (count) count.count++;
        else counts.set(key, { old: r.outcome, new: result.outcome, count: 1 });
      }
      if (performance.now() - yielded > YIELD_EVERY_MS) {
        await new Promise((resolve) => setImmediate(resolve));
        yielded = performance.now();
      }
    }
    const order = ["ALLOW", "HUMAN_REVIEW", "DENY"];
    const flipsByOutcome = [...counts.values()].sort((a, b) => order.indexOf(a.old) - order.indexOf(b.old) || order.indexOf(a.new) - order.indexOf(b.new));
    return {
      evaluated: recorded.length,
      unchanged: recorded.length - flipped.length,
      flipped,
      flipsByOutcome,
      policyVersions: bundle.policyVersions,
      graphVersion: bundle.graphVersion,
      bundleDigest: bundle.digest,
    };
  }

  /** The Intent path's step 8 when an active integration contract covers the action (requireContractFields). */
  private async requireDeclared(organizationId: string, intent: Intent): Promise<void> {
    const integration = (await this.integrations.list(organizationId)).find((i) => i.actions.includes(intent.action));
    if (!integration) return;
    const contract = (await this.integrations.contracts([integration.integration_id])).find((c) => c.state === "active");
    if (!contract) return;
    try {
      requireContractFields(intent, contract.resource_path, contract.context_bindings, contract.field_types);
    } catch (err) {
      throw underIntent(err);
    }
  }
}

/** An Intent validation error with its field paths under `intent.` (the dry run's request member). */
function underIntent(err: unknown): unknown {
  if (!(err instanceof MandateError)) return err;
  const fields: FieldError[] = err.fieldErrors.map((e) => ({ ...e, field: e.field === "(body)" ? "intent" : `intent.${e.field}` }));
  return new MandateError(err.code, err.message, fields);
}
