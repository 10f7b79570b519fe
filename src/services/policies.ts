import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { type JsonObject, fromJson } from "@bufbuild/protobuf";
import { ListValueSchema, timestampDate, ValueSchema } from "@bufbuild/protobuf/wkt";
import { validationFailed } from "../base/errors.js";
import type { Policies, PolicyChangeRow, PolicySourceInput, PolicyVersionRow } from "../domain/policies.js";
import type { PolicyTrials } from "../domain/policy-trials.js";
import { PolicyService, type PolicySource, type EvaluatePolicyRequest, type ReplayPoliciesRequest, type PolicyChangeRequest } from "../gen/mandate/v1/policies_pb.js";
import { orgCaller, rawJsonBodyKey } from "./context.js";
import { enumCodec, ts } from "./convert.js";

const versionStates = enumCodec(["draft", "in_review", "approved", "active", "superseded", "disabled"] as const, "state");

const changeKinds = enumCodec(["rollback", "disable"] as const, "kind");

/** A change is answered only pending or applied; a stale one is refused, never shown. */
const changeStates = enumCodec(["pending_approval", "applied"] as const, "state");

const outcomes = enumCodec(["ALLOW", "DENY", "HUMAN_REVIEW"] as const, "outcome");

function sourceInput(s: PolicySource | undefined): PolicySourceInput {
  if (!s) throw validationFailed([{ field: "source", code: "required", message: "a source is required" }]);
  return { rules: s.rules, rules_yaml: s.rulesYaml || undefined, rego: s.rego || undefined };
}

const ref = (v: PolicyVersionRow) => ({ policyKey: v.policy_key, version: v.version, state: versionStates.toProto(v.state) });

const versionMessage = (v: PolicyVersionRow) => ({
  version: v.version,
  state: versionStates.toProto(v.state),
  source: { rules: v.source.rules as JsonObject | undefined, rulesYaml: v.source.rules_yaml ?? "", rego: v.source.rego ?? "" },
  rego: v.rego,
  author: v.author,
  approver: v.approver ?? "",
  createdAt: ts(v.created_at),
  publishedAt: ts(v.published_at),
});

const changeMessage = (c: PolicyChangeRow) => ({
  policyKey: c.policy_key,
  kind: changeKinds.toProto(c.kind),
  state: changeStates.toProto(c.state === "applied" ? "applied" : "pending_approval"),
  fromVersion: c.from_version,
  toVersion: c.to_version,
  requestedBy: c.requested_by,
  approvedBy: c.approved_by ?? "",
  requestedAt: ts(c.requested_at),
  appliedAt: ts(c.applied_at),
});

const policyMessage = (key: string, description: string, versions: PolicyVersionRow[]) => ({
  policyKey: key,
  description,
  activeVersion: versions.find((v) => v.state === "active")?.version ?? 0,
  versions: versions.map(versionMessage),
});

/** PolicyService. */
export class PolicyServiceImpl implements ServiceImpl<typeof PolicyService> {
  constructor(
    private readonly policies: Policies,
    private readonly trials: PolicyTrials,
  ) {}

  async createPolicy(req: { policyKey: string; description: string; source?: PolicySource }, ctx: HandlerContext) {
    return ref(await this.policies.create(orgCaller(ctx), req.policyKey, req.description, sourceInput(req.source)));
  }

  async listPolicies(_req: unknown, ctx: HandlerContext) {
    return { policies: (await this.policies.list(orgCaller(ctx))).map((p) => policyMessage(p.policy_key, p.description, p.versions)) };
  }

  async getPolicy(req: { policyKey: string }, ctx: HandlerContext) {
    const p = await this.policies.get(orgCaller(ctx), req.policyKey);
    return policyMessage(req.policyKey, p.description, p.versions);
  }

  async createPolicyVersion(req: { policyKey: string; source?: PolicySource }, ctx: HandlerContext) {
    return ref(await this.policies.addVersion(orgCaller(ctx), req.policyKey, sourceInput(req.source)));
  }

  async submitPolicyVersion(req: { policyKey: string; version: number }, ctx: HandlerContext) {
    return ref(await this.policies.submit(orgCaller(ctx), req.policyKey, req.version));
  }

  async approvePolicyVersion(req: { policyKey: string; version: number }, ctx: HandlerContext) {
    return ref(await this.policies.approve(orgCaller(ctx), req.policyKey, req.version));
  }

  async publishPolicyVersion(req: { policyKey: string; version: number }, ctx: HandlerContext) {
    return ref(await this.policies.publish(orgCaller(ctx), req.policyKey, req.version));
  }

  async evaluatePolicy(req: EvaluatePolicyRequest, ctx: HandlerContext) {
    const result = await this.trials.dryRun(orgCaller(ctx), {
      intent: req.intent ?? {},
      json: ctx.values.get(rawJsonBodyKey),
      policyVersions: req.policyVersions,
      graphVersion: req.graphVersion,
      now: req.now ? timestampDate(req.now) : null,
    });
    return {
      outcome: outcomes.toProto(result.outcome),
      reason: result.reason,
      trace: fromJson(ListValueSchema, result.trace as never),
      policyVersions: result.policyVersions,
      graphVersion: result.graphVersion,
      bundleDigest: result.bundleDigest,
      now: ts(new Date(result.now)),
      rules: result.rules.map((r) => ({
        policyKey: r.policy_key,
        policyVersion: r.policy_version,
        ruleId: r.rule_id,
        fired: r.fired,
        outcome: r.outcome ? outcomes.toProto(r.outcome) : 0,
        reason: r.reason ?? "",
        failedCondition: r.failed_condition
          ? { field: r.failed_condition.field, operator: r.failed_condition.operator, expected: fromJson(ValueSchema, r.failed_condition.expected as never), actual: fromJson(ValueSchema, r.failed_condition.actual as never) }
          : undefined,
        line: r.line,
      })),
    };
  }

  async replayPolicies(req: ReplayPoliciesRequest, ctx: HandlerContext) {
    const r = await this.trials.replay(orgCaller(ctx), { policyVersions: req.policyVersions, graphVersion: req.graphVersion, limit: req.limit });
    const pair = (p: { outcome: "ALLOW" | "DENY" | "HUMAN_REVIEW"; reason: string }) => ({ outcome: outcomes.toProto(p.outcome), reason: p.reason });
    return {
      evaluated: r.evaluated,
      unchanged: r.unchanged,
      flipped: r.flipped.map((f) => ({ decisionId: f.decision_id, old: pair(f.old), new: pair(f.new) })),
      flipsByOutcome: r.flipsByOutcome.map((c) => ({ oldOutcome: outcomes.toProto(c.old), newOutcome: outcomes.toProto(c.new), count: c.count })),
      policyVersions: r.policyVersions,
      graphVersion: r.graphVersion,
      bundleDigest: r.bundleDigest,
    };
  }

  // Issue 20 contract; implemented by the authoring work in progress.
  async rollbackPolicy(req: PolicyChangeRequest, ctx: HandlerContext) {
    return changeMessage(await this.policies.rollback(orgCaller(ctx), req.policyKey, req.note));
  }

  async disablePolicy(req: PolicyChangeRequest, ctx: HandlerContext) {
    return changeMessage(await this.policies.disable(orgCaller(ctx), req.policyKey, req.note));
  }

  // google.api.HttpBody: /v1 answers the bytes themselves with this content type (transcoder.ts).
  async getBundle(req: { digest: string }, ctx: HandlerContext) {
    return { contentType: "application/gzip", data: new Uint8Array(await this.policies.bundle(orgCaller(ctx), req.digest)) };
  }
}
