import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { type JsonObject } from "@bufbuild/protobuf";
import type { AuthorityGraphs } from "../domain/authority-graph.js";
import { AuthorityGraphService, type UploadGovernanceDocumentRequest } from "../gen/mandate/v1/authority_graph_pb.js";
import { orgCaller } from "./context.js";
import { enumCodec, ts } from "./convert.js";

const graphStates = enumCodec(["draft", "active", "superseded"] as const, "state");

const docKinds = enumCodec(["delegation_of_authority", "approval_matrix", "signing_schedule"] as const, "kind");

const docFormats = enumCodec(["csv", "yaml", "json"] as const, "format");

/** AuthorityGraphService. */
export class AuthorityGraphServiceImpl implements ServiceImpl<typeof AuthorityGraphService> {
  constructor(private readonly graphs: AuthorityGraphs) {}

  async uploadGovernanceDocument(req: UploadGovernanceDocumentRequest, ctx: HandlerContext) {
    const d = await this.graphs.uploadDocument(orgCaller(ctx), docKinds.fromProto(req.kind, "kind"), docFormats.fromProto(req.format, "format"), req.content);
    return { documentId: d.document_id, kind: req.kind, format: req.format, createdAt: ts(d.created_at) };
  }

  async listGovernanceDocuments(_req: unknown, ctx: HandlerContext) {
    const docs = await this.graphs.listDocuments(orgCaller(ctx));
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
    const g = await this.graphs.createGraphVersion(orgCaller(ctx), req.graph ?? {});
    return { version: g.version, state: graphStates.toProto(g.state) };
  }

  async generateGraphVersion(req: { documentIds: string[] }, ctx: HandlerContext) {
    const g = await this.graphs.generateGraphVersion(orgCaller(ctx), req.documentIds);
    return { version: g.version, state: graphStates.toProto(g.state) };
  }

  async publishGraphVersion(req: { version: number }, ctx: HandlerContext) {
    const g = await this.graphs.publishGraph(orgCaller(ctx), req.version);
    return { version: g.version, state: graphStates.toProto(g.state) };
  }

  async getAuthorityGraph(_req: unknown, ctx: HandlerContext) {
    const g = await this.graphs.activeGraph(orgCaller(ctx));
    if (!g) return { version: 0 };
    return { version: g.version, state: graphStates.toProto(g.state), graph: g.graph as JsonObject, publishedAt: ts(g.published_at) };
  }

  // Issue 20 contract; implemented by the authoring work in progress.
  deleteGovernanceDocument(): never {
    throw new ConnectError("not implemented yet", Code.Unimplemented);
  }

  approveGraphVersion(): never {
    throw new ConnectError("not implemented yet", Code.Unimplemented);
  }

  listGraphVersions(): never {
    throw new ConnectError("not implemented yet", Code.Unimplemented);
  }

  getGraphVersion(): never {
    throw new ConnectError("not implemented yet", Code.Unimplemented);
  }
}
