// The authority graph and the governance documents it is generated from, as data: the types
// every graph module shares.

/** A role and the higher role it reports to; the higher role inherits its authority. */
export interface RoleEdge {
  role: string;
  reports_to: string | null;
}

/** A principal (by external_ref) holding a role. */
export interface Membership {
  principal: string;
  role: string;
}

/** Authority a holder (`role:<name>` or a principal's external_ref) holds of its own; `valid_until` is an extension of the graph format described in docs/architecture.md, Policies. */
export interface Limit {
  holder: string;
  action: string;
  currency: string;
  max_amount: number;
  valid_until: string | null;
}

/** Authority a holder passes to a principal, capped at what the holder itself holds. */
export interface Delegation {
  holder: string;
  delegate: string;
  action: string;
  currency: string;
  max_amount: number;
  valid_until: string | null;
}

/** One approval band: amounts up to `up_to_amount` (inclusive) need `approvals_required` approvals. */
export interface ApprovalBand {
  action: string;
  currency: string;
  up_to_amount: number;
  approvals_required: number;
}

/** The authority graph in its JSON form (see docs/architecture.md, Policies), as validateGraph returns it: every list present, every optional field null. */
export interface AuthorityGraph {
  roles: RoleEdge[];
  memberships: Membership[];
  limits: Limit[];
  delegations: Delegation[];
  approval_matrix: ApprovalBand[];
}

/** A problem in a directly authored graph, at a JSON-ish path such as `delegations[3].max_amount`. */
export interface GraphError {
  path: string;
  code: string;
  message: string;
}

/** Outcome of validateGraph: the normalised graph, or every problem found. */
export type GraphValidation = { ok: true; graph: AuthorityGraph } | { ok: false; errors: GraphError[] };

/** The kinds of governance document (see docs/architecture.md, Policies). */
export type GovernanceKind = "delegation_of_authority" | "approval_matrix" | "signing_schedule";

/** The formats a governance document may be uploaded in. */
export type GovernanceFormat = "csv" | "yaml" | "json";

/** An uploaded governance document; `name` (unique in its organization) is what errors and warnings cite. */
export interface GovernanceDocument {
  document_id: string;
  name?: string;
  kind: GovernanceKind;
  format: GovernanceFormat;
  content: string;
}

/** A 1-based place in a document's text. */
export interface TextPosition {
  line: number;
  column: number;
}

/**
 * A problem in a governance document. `line` is the 1-based line of the file (the CSV header
 * is line 1), or null for a problem with the document as a whole (header, shape) or with the
 * combined graph that no row carries. `column` is where known: the 1-based field number in a
 * CSV (what a spreadsheet shows as its column), the 1-based character column in YAML or JSON.
 * `field` is the column's name. The message echoes the offending value.
 */
export interface GovernanceError {
  document_id: string;
  line: number | null;
  column?: number;
  field: string | null;
  code: string;
  message: string;
}

/** Something generation accepted but an author should look at, at its document and file line. */
export interface GovernanceWarning {
  code: "delegation_cycle" | "shadowed_row";
  message: string;
  document_id: string;
  line: number | null;
}

/** A signing schedule row (at its file line): the principal holds the role, which reports to reports_to. */
export interface SigningScheduleRow {
  line: number;
  principal: string | null;
  role: string;
  reports_to: string | null;
}

/** A delegation of authority row; an empty delegate grants the holder its own limit. */
export interface DelegationRow {
  line: number;
  holder: string;
  delegate: string | null;
  action: string;
  currency: string;
  max_amount: number;
  valid_until: string | null;
}

/** An approval matrix row. */
export interface ApprovalMatrixRow extends ApprovalBand {
  line: number;
}

/**
 * A governance document's rows, validated field by field (references are checked by
 * generateGraph), with `at`, which finds where a field of one of the rows is in the text.
 */
export type ParsedGovernanceDocument =
  | ({ ok: true; at: (row: object, field: string) => TextPosition | undefined } & (
      | { kind: "signing_schedule"; rows: SigningScheduleRow[] }
      | { kind: "delegation_of_authority"; rows: DelegationRow[] }
      | { kind: "approval_matrix"; rows: ApprovalMatrixRow[] }
    ))
  | { ok: false; errors: GovernanceError[] };

/** Outcome of generateGraph: a graph ready for indexing with what an author should look at, or errors per document and line. */
export type GraphGeneration = { ok: true; graph: AuthorityGraph; warnings: GovernanceWarning[] } | { ok: false; errors: GovernanceError[] };
