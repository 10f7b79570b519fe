import { generateGraph } from "../policy/graph-generation.js";
import { validateGraph } from "../policy/graph-checks.js";
import type { AuthorityGraph, GovernanceFormat, GovernanceKind } from "../policy/graph-types.js";
import { NotFoundError } from "../storage/errors.js";
import type { PolicyStore, Publication, PublicationBasis } from "../storage/policies.js";
import type { PrincipalStore } from "../storage/principals.js";
import type { OrgCaller } from "../base/caller.js";
import { MandateError, notFound, validationFailed } from "../base/errors.js";
import { buildOrgBundle } from "./bundles.js";
import { newId } from "./ids.js";

/**
 * The authority graph: governance documents, the graph versions generated from them or
 * authored as JSON, and their publication (which rebuilds the organization's bundle).
 */
export class AuthorityGraphs {
  constructor(
    private readonly store: PolicyStore,
    private readonly principals: Pick<PrincipalStore, "externalRefs">,
  ) {}

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
      const built = await buildOrgBundle(basis.activeVersions, { version, graph: g.graph as AuthorityGraph });
      return {
        ...built,
        evidence: { kind: "graph.published", subjectId: `graph@${version}`, payload: { version, bundle_digest: built.head.bundle_digest, by: caller.identity } },
      };
    };
    return this.store.publishGraph(caller.organizationId, version, publish).catch((err: unknown) => Promise.reject(err instanceof NotFoundError ? notFound("Graph version") : err));
  }

  /** The active graph, or null before any publication. */
  activeGraph(caller: OrgCaller) {
    return this.store.activeGraph(caller.organizationId);
  }
}
