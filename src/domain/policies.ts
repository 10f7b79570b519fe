import { buildBundle } from "../policy/build.js";
import { PolicySourceError } from "../policy/errors.js";
import type { AuthorityGraph } from "../policy/graph-types.js";
import { assertRegoPackage, compileRules, isPolicyKey, STARTER_POLICY_KEY, STARTER_RULES } from "../policy/rules.js";
import { CollisionError, NotFoundError } from "../storage/errors.js";
import type {
  InitialPolicy,
  PolicyChangeBasis,
  PolicyChangeRow,
  PolicyChangeStep,
  PolicyStore,
  PolicyVersionRow,
  Publication,
  PublicationBasis,
} from "../storage/policies.js";
import type { OrgCaller } from "../base/caller.js";
import { MandateError, notFound, validationFailed, type FieldError } from "../base/errors.js";
import { buildOrgBundle, checkVersionCompiles, downloadableBundle } from "./bundles.js";
import { newId } from "./ids.js";

/** The stored shapes this module hands to services. */
export type { PolicyChangeRow, PolicyVersionRow } from "../storage/policies.js";

/** A policy version's source as authors submit it: exactly one member. */
export interface PolicySourceInput {
  rules?: unknown;
  rules_yaml?: string;
  rego?: string;
}

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
    // The text itself, not its parse: compileRules then locates every problem by line and column.
    return compileRules(policyKey, source.rules_yaml || source.rules);
  } catch (err) {
    if (err instanceof PolicySourceError) throw validationFailed(sourceErrors(err), "The policy source is invalid.");
    throw err;
  }
}

/** `err` as the not-found error callers see when it is the store's NotFoundError, else `err` itself. */
function notFoundAs(what: string, err: unknown): unknown {
  return err instanceof NotFoundError ? notFound(what) : err;
}

/**
 * Runtime policies: their versions' lifecycle (draft → in_review → approved → active) and the
 * bundle each publication rebuilds once (opa build) and stores; evaluation only ever loads
 * stored bundles (policy-evaluation.ts).
 */
export class Policies {
  private starter: { digest: string; rego: string } | undefined;

