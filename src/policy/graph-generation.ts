import { byLine, parseGovernanceDocument } from "./governance-import.js";
import { checkGraph } from "./graph-checks.js";
import { findWarnings, type Origin } from "./graph-warnings.js";
import type { AuthorityGraph, GovernanceDocument, GovernanceError, GraphGeneration } from "./graph-types.js";

/**
 * Generates an authority graph from governance documents: signing schedules give roles and
 * memberships, delegation documents give limits (empty delegate) and delegations, approval
 * matrices give bands. Every problem, including those only visible once the documents are
 * combined (unknown principals, role cycles, delegating more than is held), is reported
 * against the document and file line it came from; what is sound but suspect (delegation
 * cycles, rows another row makes irrelevant) comes back as warnings.
 */
export function generateGraph(docs: readonly GovernanceDocument[], knownPrincipalRefs: ReadonlySet<string>): GraphGeneration {
  const errors: GovernanceError[] = [];
  const graph: AuthorityGraph = { roles: [], memberships: [], limits: [], delegations: [], approval_matrix: [] };
  // Where each entry of each list came from, to report combined-graph problems by line.
  const origin: Record<keyof AuthorityGraph, Origin[]> = {
    roles: [], memberships: [], limits: [], delegations: [], approval_matrix: [],
  };
  const roleIndex = new Map<string, number>();
  const declareRole = (role: string, reportsTo: string | null, from: Origin): void => {
    const at = roleIndex.get(role);
    if (at === undefined) {
      roleIndex.set(role, graph.roles.length);
      graph.roles.push({ role, reports_to: reportsTo });
      origin.roles.push(from);
      return;
    }
    const existing = graph.roles[at]!;
    if (reportsTo === null || existing.reports_to === reportsTo) return;
    if (existing.reports_to === null) {
      existing.reports_to = reportsTo;
      origin.roles[at] = from;
      return;
    }
    errors.push({
      document_id: from.document_id, ...from.at("reports_to"), field: "reports_to", code: "conflicting_reports_to",
      message: `role "${role}" already reports to "${existing.reports_to}" (found "${reportsTo}")`,
    });
  };

  for (const doc of docs) {
    const parsed = parseGovernanceDocument(doc);
    if (!parsed.ok) {
      errors.push(...parsed.errors);
      continue;
    }
    const from = (row: { line: number }): Origin => ({
      document_id: doc.document_id,
      line: row.line,
      at: (field) => parsed.at(row, field) ?? { line: row.line },
    });
    switch (parsed.kind) {
      case "signing_schedule":
        for (const r of parsed.rows) {
          declareRole(r.role, r.reports_to, from(r));
          if (r.reports_to !== null && !roleIndex.has(r.reports_to)) declareRole(r.reports_to, null, from(r));
          if (r.principal !== null) {
            graph.memberships.push({ principal: r.principal, role: r.role });
            origin.memberships.push(from(r));
          }
        }
        break;
      case "delegation_of_authority":
        for (const r of parsed.rows) {
          const { holder, delegate, action, currency, max_amount, valid_until } = r;
          if (delegate === null) {
            graph.limits.push({ holder, action, currency, max_amount, valid_until });
            origin.limits.push(from(r));
          } else {
            graph.delegations.push({ holder, delegate, action, currency, max_amount, valid_until });
            origin.delegations.push(from(r));
          }
        }
        break;
      case "approval_matrix":
        for (const r of parsed.rows) {
          const { line: _line, ...band } = r;
          graph.approval_matrix.push(band);
          origin.approval_matrix.push(from(r));
        }
        break;
    }
  }
  if (errors.length > 0) return { ok: false, errors };

  const combined: GovernanceError[] = [];
  checkGraph(graph, knownPrincipalRefs, (path, code, message) => {
    const [list, index, field] = path as [keyof AuthorityGraph | undefined, number | undefined, string | undefined];
    const o = list !== undefined && index !== undefined ? origin[list]?.[index] : undefined;
    combined.push({
      document_id: o?.document_id ?? "",
      ...(o ? (field ? o.at(field) : { line: o.line }) : { line: null }),
      field: field ?? null,
      code,
      message,
    });
  });
  if (combined.length > 0) return { ok: false, errors: byLine(combined, docs.map((d) => d.document_id)) };
  return { ok: true, graph, warnings: findWarnings(graph, origin, docs) };
}
