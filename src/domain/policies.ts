import type pg from "pg";
import YAML from "yaml";
import { buildBundle } from "../policy/build.js";
import { PolicyEngine, type DecisionInput } from "../policy/engine.js";
import { EvaluationError, PolicyCompileError, PolicySourceError } from "../policy/errors.js";
import { generateGraph } from "../policy/graph-generation.js";
import { validateGraph } from "../policy/graph-checks.js";
import type { AuthorityGraph, GovernanceFormat, GovernanceKind } from "../policy/graph-types.js";
import { assertRegoPackage, compileRules, isPolicyKey, STARTER_POLICY_KEY, STARTER_RULES } from "../policy/rules.js";
import type { Database } from "../storage/postgres/database.js";
import { isUniqueViolation } from "../storage/postgres/database.js";
import { policyStore, type PolicyHead, type PolicyVersionRow } from "../storage/postgres/policies.js";
import { principalStore } from "../storage/postgres/principals.js";
import { agentStore } from "../storage/postgres/agents.js";
import type { OrgCaller } from "../base/caller.js";
import { MandateError, notFound, validationFailed, type FieldError } from "../base/errors.js";
import type { EvidenceLog } from "./evidence-log.js";
import { newId } from "./ids.js";

/** The stored shapes this module hands to services. */
export type { PolicyVersionRow } from "../storage/postgres/policies.js";

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
 * Runtime policies, the authority graph and the bundle they compile to. Every
 * publication rebuilds the organization's bundle once (opa build) and stores
 * it in Postgres; evaluation only ever loads stored bundles.
 */
export class Policies {
  private starter: { digest: string; rego: string } | undefined;

  constructor(
    private readonly db: Database,
    private readonly evidence: EvidenceLog,
    private readonly engine: PolicyEngine,
  ) {}

  /** Builds (once per process) the bundle every new organization starts with. */
  async prepareStarter(): Promise<void> {
    const rego = compileRules(STARTER_POLICY_KEY, STARTER_RULES);
    const { bundle, digest } = await buildBundle({ policies: [{ policy_key: STARTER_POLICY_KEY, version: 1, rego }], graph: null, graph_version: null });
    await policyStore.putBundle(this.db.pool, digest, bundle);
    this.starter = { digest, rego };
  }

  /** Gives a new organization its active `starter` policy (inside the creating transaction). */
  installStarter = async (tx: pg.PoolClient, organizationId: string): Promise<void> => {
    if (!this.starter) throw new Error("prepareStarter() was not called");
    await policyStore.insertPolicy(tx, organizationId, STARTER_POLICY_KEY, "Allows the reference action with no configuration.");
    await policyStore.insertVersion(tx, {
      organization_id: organizationId,
      policy_key: STARTER_POLICY_KEY,
      state: "active",
      source: { rules: STARTER_RULES },
      rego: this.starter.rego,
      author: "system",
    });
    await policyStore.setHead(tx, organizationId, { bundle_digest: this.starter.digest, policy_versions: { [STARTER_POLICY_KEY]: 1 }, graph_version: 0 });
  };

