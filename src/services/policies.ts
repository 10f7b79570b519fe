import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { type JsonObject, fromJson } from "@bufbuild/protobuf";
import { ListValueSchema } from "@bufbuild/protobuf/wkt";
import { validationFailed } from "../base/errors.js";
import type { Policies, PolicySourceInput, PolicyVersionRow } from "../domain/policies.js";
import { AuthorityGraphService, type UploadGovernanceDocumentRequest } from "../gen/mandate/v1/authority_graph_pb.js";
import { PolicyService, type PolicySource, type EvaluatePolicyRequest } from "../gen/mandate/v1/policies_pb.js";
import { orgCaller } from "./context.js";
import { enumCodec, ts } from "./convert.js";

const versionStates = enumCodec(["draft", "in_review", "approved", "active", "superseded"] as const, "state");
const graphStates = enumCodec(["draft", "active", "superseded"] as const, "state");
const docKinds = enumCodec(["delegation_of_authority", "approval_matrix", "signing_schedule"] as const, "kind");
const docFormats = enumCodec(["csv", "yaml", "json"] as const, "format");
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

const policyMessage = (key: string, description: string, versions: PolicyVersionRow[]) => ({
  policyKey: key,
  description,
  activeVersion: versions.find((v) => v.state === "active")?.version ?? 0,
  versions: versions.map(versionMessage),
});

/** PolicyService. */
export class PolicyServiceImpl implements ServiceImpl<typeof PolicyService> {
  constructor(private readonly policies: Policies) {}

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
    const result = await this.policies.dryRunIntent(orgCaller(ctx), req.intent ?? {}, req.policyVersions);
    return { outcome: outcomes.toProto(result.outcome), reason: result.reason, trace: fromJson(ListValueSchema, result.trace as never) };
  }
}

/** AuthorityGraphService. */
export class AuthorityGraphServiceImpl implements ServiceImpl<typeof AuthorityGraphService> {
  constructor(private readonly policies: Policies) {}

  async uploadGovernanceDocument(req: UploadGovernanceDocumentRequest, ctx: HandlerContext) {
    const d = await this.policies.uploadDocument(orgCaller(ctx), docKinds.fromProto(req.kind, "kind"), docFormats.fromProto(req.format, "format"), req.content);
    return { documentId: d.document_id, kind: req.kind, format: req.format, createdAt: ts(d.created_at) };
  }

  async listGovernanceDocuments(_req: unknown, ctx: HandlerContext) {
    const docs = await this.policies.listDocuments(orgCaller(ctx));
    return {
      documents: docs.map((d) => ({
        documentId: d.document_id,
        kind: docKinds.toProto(d.kind as never),
        format: docFormats.toProto(d.format as never),
        createdAt: ts(d.created_at),
      })),
    };
  }

  async createGraphVersion(req: { graph?: JsonObject }, ctx: HandlerContext) {
    const g = await this.policies.createGraphVersion(orgCaller(ctx), req.graph ?? {});
    return { version: g.version, state: graphStates.toProto(g.state) };
  }

  async generateGraphVersion(req: { documentIds: string[] }, ctx: HandlerContext) {
    const g = await this.policies.generateGraphVersion(orgCaller(ctx), req.documentIds);
    return { version: g.version, state: graphStates.toProto(g.state) };
  }

  async publishGraphVersion(req: { version: number }, ctx: HandlerContext) {
    const g = await this.policies.publishGraph(orgCaller(ctx), req.version);
    return { version: g.version, state: graphStates.toProto(g.state) };
  }

  async getAuthorityGraph(_req: unknown, ctx: HandlerContext) {
    const g = await this.policies.activeGraph(orgCaller(ctx));
    if (!g) return { version: 0 };
    return { version: g.version, state: graphStates.toProto(g.state), graph: g.graph as JsonObject, publishedAt: ts(g.published_at) };
  }
}