  constructor(private readonly store: PolicyStore) {}

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
    await this.checkCompiles(caller, policyKey, rego, source);
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
    await this.checkCompiles(caller, policyKey, rego, source);
    return this.store
      .addVersion({ organization_id: caller.organizationId, policy_key: policyKey, state: "draft", source, rego, author: caller.identity })
      .catch((err: unknown) => Promise.reject(notFoundAs("Policy", err)));
  }

  // Authoring-time compile: a version publish would refuse is never stored (422 policy_compile_failed).
  private async checkCompiles(caller: OrgCaller, policyKey: string, rego: string, source: PolicySourceInput): Promise<void> {
    const [versions, graph] = await Promise.all([this.store.versions(caller.organizationId), this.store.activeGraph(caller.organizationId)]);
    const active = versions.filter((v) => v.state === "active");
    await checkVersionCompiles(active, { policy_key: policyKey, version: 0, rego, source }, graph ? { version: graph.version, graph: graph.graph as AuthorityGraph } : null);
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
      const built = await buildOrgBundle(modules, graph ? { version: graph.version, graph: graph.graph as AuthorityGraph } : null);
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

  /** A bundle the organization has used, or the starter bundle, for download; 404 otherwise (domain/bundles.ts, downloadableBundle). */
  bundle(caller: OrgCaller, digest: string): Promise<Buffer> {
    return downloadableBundle(this.store, caller.organizationId, digest, this.starter?.digest);
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

  /** Requests, or as a second identity applies, the re-activation of the version the active one replaced. */
  rollback(caller: OrgCaller, policyKey: string, note: string): Promise<PolicyChangeRow> {
    return this.change(caller, policyKey, "rollback", note);
  }

  /** Requests, or as a second identity applies, the deactivation of the policy's active version. */
  disable(caller: OrgCaller, policyKey: string, note: string): Promise<PolicyChangeRow> {
    return this.change(caller, policyKey, "disable", note);
  }

  /**
   * Four eyes on changes of what is active (docs/architecture.md, Policies: Rollback and disable):
   * with no change pending, a call (POLICY_AUTHOR or POLICY_APPROVER, checked by the access rule)
   * requests one against the active version; with one pending, a call of the same kind by another
   * identity holding POLICY_APPROVER applies it, rebuilding the bundle as a publication does. A
   * pending change made against a version no longer active is stale: it is retired and the call
   * refused, so nobody applies a change made against a state they did not see.
   */
  private async change(caller: OrgCaller, policyKey: string, kind: PolicyChangeRow["kind"], note: string): Promise<PolicyChangeRow> {
    if (note.length > 2000) throw validationFailed([{ field: "note", code: "too_long", message: "at most 2000 characters" }]);
    const decide = async (basis: PolicyChangeBasis): Promise<PolicyChangeStep> => {
      const { active, previous, pending } = basis;
      if (!pending) {
        if (!active) throw new MandateError("invalid_transition", `Policy ${policyKey} has no active version to ${kind === "rollback" ? "roll back" : "disable"}.`);
        if (kind === "rollback" && previous?.state !== "superseded") {
          throw new MandateError("invalid_transition", `Version ${active.version} of ${policyKey} replaced no earlier version: there is nothing to roll back to.`);
        }
        const change = {
          change_id: newId("pch"),
          organization_id: caller.organizationId,
          policy_key: policyKey,
          kind,
          from_version: active.version,
          to_version: kind === "rollback" ? previous!.version : 0,
          requested_by: caller.identity,
          note,
        };
        return { step: "request", change };
      }
      if (pending.from_version !== (active?.version ?? 0)) return { step: "stale" };
      if (pending.kind !== kind) {
        throw new MandateError("invalid_transition", `A ${pending.kind} of ${policyKey} is already waiting for approval; only one change of a policy waits at a time.`);
      }
      if (pending.requested_by === caller.identity) {
        throw new MandateError("permission_denied", `A policy ${kind} cannot be approved by the identity that requested it.`);
      }
      if (!caller.permissions.has("POLICY_APPROVER")) {
        throw new MandateError("permission_denied", `Applying a requested ${kind} needs the POLICY_APPROVER permission.`);
      }
      const modules: PolicyVersionRow[] = basis.activeVersions.filter((m) => m.policy_key !== policyKey);
      if (kind === "rollback") {
        // The active version is the one the change was requested against, and which version it
        // replaced never changes; so this holds unless the store broke its own invariants.
        if (previous?.version !== pending.to_version || previous.state !== "superseded") throw new Error(`rollback target of ${policyKey} moved`);
        modules.push(previous);
      }
      const graph = basis.activeGraph;
      const built = await buildOrgBundle(modules, graph ? { version: graph.version, graph: graph.graph as AuthorityGraph } : null);
      const payload = {
        policy_key: policyKey,
        from_version: pending.from_version,
        to_version: pending.to_version,
        requested_by: pending.requested_by,
        approved_by: caller.identity,
        note: pending.note,
        approval_note: note,
        bundle_digest: built.head.bundle_digest,
      };
      const evidence =
        kind === "rollback"
          ? { kind: "policy.rolled_back", subjectId: `${policyKey}@${pending.to_version}`, payload }
          : { kind: "policy.disabled", subjectId: `${policyKey}@${pending.from_version}`, payload };
      return { step: "apply", approvedBy: caller.identity, publication: { ...built, evidence } };
    };
    const result = await this.store.changePolicy(caller.organizationId, policyKey, decide).catch((err: unknown) => {
      if (err instanceof CollisionError) throw new MandateError("invalid_transition", `A change of ${policyKey} is already waiting for approval.`);
      throw notFoundAs("Policy", err);
    });
    if (result.step === "stale") {
      const c = result.change;
      throw new MandateError(
        "invalid_transition",
        `The ${c.kind} of ${policyKey} requested by ${c.requested_by} is stale: version ${c.from_version} was active then, and is no longer. Request it again.`,
      );
    }
    return result.change;
  }
}