  /** Creates a policy and its first draft version. */
  async create(caller: OrgCaller, policyKey: string, description: string, source: PolicySourceInput): Promise<PolicyVersionRow> {
    if (!isPolicyKey(policyKey) || policyKey.length > 63) {
      throw validationFailed([{ field: "policy_key", code: "invalid_format", message: "must match [a-z][a-z0-9_]{0,62}" }]);
    }
    if (description.length > 2000) throw validationFailed([{ field: "description", code: "too_long", message: "at most 2000 characters" }]);
    const rego = compileSource(policyKey, source);
    try {
      return await this.db.transaction(async (tx) => {
        await policyStore.insertPolicy(tx, caller.organizationId, policyKey, description);
        return policyStore.insertVersion(tx, { organization_id: caller.organizationId, policy_key: policyKey, state: "draft", source, rego, author: caller.identity });
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw new MandateError("already_exists", `A policy with key ${policyKey} already exists.`);
      throw err;
    }
  }

  /** Adds a draft version to an existing policy. */
  async addVersion(caller: OrgCaller, policyKey: string, source: PolicySourceInput): Promise<PolicyVersionRow> {
    const rego = compileSource(policyKey, source);
    return this.db.transaction(async (tx) => {
      const existing = await policyStore.versions(tx, caller.organizationId, policyKey);
      if (existing.length === 0) throw notFound("Policy");
      return policyStore.insertVersion(tx, { organization_id: caller.organizationId, policy_key: policyKey, state: "draft", source, rego, author: caller.identity });
    });
  }

  private async step(
    caller: OrgCaller,
    policyKey: string,
    version: number,
    from: PolicyVersionRow["state"],
    to: PolicyVersionRow["state"],
    check?: (v: PolicyVersionRow) => void,
  ): Promise<PolicyVersionRow> {
    return this.db.transaction(async (tx) => {
      const v = await policyStore.lockVersion(tx, caller.organizationId, policyKey, version);
      if (!v) throw notFound("Policy version");
      if (v.state !== from) throw new MandateError("invalid_transition", `The version is ${v.state}, not ${from}.`);
      check?.(v);
      await policyStore.setVersionState(tx, caller.organizationId, policyKey, version, to, to === "approved" ? caller.identity : undefined);
      return { ...v, state: to, approver: to === "approved" ? caller.identity : v.approver };
    });
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

  /** Rebuilds and stores the organization's bundle from the given modules and graph, inside `tx`. */
  private async rebuild(
    tx: pg.PoolClient,
    organizationId: string,
    modules: { policy_key: string; version: number; rego: string }[],
    graph: { version: number; graph: AuthorityGraph } | null,
  ): Promise<PolicyHead> {
    let built;
    try {
      built = await buildBundle({ policies: modules, graph: graph?.graph ?? null, graph_version: graph?.version ?? null });
    } catch (err) {
      if (err instanceof PolicyCompileError) throw compileFailed(err);
      throw err;
    }
    await policyStore.putBundle(tx, built.digest, built.bundle);
    const head = {
      bundle_digest: built.digest,
      policy_versions: Object.fromEntries(modules.map((m) => [m.policy_key, m.version])),
      graph_version: graph?.version ?? 0,
    };
    await policyStore.setHead(tx, organizationId, head);
    return head;
  }

  /**
   * approved → active: compiles the organization's bundle with this version in
   * place of the policy's active one. A compile error leaves everything as it was.
   */
  async publish(caller: OrgCaller, policyKey: string, version: number): Promise<PolicyVersionRow> {
    return this.db.transaction(async (tx) => {
      await policyStore.head(tx, caller.organizationId, true);
      const v = await policyStore.lockVersion(tx, caller.organizationId, policyKey, version);
      if (!v) throw notFound("Policy version");
      if (v.state !== "approved") throw new MandateError("invalid_transition", `The version is ${v.state}, not approved.`);
      const modules = (await policyStore.activeVersions(tx, caller.organizationId)).filter((m) => m.policy_key !== policyKey);
      modules.push(v);
      const graph = await policyStore.graphVersion(tx, caller.organizationId, null);
      const head = await this.rebuild(tx, caller.organizationId, modules, graph ? { version: graph.version, graph: graph.graph as AuthorityGraph } : null);
      for (const m of await policyStore.activeVersions(tx, caller.organizationId)) {
        if (m.policy_key === policyKey) await policyStore.setVersionState(tx, caller.organizationId, policyKey, m.version, "superseded");
      }
      await policyStore.setVersionState(tx, caller.organizationId, policyKey, version, "active");
      await this.evidence.append(tx, [
        {
          organizationId: caller.organizationId,
          kind: "policy.published",
          subjectId: `${policyKey}@${version}`,
          payload: { policy_key: policyKey, version, author: v.author, approver: v.approver, bundle_digest: head.bundle_digest, by: caller.identity },
        },
      ]);
      return { ...v, state: "active" };
    });
  }

  /** Every version of one policy; 404 when the policy does not exist. */
  async get(caller: OrgCaller, policyKey: string): Promise<{ description: string; versions: PolicyVersionRow[] }> {
    const [policies, versions] = await Promise.all([policyStore.policies(this.db.pool, caller.organizationId), policyStore.versions(this.db.pool, caller.organizationId, policyKey)]);
    const policy = policies.find((p) => p.policy_key === policyKey);
    if (!policy) throw notFound("Policy");
    return { description: policy.description, versions };
  }

  /** Every policy with its versions. */
  async list(caller: OrgCaller): Promise<{ policy_key: string; description: string; versions: PolicyVersionRow[] }[]> {
    const [policies, versions] = await Promise.all([policyStore.policies(this.db.pool, caller.organizationId), policyStore.versions(this.db.pool, caller.organizationId)]);
    return policies.map((p) => ({ ...p, versions: versions.filter((v) => v.policy_key === p.policy_key) }));
  }

  /** Loads (once per digest) and evaluates a stored bundle. Any engine failure is 503 `evaluation_unavailable`, never ALLOW. */
  async evaluateBundle(digest: string, input: EvaluationInput): Promise<{ outcome: Evaluation["outcome"]; reason: string; trace: readonly unknown[] }> {
    try {
      if (!this.engine.has(digest)) {
        const bundle = await policyStore.bundle(this.db.pool, digest);
        if (!bundle) throw new EvaluationError(`bundle ${digest} is missing`);
        await this.engine.load(digest, bundle);
      }
      return this.engine.evaluate(digest, input);
    } catch (err) {
      if (err instanceof MandateError) throw err;
      throw new MandateError("evaluation_unavailable", "The decision could not be evaluated; nothing was decided.");
    }
  }

  /** Evaluates against the organization's active head. */
  async evaluate(organizationId: string, input: EvaluationInput, q: pg.PoolClient | Database["pool"] = this.db.pool): Promise<Evaluation> {
    const head = await policyStore.head(q, organizationId);
    if (!head) throw new MandateError("evaluation_unavailable", "The organization has no policy bundle.");
    const result = await this.evaluateBundle(head.bundle_digest, input);
    return { ...result, policyVersions: head.policy_versions, graphVersion: head.graph_version, bundleDigest: head.bundle_digest };
  }

  /** A dry run of an unsigned Intent for one of the organization's agents; records nothing. */
  async dryRunIntent(caller: OrgCaller, intent: Record<string, unknown>, named: Record<string, number>): Promise<Evaluation> {
    const agentId = typeof intent.agent_id === "string" ? intent.agent_id : "";
    const agent = agentId ? await agentStore.get(this.db.pool, caller.organizationId, agentId) : null;
    if (!agent) throw validationFailed([{ field: "intent.agent_id", code: "unknown_agent", message: "must name an agent of this organization" }]);
    const principal = await principalStore.get(this.db.pool, caller.organizationId, agent.acting_for_principal_id);
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
    const all = await policyStore.versions(this.db.pool, caller.organizationId);
    const modules = all.filter((v) => v.state === "active" && !(v.policy_key in named));
    for (const [key, version] of Object.entries(named)) {
      const v = all.find((x) => x.policy_key === key && x.version === version);
      if (!v) throw validationFailed([{ field: `policy_versions.${key}`, code: "not_found", message: "no such policy version" }]);
      modules.push(v);
    }
    const graph = await policyStore.graphVersion(this.db.pool, caller.organizationId, null);
    let built;
    try {
      built = await buildBundle({ policies: modules, graph: (graph?.graph as AuthorityGraph) ?? null, graph_version: graph?.version ?? null });
    } catch (err) {
      if (err instanceof PolicyCompileError) throw compileFailed(err);
      throw err;
    }
    await this.engine.load(built.digest, built.bundle);
    const result = this.engine.evaluate(built.digest, input);
    return { ...result, policyVersions: Object.fromEntries(modules.map((m) => [m.policy_key, m.version])), graphVersion: graph?.version ?? 0, bundleDigest: built.digest };
  }

  // --- authority graph ---------------------------------------------------

  /** Stores a governance document (parsed only at generation). */
  async uploadDocument(caller: OrgCaller, kind: GovernanceKind, format: GovernanceFormat, content: string) {
    if (content.length === 0) throw validationFailed([{ field: "content", code: "required", message: "must not be empty" }]);
    if (content.length > 1024 * 1024) throw validationFailed([{ field: "content", code: "too_long", message: "at most 1 MiB" }]);
    return policyStore.insertDocument(this.db.pool, { document_id: newId("doc"), organization_id: caller.organizationId, kind, format, content });
  }

  /** The uploaded documents. */
  listDocuments(caller: OrgCaller) {
    return policyStore.documents(this.db.pool, caller.organizationId);
  }

  /** Authors a draft graph version directly as JSON; 422 with every problem. */
  async createGraphVersion(caller: OrgCaller, graph: unknown) {
    const refs = await principalStore.externalRefs(this.db.pool, caller.organizationId);
    const result = validateGraph(graph, refs);
    if (!result.ok) throw validationFailed(result.errors.map((e) => ({ field: `graph${e.path.startsWith("[") ? "" : "."}${e.path}`, code: e.code, message: e.message })), "The graph is invalid.");
    return this.db.transaction((tx) => policyStore.insertGraphVersion(tx, caller.organizationId, result.graph, caller.identity));
  }

  /** Generates a draft graph version from uploaded documents; 422 with errors per document and row, nothing created. */
  async generateGraphVersion(caller: OrgCaller, documentIds: readonly string[]) {
    const docs = await policyStore.documents(this.db.pool, caller.organizationId, documentIds);
    const missing = documentIds.filter((id) => !docs.some((d) => d.document_id === id));
    if (missing.length) throw validationFailed(missing.map((id) => ({ field: "document_ids", code: "not_found", message: `no document ${id}` })));
    if (docs.length === 0) throw validationFailed([{ field: "document_ids", code: "required", message: "no governance documents uploaded" }]);
    const refs = await principalStore.externalRefs(this.db.pool, caller.organizationId);
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
    return this.db.transaction((tx) => policyStore.insertGraphVersion(tx, caller.organizationId, result.graph, caller.identity));
  }

  /** Publishes a graph version: rebuilds the bundle with it; the previous graph stays readable. */
  async publishGraph(caller: OrgCaller, version: number) {
    return this.db.transaction(async (tx) => {
      await policyStore.head(tx, caller.organizationId, true);
      const g = await policyStore.graphVersion(tx, caller.organizationId, version);
      if (!g) throw notFound("Graph version");
      if (g.state !== "draft") throw new MandateError("invalid_transition", `The graph version is ${g.state}, not draft.`);
      const modules = await policyStore.activeVersions(tx, caller.organizationId);
      const head = await this.rebuild(tx, caller.organizationId, modules, { version, graph: g.graph as AuthorityGraph });
      await policyStore.activateGraph(tx, caller.organizationId, version);
      await this.evidence.append(tx, [
        { organizationId: caller.organizationId, kind: "graph.published", subjectId: `graph@${version}`, payload: { version, bundle_digest: head.bundle_digest, by: caller.identity } },
      ]);
      return { ...g, state: "active" as const };
    });
  }

  /** The active graph, or null before any publication. */
  activeGraph(caller: OrgCaller) {
    return policyStore.graphVersion(this.db.pool, caller.organizationId, null);
  }
}
