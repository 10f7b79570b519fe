import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { type JsonObject } from "@bufbuild/protobuf";
import type { Policies } from "../domain/policies.js";
import { AuthorityGraphService, type UploadGovernanceDocumentRequest } from "../gen/mandate/v1/authority_graph_pb.js";
import { orgCaller } from "./context.js";
import { enumCodec, ts } from "./convert.js";

const graphStates = enumCodec(["draft", "active", "superseded"] as const, "state");

const docKinds = enumCodec(["delegation_of_authority", "approval_matrix", "signing_schedule"] as const, "kind");

const docFormats = enumCodec(["csv", "yaml", "json"] as const, "format");

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
