import { parseGovernanceDocument } from "../policy/governance-import.js";
import { generateGraph } from "../policy/graph-generation.js";
import { validateGraph } from "../policy/graph-checks.js";
import type { AuthorityGraph, GovernanceError, GovernanceFormat, GovernanceKind } from "../policy/graph-types.js";
import { CollisionError, NotFoundError } from "../storage/errors.js";
import type { GovernanceDocumentSummary, GraphVersionRow, PolicyStore, Publication, PublicationBasis } from "../storage/policies.js";
import type { PrincipalStore } from "../storage/principals.js";
import type { OrgCaller } from "../base/caller.js";
import { MandateError, notFound, validationFailed, type FieldError } from "../base/errors.js";
import { buildOrgBundle } from "./bundles.js";
import { newId } from "./ids.js";

/** The stored shapes this module hands to services. */
export type { GovernanceDocumentSummary, GraphVersionRow, GraphVersionSummary } from "../storage/policies.js";

/** A warning of generation as callers see it: the document cited by name. */
export interface GraphWarning {
  code: string;
  message: string;
  document: string;
  line: number | null;
}

const MAX_NAME = 200;
const MAX_CONTENT = 1024 * 1024;

/**
 * The authority graph: governance documents (parsed when uploaded, so only documents that
 * parse are ever stored), the graph versions generated from them or authored as JSON, their
 * approval by a second identity and their publication (which rebuilds the organization's
 * bundle). Lifecycle: draft → approved → active → superseded.
 */
export class AuthorityGraphs {
  constructor(
    private readonly store: PolicyStore,
    private readonly principals: Pick<PrincipalStore, "externalRefs">,
  ) {}

  /**
   * Parses and stores a governance document; 422 with each problem at its file line, column
   * and value when it does not parse, 409 `already_exists` when the name is taken.
   */
  async uploadDocument(caller: OrgCaller, name: string, kind: GovernanceKind, format: GovernanceFormat, content: string): Promise<GovernanceDocumentSummary> {
    const problems: FieldError[] = [];
    if (name.trim().length === 0) problems.push({ field: "name", code: "required", message: "a name is required (the file name, for example)" });
    else if ([...name].length > MAX_NAME) problems.push({ field: "name", code: "too_long", message: `at most ${MAX_NAME} characters` });
    if (content.length === 0) problems.push({ field: "content", code: "required", message: "must not be empty" });
    if (content.length > MAX_CONTENT) problems.push({ field: "content", code: "too_long", message: "at most 1 MiB" });
    if (problems.length > 0) throw validationFailed(problems);
    const document_id = newId("doc");
    const parsed = parseGovernanceDocument({ document_id, name, kind, format, content });
    if (!parsed.ok) {
      throw validationFailed(
        parsed.errors.map((e) => located(e, "content")),
        `The document ${name} does not parse; nothing was stored.`,
      );
    }
    try {
      return await this.store.addDocument({ document_id, organization_id: caller.organizationId, name, kind, format, content, row_count: parsed.rows.length, author: caller.identity });
    } catch (err) {
      if (err instanceof CollisionError) throw new MandateError("already_exists", `A governance document named ${name} already exists.`);
      throw err;
    }
  }

  /** The uploaded documents, oldest first. */
  async listDocuments(caller: OrgCaller): Promise<GovernanceDocumentSummary[]> {
    return (await this.store.documents(caller.organizationId)).map(({ content: _content, ...summary }) => summary);
  }

  /** Deletes a document; graph versions generated from it keep their graph. 404 when the organization has none of that id. */
  async deleteDocument(caller: OrgCaller, documentId: string): Promise<void> {
    if (!(await this.store.deleteDocument(caller.organizationId, documentId))) throw notFound("Governance document");
  }

  /** Authors a draft graph version directly as JSON; 422 with every problem. */
  async createGraphVersion(caller: OrgCaller, graph: unknown): Promise<GraphVersionRow> {
    const refs = await this.principals.externalRefs(caller.organizationId);
    const result = validateGraph(graph, refs);
    if (!result.ok) throw validationFailed(result.errors.map((e) => ({ field: `graph${e.path.startsWith("[") ? "" : "."}${e.path}`, code: e.code, message: e.message })), "The graph is invalid.");
    return this.store.addGraphVersion(caller.organizationId, result.graph, caller.identity);
  }

