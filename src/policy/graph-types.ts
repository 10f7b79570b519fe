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

/** An uploaded governance document. */
export interface GovernanceDocument {
  document_id: string;
  kind: GovernanceKind;
  format: GovernanceFormat;
  content: string;
}

/**
 * A problem in a governance document. `row` is the 1-based data row for CSV (the header is
 * not counted, blank lines are), the 0-based list index for YAML and JSON, and null for a
 * problem with the document as a whole (syntax, header, shape). `field` is the column.
 */
export interface GovernanceError {
  document_id: string;
  row: number | null;
  field: string | null;
  code: string;
  message: string;
  /**
   * Where a CSV syntax error or a row with the wrong number of fields is in the text: the
   * 1-based line, and the 1-based column (field number). Absent for every other problem.
   */
  line?: number;
  column?: number;
}

/** A signing schedule row: the principal holds the role, which reports to reports_to. */
export interface SigningScheduleRow {
  row: number;
  principal: string | null;
  role: string;
  reports_to: string | null;
}

/** A delegation of authority row; an empty delegate grants the holder its own limit. */
export interface DelegationRow {
  row: number;
  holder: string;
  delegate: string | null;
  action: string;
  currency: string;
  max_amount: number;
  valid_until: string | null;
}

/** An approval matrix row. */
export interface ApprovalMatrixRow extends ApprovalBand {
  row: number;
}

/** A governance document's rows, validated field by field (references are checked by generateGraph). */
export type ParsedGovernanceDocument =
  | { ok: true; kind: "signing_schedule"; rows: SigningScheduleRow[] }
  | { ok: true; kind: "delegation_of_authority"; rows: DelegationRow[] }
  | { ok: true; kind: "approval_matrix"; rows: ApprovalMatrixRow[] }
  | { ok: false; errors: GovernanceError[] };

/** Outcome of generateGraph: a graph ready for validation-free indexing, or errors per document and row. */
export type GraphGeneration = { ok: true; graph: AuthorityGraph } | { ok: false; errors: GovernanceError[] };
