import YAML from "yaml";
import { buildBundle } from "../policy/build.js";
import { PolicyEngine, type DecisionInput } from "../policy/engine.js";
import { EvaluationError, EvaluationTimeoutError, PolicyCompileError, PolicySourceError } from "../policy/errors.js";
import { generateGraph } from "../policy/graph-generation.js";
import { validateGraph } from "../policy/graph-checks.js";
import type { AuthorityGraph, GovernanceFormat, GovernanceKind } from "../policy/graph-types.js";
import { assertRegoPackage, compileRules, isPolicyKey, STARTER_POLICY_KEY, STARTER_RULES } from "../policy/rules.js";
import type { AgentStore } from "../storage/agents.js";
import { CollisionError, NotFoundError } from "../storage/errors.js";
import type { InitialPolicy, PolicyStore, PolicyVersionRow, Publication, PublicationBasis } from "../storage/policies.js";
import type { PrincipalStore } from "../storage/principals.js";
import type { OrgCaller } from "../base/caller.js";
import { MandateError, notFound, validationFailed, type FieldError } from "../base/errors.js";
import { newId } from "./ids.js";

/** The stored shapes this module hands to services. */
export type { PolicyVersionRow } from "../storage/policies.js";

/** A policy version's source as authors submit it: exactly one member. */
export interface PolicySourceInput {
  rules?: unknown;
  rules_yaml?: string;
  rego?: string;
}

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

function sourceErrors(err: PolicySourceError): FieldError[] {
  return err.errors.map((e) => ({ field: e.field ? `source.${e.field}` : "source", code: "invalid_policy", message: e.message, line: e.line, column: e.column }));
}

/** Compiles a source to Rego; 422 `validation_failed` with located errors when invalid. */
export function compileSource(policyKey: string, source: PolicySourceInput): string {
  const given = (["rules", "rules_yaml", "rego"] as const).filter((k) => source[k] !== undefined && source[k] !== "");
  if (given.length !== 1) {
    throw validationFailed([{ field: "source", code: "required", message: "exactly one of rules, rules_yaml or rego" }]);
  }
  try {
    if (source.rego) {
      assertRegoPackage(policyKey, source.rego);
      return source.rego;
    }
    let rules = source.rules;
    if (source.rules_yaml !== undefined) {
      try {
        rules = YAML.parse(source.rules_yaml);
      } catch (err) {
        const pos = (err as { linePos?: { line: number; col: number }[] }).linePos?.[0];
        throw validationFailed([{ field: "source.rules_yaml", code: "invalid_yaml", message: (err as Error).message, line: pos?.line, column: pos?.col }]);
      }
    }
    return compileRules(policyKey, rules);
  } catch (err) {
    if (err instanceof PolicySourceError) throw validationFailed(sourceErrors(err), "The policy source is invalid.");
    throw err;
  }
}

function compileFailed(err: PolicyCompileError): MandateError {
  return new MandateError(
    "policy_compile_failed",
    "The policy does not compile; the previously active version stays active.",
    err.errors.map((e) => ({ field: e.file ?? e.policy_key ?? "source", code: e.code ?? "compile_error", message: e.message, line: e.line, column: e.column })),
  );
}

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

/** `err` as the not-found error callers see when it is the store's NotFoundError, else `err` itself. */
function notFoundAs(what: string, err: unknown): unknown {
  return err instanceof NotFoundError ? notFound(what) : err;
}

/**
 * Runtime policies, the authority graph and the bundle they compile to. Every
 * publication rebuilds the organization's bundle once (opa build) and stores
 * it; evaluation only ever loads stored bundles.
 */
export class Policies {
  private starter: { digest: string; rego: string } | undefined;

  constructor(
    private readonly store: PolicyStore,
    private readonly principals: Pick<PrincipalStore, "get" | "externalRefs">,
    private readonly agents: Pick<AgentStore, "get">,
    private readonly engine: PolicyEngine,
  ) {}

  /** Builds (once per process) the bundle every new organization starts with. */
  async prepareStarter(): Promise<void> {
    const rego = compileRules(STARTER_POLICY_KEY, STARTER_RULES);
    const { bundle, digest } = await buildBundle({ policies: [{ policy_key: STARTER_POLICY_KEY, version: 1, rego }], graph: null, graph_version: null });
    await this.store.putBundle(digest, bundle);
    this.starter = { digest, rego };
  }

  /** The active `starter` policy every new organization is created with (its bundle stored by prepareStarter). */
  starterPolicy = (): InitialPolicy => {
    if (!this.starter) throw new Error("prepareStarter() was not called");
    return {
      policy_key: STARTER_POLICY_KEY,
      description: "Allows the reference action with no configuration.",
      source: { rules: STARTER_RULES },
      rego: this.starter.rego,
      author: "system",
      head: { bundle_digest: this.starter.digest, policy_versions: { [STARTER_POLICY_KEY]: 1 }, graph_version: 0 },
    };
  };