  /**
   * Generates a draft graph version from uploaded documents (all of them when none is named):
   * 422 with errors by document name and file line, nothing created; or the version with the
   * warnings an author should look at.
   */
  async generateGraphVersion(caller: OrgCaller, documentIds: readonly string[]): Promise<{ version: GraphVersionRow; warnings: GraphWarning[] }> {
    const docs = await this.store.documents(caller.organizationId, documentIds);
    const missing = documentIds.filter((id) => !docs.some((d) => d.document_id === id));
    if (missing.length) throw validationFailed(missing.map((id) => ({ field: "document_ids", code: "not_found", message: `no document ${id}` })));
    if (docs.length === 0) throw validationFailed([{ field: "document_ids", code: "required", message: "no governance documents uploaded" }]);
    const refs = await this.principals.externalRefs(caller.organizationId);
    const result = generateGraph(
      docs.map((d) => ({ document_id: d.document_id, name: d.name, kind: d.kind as GovernanceKind, format: d.format as GovernanceFormat, content: d.content })),
      refs,
    );
    const nameOf = (id: string): string => docs.find((d) => d.document_id === id)?.name ?? id;
    if (!result.ok) {
      throw validationFailed(
        result.errors.map((e) => located(e, nameOf(e.document_id))),
        "The governance documents have errors; no graph version was created.",
      );
    }
    const version = await this.store.addGraphVersion(caller.organizationId, result.graph, caller.identity);
    return { version, warnings: result.warnings.map((w) => ({ code: w.code, message: w.message, document: nameOf(w.document_id), line: w.line })) };
  }

  /** draft → approved, never by the version's author (four eyes, as for policy versions). */
  approveGraph(caller: OrgCaller, version: number): Promise<GraphVersionRow> {
    return this.store
      .changeGraphVersion(caller.organizationId, version, (g) => {
        if (g.state !== "draft") throw new MandateError("invalid_transition", `The graph version is ${g.state}, not draft.`);
        if (g.author === caller.identity) throw new MandateError("permission_denied", "A graph version cannot be approved by its author.");
        return { state: "approved", approver: caller.identity };
      })
      .catch((err: unknown) => Promise.reject(err instanceof NotFoundError ? notFound("Graph version") : err));
  }

  /** approved → active: rebuilds the bundle with it; the previous graph stays readable. */
  async publishGraph(caller: OrgCaller, version: number): Promise<GraphVersionRow> {
    const publish = async (g: GraphVersionRow, basis: PublicationBasis): Promise<Publication> => {
      if (g.state !== "approved") throw new MandateError("invalid_transition", `The graph version is ${g.state}, not approved.`);
      const built = await buildOrgBundle(basis.activeVersions, { version, graph: g.graph as AuthorityGraph });
      const payload = { version, bundle_digest: built.head.bundle_digest, by: caller.identity, author: g.author, approver: g.approver };
      return { ...built, evidence: { kind: "graph.published", subjectId: `graph@${version}`, payload } };
    };
    return this.store.publishGraph(caller.organizationId, version, publish).catch((err: unknown) => Promise.reject(err instanceof NotFoundError ? notFound("Graph version") : err));
  }

  /** The active graph, or null before any publication. */
  activeGraph(caller: OrgCaller): Promise<GraphVersionRow | null> {
    return this.store.activeGraph(caller.organizationId);
  }

  /** Every graph version, newest first, without graphs. */
  listGraphVersions(caller: OrgCaller) {
    return this.store.graphVersions(caller.organizationId);
  }

  /** One graph version whatever its state; 404 when the organization has none of that number. */
  async graphVersion(caller: OrgCaller, version: number): Promise<GraphVersionRow> {
    const g = await this.store.graphVersion(caller.organizationId, version);
    if (!g) throw notFound("Graph version");
    return g;
  }
}

/**
 * A document problem as a field error: `where` (the request's `content`, or the document's
 * name) with the file line and column, then the column's name. The message leads with the
 * place too, for readers of the message alone.
 */
function located(e: GovernanceError, where: string): FieldError {
  const at = e.line === null ? "" : `[line ${e.line}]`;
  const place = e.line === null ? where : `${where} line ${e.line}${e.column ? `, column ${e.column}` : ""}`;
  return {
    field: `${where}${at}${e.field ? `.${e.field}` : ""}`,
    code: e.code,
    message: `${place}: ${e.message}`,
    ...(e.line === null ? {} : { line: e.line }),
    ...(e.column ? { column: e.column } : {}),
  };
}
