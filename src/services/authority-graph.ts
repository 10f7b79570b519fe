import { type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { type JsonObject } from "@bufbuild/protobuf";
import type { AuthorityGraphs, GovernanceDocumentSummary, GraphVersionSummary, GraphWarning } from "../domain/authority-graph.js";
import {
  AuthorityGraphService,
  type ApproveGraphVersionRequest,
  type DeleteGovernanceDocumentRequest,
  type GetGraphVersionRequest,
  type UploadGovernanceDocumentRequest,
} from "../gen/mandate/v1/authority_graph_pb.js";
import { orgCaller } from "./context.js";
import { enumCodec, ts } from "./convert.js";

// Wire order of GraphVersionState (1-based, as in the proto).
const graphStates = enumCodec(["draft", "active", "superseded", "approved"] as const, "state");

const docKinds = enumCodec(["delegation_of_authority", "approval_matrix", "signing_schedule"] as const, "kind");

const docFormats = enumCodec(["csv", "yaml", "json"] as const, "format");

function documentOut(d: GovernanceDocumentSummary) {
  return {
    documentId: d.document_id,
    name: d.name,
    kind: docKinds.toProto(d.kind as never),
    format: docFormats.toProto(d.format as never),
    rows: d.row_count,
    author: d.author,
    createdAt: ts(d.created_at),
  };
}

function versionOut(g: GraphVersionSummary & { graph?: unknown }) {
  return {
    version: g.version,
    state: graphStates.toProto(g.state),
    ...(g.graph === undefined ? {} : { graph: g.graph as JsonObject }),
    author: g.author,
    approver: g.approver ?? "",
    createdAt: ts(g.created_at),
    publishedAt: ts(g.published_at),
  };
}

function refOut(g: { version: number; state: GraphVersionSummary["state"] }, warnings: GraphWarning[] = []) {
  return { version: g.version, state: graphStates.toProto(g.state), warnings: warnings.map((w) => ({ ...w, line: w.line ?? 0 })) };
}

/** AuthorityGraphService. */
export class AuthorityGraphServiceImpl implements ServiceImpl<typeof AuthorityGraphService> {
  constructor(private readonly graphs: AuthorityGraphs) {}

  async uploadGovernanceDocument(req: UploadGovernanceDocumentRequest, ctx: HandlerContext) {
    const kind = docKinds.fromProto(req.kind, "kind");
    const format = docFormats.fromProto(req.format, "format");
    return documentOut(await this.graphs.uploadDocument(orgCaller(ctx), req.name, kind, format, req.content));
  }

  async listGovernanceDocuments(_req: unknown, ctx: HandlerContext) {
    return { documents: (await this.graphs.listDocuments(orgCaller(ctx))).map(documentOut) };
  }

  async deleteGovernanceDocument(req: DeleteGovernanceDocumentRequest, ctx: HandlerContext) {
    await this.graphs.deleteDocument(orgCaller(ctx), req.documentId);
    return {};
  }

  async createGraphVersion(req: { graph?: JsonObject }, ctx: HandlerContext) {
    return refOut(await this.graphs.createGraphVersion(orgCaller(ctx), req.graph ?? {}));
  }

  async generateGraphVersion(req: { documentIds: string[] }, ctx: HandlerContext) {
    const { version, warnings } = await this.graphs.generateGraphVersion(orgCaller(ctx), req.documentIds);
    return refOut(version, warnings);
  }

  async approveGraphVersion(req: ApproveGraphVersionRequest, ctx: HandlerContext) {
    return refOut(await this.graphs.approveGraph(orgCaller(ctx), req.version));
  }

  async publishGraphVersion(req: { version: number }, ctx: HandlerContext) {
    return refOut(await this.graphs.publishGraph(orgCaller(ctx), req.version));
  }

  async getAuthorityGraph(_req: unknown, ctx: HandlerContext) {
    const g = await this.graphs.activeGraph(orgCaller(ctx));
    return g ? versionOut(g) : { version: 0 };
  }

  async listGraphVersions(_req: unknown, ctx: HandlerContext) {
    return { versions: (await this.graphs.listGraphVersions(orgCaller(ctx))).map(versionOut) };
  }

  async getGraphVersion(req: GetGraphVersionRequest, ctx: HandlerContext) {
    return versionOut(await this.graphs.graphVersion(orgCaller(ctx), req.version));
  }
}