  /** Creates a policy and its first draft version. */
  async create(caller: OrgCaller, policyKey: string, description: string, source: PolicySourceInput): Promise<PolicyVersionRow> {
    if (!isPolicyKey(policyKey) || policyKey.length > 63) {
      throw validationFailed([{ field: "policy_key", code: "invalid_format", message: "must match [a-z][a-z0-9_-]{0,62}" }]);
    }
    if (description.length > 2000) throw validationFailed([{ field: "description", code: "too_long", message: "at most 2000 characters" }]);
    const rego = compileSource(policyKey, source);
    try {
      return await this.store.createPolicy(description, { organization_id: caller.organizationId, policy_key: policyKey, state: "draft", source, rego, author: caller.identity });
    } catch (err) {
      if (err instanceof CollisionError) throw new MandateError("already_exists", `A policy with key ${policyKey} already exists.`);
      throw err;
    }
  }

  /** Adds a draft version to an existing policy. */
  async addVersion(caller: OrgCaller, policyKey: string, source: PolicySourceInput): Promise<PolicyVersionRow> {
    const rego = compileSource(policyKey, source);
    return this.store
      .addVersion({ organization_id: caller.organizationId, policy_key: policyKey, state: "draft", source, rego, author: caller.identity })
      .catch((err: unknown) => Promise.reject(notFoundAs("Policy", err)));
  }

  private step(
    caller: OrgCaller,
    policyKey: string,
    version: number,
    from: PolicyVersionRow["state"],
    to: PolicyVersionRow["state"],
    check?: (v: PolicyVersionRow) => void,
  ): Promise<PolicyVersionRow> {
    return this.store
      .changeVersion(caller.organizationId, policyKey, version, (v) => {
        if (v.state !== from) throw new MandateError("invalid_transition", `The version is ${v.state}, not ${from}.`);
        check?.(v);
        return { state: to, approver: to === "approved" ? caller.identity : null };
      })
      .catch((err: unknown) => Promise.reject(notFoundAs("Policy version", err)));
  }

  /** draft → in_review. */
  submit(caller: OrgCaller, policyKey: string, version: number): Promise<PolicyVersionRow> {
    return this.step(caller, policyKey, version, "draft", "in_review");
  }

  /** in_review → approved, never by the author's identity (four eyes). */
  approve(caller: OrgCaller, policyKey: string, version: number): Promise<PolicyVersionRow> {
    return this.step(caller, policyKey, version, "in_review", "approved", (v) => {
      if (v.author === caller.identity) throw new MandateError("permission_denied", "A policy version cannot be approved by its author.");
    });
  }

  /** Builds the organization's bundle from the given modules and graph: the bundle and the head that would point at it. */
  private async rebuild(
    modules: { policy_key: string; version: number; rego: string }[],
    graph: { version: number; graph: AuthorityGraph } | null,
  ): Promise<Omit<Publication, "evidence">> {
    let built;
    try {
      built = await buildBundle({ policies: modules, graph: graph?.graph ?? null, graph_version: graph?.version ?? null });
    } catch (err) {
      if (err instanceof PolicyCompileError) throw compileFailed(err);
      throw err;
    }
    return {
      bundle: { digest: built.digest, bytes: built.bundle },
      head: {
        bundle_digest: built.digest,
        policy_versions: Object.fromEntries(modules.map((m) => [m.policy_key, m.version])),
        graph_version: graph?.version ?? 0,
      },
    };
  }

  /**
   * approved → active: compiles the organization's bundle with this version in
   * place of the policy's active one. A compile error leaves everything as it was.
   */
  async publish(caller: OrgCaller, policyKey: string, version: number): Promise<PolicyVersionRow> {
    const publish = async (v: PolicyVersionRow, basis: PublicationBasis): Promise<Publication> => {
      if (v.state !== "approved") throw new MandateError("invalid_transition", `The version is ${v.state}, not approved.`);
      const modules = basis.activeVersions.filter((m) => m.policy_key !== policyKey);
      modules.push(v);
      const graph = basis.activeGraph;
      const built = await this.rebuild(modules, graph ? { version: graph.version, graph: graph.graph as AuthorityGraph } : null);
      return {
        ...built,
        evidence: {
          kind: "policy.published",
          subjectId: `${policyKey}@${version}`,
          payload: { policy_key: policyKey, version, author: v.author, approver: v.approver, bundle_digest: built.head.bundle_digest, by: caller.identity },
        },
      };
    };
    return this.store.publishVersion(caller.organizationId, policyKey, version, publish).catch((err: unknown) => Promise.reject(notFoundAs("Policy version", err)));
  }

  /** Every version of one policy; 404 when the policy does not exist. */
  async get(caller: OrgCaller, policyKey: string): Promise<{ description: string; versions: PolicyVersionRow[] }> {
    const [policies, versions] = await Promise.all([this.store.policies(caller.organizationId), this.store.versions(caller.organizationId, policyKey)]);
    const policy = policies.find((p) => p.policy_key === policyKey);
    if (!policy) throw notFound("Policy");
    return { description: policy.description, versions };
  }

  /** Every policy with its versions. */
  async list(caller: OrgCaller): Promise<{ policy_key: string; description: string; versions: PolicyVersionRow[] }[]> {
    const [policies, versions] = await Promise.all([this.store.policies(caller.organizationId), this.store.versions(caller.organizationId)]);
    return policies.map((p) => ({ ...p, versions: versions.filter((v) => v.policy_key === p.policy_key) }));
  }

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
    let built;
    try {
      built = await buildBundle({ policies: modules, graph: (graph?.graph as AuthorityGraph) ?? null, graph_version: graph?.version ?? null });
    } catch (err) {
      if (err instanceof PolicyCompileError) throw compileFailed(err);
      throw err;
    }
    const policyVersions = Object.fromEntries(modules.map((m) => [m.policy_key, m.version]));
    let result;
    try {
      await this.engine.load(built.digest, built.bundle);
      result = await this.engine.decide(built.digest, input);
    } catch (err) {
      throw evaluationUnavailable(err, built.digest, policyVersions);
    }
    return { ...result, policyVersions, graphVersion: graph?.version ?? 0, bundleDigest: built.digest };
  }

  // --- authority graph ---------------------------------------------------

  /** Stores a governance document (parsed only at generation). */
  async uploadDocument(caller: OrgCaller, kind: GovernanceKind, format: GovernanceFormat, content: string) {
    if (content.length === 0) throw validationFailed([{ field: "content", code: "required", message: "must not be empty" }]);
    if (content.length > 1024 * 1024) throw validationFailed([{ field: "content", code: "too_long", message: "at most 1 MiB" }]);
    return this.store.addDocument({ document_id: newId("doc"), organization_id: caller.organizationId, kind, format, content });
  }

  /** The uploaded documents. */
  listDocuments(caller: OrgCaller) {
    return this.store.documents(caller.organizationId);
  }

  /** Authors a draft graph version directly as JSON; 422 with every problem. */
  async createGraphVersion(caller: OrgCaller, graph: unknown) {
    const refs = await this.principals.externalRefs(caller.organizationId);
    const result = validateGraph(graph, refs);
    if (!result.ok) throw validationFailed(result.errors.map((e) => ({ field: `graph${e.path.startsWith("[") ? "" : "."}${e.path}`, code: e.code, message: e.message })), "The graph is invalid.");
    return this.store.addGraphVersion(caller.organizationId, result.graph, caller.identity);
  }

  /** Generates a draft graph version from uploaded documents; 422 with errors per document and row, nothing created. */
  async generateGraphVersion(caller: OrgCaller, documentIds: readonly string[]) {
    const docs = await this.store.documents(caller.organizationId, documentIds);
    const missing = documentIds.filter((id) => !docs.some((d) => d.document_id === id));
    if (missing.length) throw validationFailed(missing.map((id) => ({ field: "document_ids", code: "not_found", message: `no document ${id}` })));
    if (docs.length === 0) throw validationFailed([{ field: "document_ids", code: "required", message: "no governance documents uploaded" }]);
    const refs = await this.principals.externalRefs(caller.organizationId);
    const result = generateGraph(
      docs.map((d) => ({ document_id: d.document_id, kind: d.kind as GovernanceKind, format: d.format as GovernanceFormat, content: d.content })),
      refs,
    );
    if (!result.ok) {
      throw validationFailed(
        result.errors.map((e) => ({
          field: `${e.document_id}${e.row === null ? "" : `[row ${e.row}]`}${e.field ? `.${e.field}` : ""}`,
          code: e.code,
          message: e.message,
          line: e.row ?? undefined,
        })),
        "The governance documents have errors; no graph version was created.",
      );
    }
    return this.store.addGraphVersion(caller.organizationId, result.graph, caller.identity);
  }

  /** Publishes a graph version: rebuilds the bundle with it; the previous graph stays readable. */
  async publishGraph(caller: OrgCaller, version: number) {
    const publish = async (g: { version: number; state: string; graph: unknown }, basis: PublicationBasis): Promise<Publication> => {
      if (g.state !== "draft") throw new MandateError("invalid_transition", `The graph version is ${g.state}, not draft.`);
      const built = await this.rebuild(basis.activeVersions, { version, graph: g.graph as AuthorityGraph });
      return {
        ...built,
        evidence: { kind: "graph.published", subjectId: `graph@${version}`, payload: { version, bundle_digest: built.head.bundle_digest, by: caller.identity } },
      };
    };
    return this.store.publishGraph(caller.organizationId, version, publish).catch((err: unknown) => Promise.reject(notFoundAs("Graph version", err)));
  }

  /** The active graph, or null before any publication. */
  activeGraph(caller: OrgCaller) {
    return this.store.activeGraph(caller.organizationId);
  }
}
