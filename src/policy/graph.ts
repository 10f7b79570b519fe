import { parseCsv } from "./csv.js";
import { ROLE_PREFIX, computeHoldings, maxHolding } from "./graph-index.js";
import { ACTION_PATTERN } from "./rules.js";
import { parseText, renderPath, type Path } from "./source.js";

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

/** Authority a holder (`role:<name>` or a principal's external_ref) holds of its own; `valid_until` is an extension of DESIGN §6. */
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

/** The authority graph in its JSON form (DESIGN §6), as validateGraph returns it: every list present, every optional field null. */
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

/** The kinds of governance document (DESIGN §6). */
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

/** The CSV header of each kind, which is also the set of keys a YAML/JSON row may have. */
export const GOVERNANCE_COLUMNS: Record<GovernanceKind, readonly string[]> = {
  signing_schedule: ["principal", "role", "reports_to"],
  delegation_of_authority: ["holder", "delegate", "action", "currency", "max_amount", "valid_until"],
  approval_matrix: ["action", "currency", "up_to_amount", "approvals_required"],
};

const ROLE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
const CURRENCY = /^[A-Z]{3}$/;
const CSV_AMOUNT = /^\d+(\.\d+)?$/;
const CSV_COUNT = /^\d+$/;
const MAX_APPROVALS = 10;

/**
 * Validates a graph authored directly as JSON against the organization's principals: shape
 * and types, amounts, dates, references to principals and roles, role cycles, and that no
 * delegation passes on more than its holder can ever hold. Returns the graph normalised
 * (missing lists and optional fields filled) or every problem found.
 */
export function validateGraph(graph: unknown, knownPrincipalRefs: ReadonlySet<string>): GraphValidation {
  const problems: Problem[] = [];
  const normalised = checkGraph(graph, knownPrincipalRefs, (path, code, message) => void problems.push({ path, code, message }));
  if (problems.length > 0 || !normalised) {
    return { ok: false, errors: problems.map((p) => ({ path: renderPath(p.path), code: p.code, message: p.message })) };
  }
  return { ok: true, graph: normalised };
}

/**
 * Parses one governance document (CSV with the exact header of its kind, or YAML/JSON: a
 * top-level list of row objects keyed by the same column names) and validates each field.
 * Used at upload, so a bad document is refused with its row errors before any generation.
 */
export function parseGovernanceDocument(doc: GovernanceDocument): ParsedGovernanceDocument {
  const errors: GovernanceError[] = [];
  const fail = (row: number | null, field: string | null, code: string, message: string): void =>
    void errors.push({ document_id: doc.document_id, row, field, code, message });
  const columns = GOVERNANCE_COLUMNS[doc.kind];
  if (!columns) {
    fail(null, null, "invalid_kind", `unknown document kind "${String(doc.kind)}"`);
    return { ok: false, errors };
  }
  const records = readRecords(doc, columns, fail);
  const rows: unknown[] = [];
  for (const { row, cells, typed } of records) {
    const cell = new CellReader(cells, typed, (field, code, message) => fail(row, field, code, message), columns);
    rows.push(readRow(doc.kind, row, cell));
  }
  if (errors.length > 0) return { ok: false, errors: byRow(errors, [doc.document_id]) };
  return { ok: true, kind: doc.kind, rows } as ParsedGovernanceDocument;
}

/**
 * Generates an authority graph from governance documents: signing schedules give roles and
 * memberships, delegation documents give limits (empty delegate) and delegations, approval
 * matrices give bands. Every problem, including those only visible once the documents are
 * combined (unknown principals, role cycles, delegating more than is held), is reported
 * against the document and row it came from.
 */
export function generateGraph(docs: readonly GovernanceDocument[], knownPrincipalRefs: ReadonlySet<string>): GraphGeneration {
  const errors: GovernanceError[] = [];
  const graph: AuthorityGraph = { roles: [], memberships: [], limits: [], delegations: [], approval_matrix: [] };
  // Where each entry of each list came from, to report combined-graph problems by row.
  const origin: Record<keyof AuthorityGraph, { document_id: string; row: number }[]> = {
    roles: [], memberships: [], limits: [], delegations: [], approval_matrix: [],
  };
  const roleIndex = new Map<string, number>();
  const declareRole = (role: string, reportsTo: string | null, document_id: string, row: number): void => {
    const at = roleIndex.get(role);
    if (at === undefined) {
      roleIndex.set(role, graph.roles.length);
      graph.roles.push({ role, reports_to: reportsTo });
      origin.roles.push({ document_id, row });
      return;
    }
    const existing = graph.roles[at]!;
    if (reportsTo === null || existing.reports_to === reportsTo) return;
    if (existing.reports_to === null) {
      existing.reports_to = reportsTo;
      origin.roles[at] = { document_id, row };
      return;
    }
    errors.push({
      document_id, row, field: "reports_to", code: "conflicting_reports_to",
      message: `role "${role}" already reports to "${existing.reports_to}"`,
    });
  };

  for (const doc of docs) {
    const parsed = parseGovernanceDocument(doc);
    if (!parsed.ok) {
      errors.push(...parsed.errors);
      continue;
    }
    const from = (row: number) => ({ document_id: doc.document_id, row });
    switch (parsed.kind) {
      case "signing_schedule":
        for (const r of parsed.rows) {
          declareRole(r.role, r.reports_to, doc.document_id, r.row);
          if (r.reports_to !== null && !roleIndex.has(r.reports_to)) declareRole(r.reports_to, null, doc.document_id, r.row);
          if (r.principal !== null) {
            graph.memberships.push({ principal: r.principal, role: r.role });
            origin.memberships.push(from(r.row));
          }
        }
        break;
      case "delegation_of_authority":
        for (const r of parsed.rows) {
          const { holder, delegate, action, currency, max_amount, valid_until } = r;
          if (delegate === null) {
            graph.limits.push({ holder, action, currency, max_amount, valid_until });
            origin.limits.push(from(r.row));
          } else {
            graph.delegations.push({ holder, delegate, action, currency, max_amount, valid_until });
            origin.delegations.push(from(r.row));
          }
        }
        break;
      case "approval_matrix":
        for (const { row, ...band } of parsed.rows) {
          graph.approval_matrix.push(band);
          origin.approval_matrix.push(from(row));
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
      row: o?.row ?? null,
      field: field ?? null,
      code,
      message,
    });
  });
  if (combined.length > 0) return { ok: false, errors: byRow(combined, docs.map((d) => d.document_id)) };
  return { ok: true, graph };
}

interface Problem {
  path: Path;
  code: string;
  message: string;
}

type ReportProblem = (path: Path, code: string, message: string) => void;

const GRAPH_LISTS = ["roles", "memberships", "limits", "delegations", "approval_matrix"] as const;
type GraphList = (typeof GRAPH_LISTS)[number];

const GRAPH_COLUMNS: Record<GraphList, readonly string[]> = {
  roles: ["role", "reports_to"],
  memberships: ["principal", "role"],
  limits: ["holder", "action", "currency", "max_amount", "valid_until"],
  delegations: ["holder", "delegate", "action", "currency", "max_amount", "valid_until"],
  approval_matrix: ["action", "currency", "up_to_amount", "approvals_required"],
};

// Validates and normalises; returns undefined when the shape is too broken to go on. Error
// paths cite the input's own list indexes, even where invalid entries were left out.
function checkGraph(input: unknown, known: ReadonlySet<string>, report: ReportProblem): AuthorityGraph | undefined {
  if (!isRecord(input)) {
    report([], "invalid_type", "the graph must be an object");
    return undefined;
  }
  let problems = 0;
  const problem: ReportProblem = (path, code, message) => {
    problems++;
    report(path, code, message);
  };
  for (const key of Object.keys(input)) {
    if (!(GRAPH_LISTS as readonly string[]).includes(key)) {
      problem([key], "unknown_key", `unknown key "${key}" (allowed: ${GRAPH_LISTS.join(", ")})`);
    }
  }
  // Each object entry of a list with its index and a reader for its fields.
  const entries = (list: GraphList): [number, CellReader][] => {
    const value = input[list] ?? [];
    if (!Array.isArray(value)) {
      problem([list], "invalid_type", `${list} must be a list`);
      return [];
    }
    return value.flatMap((row: unknown, i): [number, CellReader][] => {
      if (!isRecord(row)) {
        problem([list, i], "invalid_type", "each entry must be an object");
        return [];
      }
      return [[i, new CellReader(row, true, (field, code, message) => problem([list, i, field], code, message), GRAPH_COLUMNS[list])]];
    });
  };

  const graph: AuthorityGraph = { roles: [], memberships: [], limits: [], delegations: [], approval_matrix: [] };
  const roleRows: number[] = [];
  for (const [i, cell] of entries("roles")) {
    const role = cell.name("role", true);
    const reports_to = cell.name("reports_to", false);
    if (role === null) continue;
    if (graph.roles.some((r) => r.role === role)) {
      problem(["roles", i, "role"], "duplicate_role", `role "${role}" is declared twice`);
      continue;
    }
    graph.roles.push({ role, reports_to });
    roleRows.push(i);
  }
  const declared = new Set(graph.roles.map((r) => r.role));
  const checkRole = (path: Path, role: string): void => {
    if (!declared.has(role)) problem(path, "unknown_role", `role "${role}" is not declared in roles`);
  };
  graph.roles.forEach((r, k) => {
    if (r.reports_to !== null) checkRole(["roles", roleRows[k]!, "reports_to"], r.reports_to);
  });
  for (const cycle of roleCycles(graph.roles)) {
    problem(["roles", roleRows[cycle.index]!, "reports_to"], "role_cycle", `roles report to each other in a cycle: ${cycle.roles.join(" → ")}`);
  }
  const checkPrincipal = (path: Path, ref: string): void => {
    if (!known.has(ref)) problem(path, "unknown_principal", `no principal has external_ref "${ref}"`);
  };
  const checkHolder = (path: Path, holder: string): void => {
    if (holder.startsWith(ROLE_PREFIX)) checkRole(path, holder.slice(ROLE_PREFIX.length));
    else checkPrincipal(path, holder);
  };

  for (const [i, cell] of entries("memberships")) {
    const principal = cell.ref("principal", true);
    const role = cell.name("role", true);
    if (principal !== null) checkPrincipal(["memberships", i, "principal"], principal);
    if (role !== null) checkRole(["memberships", i, "role"], role);
    if (principal !== null && role !== null) graph.memberships.push({ principal, role });
  }
  for (const [i, cell] of entries("limits")) {
    const holder = cell.holder("holder");
    const action = cell.action("action");
    const currency = cell.currency("currency");
    const max_amount = cell.amount("max_amount");
    const valid_until = cell.date("valid_until");
    if (holder !== null) checkHolder(["limits", i, "holder"], holder);
    if (holder === null || action === null || currency === null || max_amount === null || valid_until === undefined) continue;
    graph.limits.push({ holder, action, currency, max_amount, valid_until });
  }
  const delegationRows: number[] = [];
  for (const [i, cell] of entries("delegations")) {
    const holder = cell.holder("holder");
    const delegate = cell.ref("delegate", true);
    const action = cell.action("action");
    const currency = cell.currency("currency");
    const max_amount = cell.amount("max_amount");
    const valid_until = cell.date("valid_until");
    if (holder !== null) checkHolder(["delegations", i, "holder"], holder);
    if (delegate !== null) checkPrincipal(["delegations", i, "delegate"], delegate);
    if (holder !== null && holder === delegate) problem(["delegations", i, "delegate"], "self_delegation", "a holder cannot delegate to itself");
    if (holder === null || delegate === null || action === null || currency === null || max_amount === null || valid_until === undefined) continue;
    graph.delegations.push({ holder, delegate, action, currency, max_amount, valid_until });
    delegationRows.push(i);
  }
  const bands = new Set<string>();
  for (const [i, cell] of entries("approval_matrix")) {
    const action = cell.action("action");
    const currency = cell.currency("currency");
    const up_to_amount = cell.amount("up_to_amount");
    const approvals_required = cell.count("approvals_required");
    if (action === null || currency === null || up_to_amount === null || approvals_required === null) continue;
    const key = JSON.stringify([action, currency, up_to_amount]);
    if (bands.has(key)) {
      problem(["approval_matrix", i, "up_to_amount"], "duplicate_band", `a band up to ${up_to_amount} for ${action} in ${currency} already exists`);
    }
    bands.add(key);
    graph.approval_matrix.push({ action, currency, up_to_amount, approvals_required });
  }
  if (problems > 0) return graph;

  // Nobody delegates more than they hold: each delegation against the most its holder can
  // ever hold for that action and currency (expiry is enforced at evaluation time). Only
  // checked on an otherwise sound graph, where a missing entry cannot make a delegation
  // look excessive.
  const holdings = computeHoldings(graph);
  graph.delegations.forEach((d, k) => {
    const held = maxHolding(holdings, d.holder, d.action, d.currency);
    if (d.max_amount <= held) return;
    const message =
      held === 0
        ? `${d.holder} holds no authority for ${d.action} in ${d.currency} to delegate`
        : `${d.holder} delegates ${d.max_amount} ${d.currency} for ${d.action} but holds at most ${held}`;
    problem(["delegations", delegationRows[k]!, "max_amount"], "exceeds_holder_authority", message);
  });
  return graph;
}

// Each role has one parent, so a cycle is found by following reports_to from every role.
function roleCycles(roles: readonly RoleEdge[]): { index: number; roles: string[] }[] {
  const parent = new Map(roles.map((r) => [r.role, r.reports_to]));
  const indexOf = new Map(roles.map((r, i) => [r.role, i]));
  const reported = new Set<string>();
  const cycles: { index: number; roles: string[] }[] = [];
  for (const start of parent.keys()) {
    const path: string[] = [];
    let at: string | null | undefined = start;
    while (at != null && !path.includes(at)) {
      path.push(at);
      at = parent.get(at);
    }
    if (at == null) continue;
    const cycle = path.slice(path.indexOf(at));
    const first = [...cycle].sort()[0]!;
    if (reported.has(first)) continue;
    reported.add(first);
    cycles.push({ index: indexOf.get(first)!, roles: [...cycle, cycle[0]!] });
  }
  return cycles;
}

type ReportCell = (field: string, code: string, message: string) => void;

// Reads and checks the fields of one row, whether CSV cells (strings) or typed YAML/JSON
// values, reporting each problem against its field and returning null for a bad value.
class CellReader {
  constructor(
    private readonly cells: Record<string, unknown>,
    private readonly typed: boolean,
    private readonly report: ReportCell,
    columns: readonly string[],
  ) {
    for (const key of Object.keys(cells)) {
      if (!columns.includes(key)) report(key, "unknown_field", `unknown field "${key}" (allowed: ${columns.join(", ")})`);
    }
  }

  // A string field, trimmed; "" and absent/null mean empty.
  private text(field: string, required: boolean): string | null | undefined {
    const raw = this.cells[field];
    if (raw === undefined || raw === null || raw === "") {
      if (required) this.report(field, "missing_field", `${field} is required`);
      return null;
    }
    if (typeof raw !== "string") {
      this.report(field, "invalid_type", `${field} must be a string`);
      return undefined;
    }
    const value = raw.trim();
    if (value === "" && required) this.report(field, "missing_field", `${field} is required`);
    return value === "" ? null : value;
  }

  name(field: string, required: boolean): string | null {
    const value = this.text(field, required);
    if (value == null) return null;
    if (!ROLE_NAME.test(value)) return this.invalid(field, `a role name must match ${ROLE_NAME.source}`);
    return value;
  }

  ref(field: string, required: boolean): string | null {
    const value = this.text(field, required);
    if (value == null) return null;
    if (value.startsWith(ROLE_PREFIX)) return this.invalid(field, `${field} must be a principal's external_ref, not a role`);
    return value;
  }

  holder(field: string): string | null {
    const value = this.text(field, true);
    if (value == null) return null;
    if (value.startsWith(ROLE_PREFIX) && !ROLE_NAME.test(value.slice(ROLE_PREFIX.length))) {
      return this.invalid(field, `a role holder must be role:<name> with a name matching ${ROLE_NAME.source}`);
    }
    return value;
  }

  action(field: string): string | null {
    const value = this.text(field, true);
    if (value == null) return null;
    return ACTION_PATTERN.test(value) ? value : this.invalid(field, `an action must match ${ACTION_PATTERN.source}`);
  }

  currency(field: string): string | null {
    const value = this.text(field, true);
    if (value == null) return null;
    return CURRENCY.test(value) ? value : this.invalid(field, "a currency must be a three-letter ISO 4217 code in capitals");
  }

  amount(field: string): number | null {
    const value = this.number(field, CSV_AMOUNT);
    if (value === null) return null;
    if (value < 0) {
      this.report(field, "negative_amount", `${field} must not be negative`);
      return null;
    }
    return value;
  }

  count(field: string): number | null {
    const value = this.number(field, CSV_COUNT);
    if (value === null) return null;
    if (!Number.isInteger(value) || value < 0 || value > MAX_APPROVALS) {
      return this.invalid(field, `${field} must be a whole number from 0 to ${MAX_APPROVALS}`);
    }
    return value;
  }

  // An optional ISO date (YYYY-MM-DD); undefined when present but invalid.
  date(field: string): string | null | undefined {
    const value = this.text(field, false);
    if (value == null) return value;
    // A real calendar day: Date rolls 2026-02-30 over to March, so compare the round trip.
    const time = /^\d{4}-\d{2}-\d{2}$/.test(value) ? Date.parse(`${value}T00:00:00Z`) : NaN;
    const valid = !Number.isNaN(time) && new Date(time).toISOString().startsWith(value);
    if (valid) return value;
    this.report(field, "invalid_date", `${field} must be an ISO date, YYYY-MM-DD`);
    return undefined;
  }

  private number(field: string, csvPattern: RegExp): number | null {
    const raw = this.cells[field];
    if (raw === undefined || raw === null || raw === "") {
      this.report(field, "missing_field", `${field} is required`);
      return null;
    }
    if (this.typed) {
      if (typeof raw === "number" && Number.isFinite(raw)) return raw;
      return this.invalid(field, `${field} must be a number`);
    }
    const text = String(raw).trim();
    if (/^-\d/.test(text)) {
      this.report(field, "negative_amount", `${field} must not be negative`);
      return null;
    }
    return csvPattern.test(text) ? Number(text) : this.invalid(field, `${field} must be a plain decimal number such as 1500 or 1500.50`);
  }

  private invalid(field: string, message: string): null {
    this.report(field, "invalid_value", message);
    return null;
  }
}

// The rows of a document as cell maps, each with the row number errors should cite.
function readRecords(
  doc: GovernanceDocument,
  columns: readonly string[],
  fail: (row: number | null, field: string | null, code: string, message: string) => void,
): { row: number; cells: Record<string, unknown>; typed: boolean }[] {
  if (doc.format === "csv") {
    const parsed = parseCsv(doc.content);
    if (!parsed.ok) {
      fail(null, null, "invalid_csv", `line ${parsed.line}: ${parsed.message}`);
      return [];
    }
    const [header, ...data] = parsed.records;
    const names = header?.fields.map((f) => f.trim()) ?? [];
    if (names.join(",") !== columns.join(",")) {
      fail(null, null, "invalid_header", `the header must be exactly "${columns.join(",")}" (found "${names.join(",")}")`);
      return [];
    }
    return data.flatMap((record, i) => {
      const row = i + 1;
      if (record.fields.every((f) => f.trim() === "")) return [];
      if (record.fields.length !== columns.length) {
        fail(row, null, "invalid_row", `expected ${columns.length} fields, found ${record.fields.length} (line ${record.line})`);
        return [];
      }
      return [{ row, cells: Object.fromEntries(columns.map((c, k) => [c, record.fields[k]])), typed: false }];
    });
  }
  let value: unknown;
  if (doc.format === "json") {
    try {
      value = JSON.parse(doc.content);
    } catch (error) {
      fail(null, null, "invalid_json", (error as Error).message);
      return [];
    }
  } else if (doc.format === "yaml") {
    const parsed = parseText(doc.content);
    if (!parsed.ok) {
      for (const e of parsed.errors) fail(null, null, "invalid_yaml", e.line === undefined ? e.message : `line ${e.line}: ${e.message}`);
      return [];
    }
    value = parsed.value;
  } else {
    fail(null, null, "invalid_format", `unknown format "${String(doc.format)}" (use csv, yaml or json)`);
    return [];
  }
  if (!Array.isArray(value)) {
    fail(null, null, "invalid_document", "the document must be a list of rows");
    return [];
  }
  return value.flatMap((cells, row) => {
    if (isRecord(cells)) return [{ row, cells, typed: true }];
    fail(row, null, "invalid_row", "each row must be an object");
    return [];
  });
}

function readRow(kind: GovernanceKind, row: number, cell: CellReader): unknown {
  switch (kind) {
    case "signing_schedule":
      return { row, principal: cell.ref("principal", false), role: cell.name("role", true), reports_to: cell.name("reports_to", false) };
    case "delegation_of_authority":
      return {
        row,
        holder: cell.holder("holder"),
        delegate: cell.ref("delegate", false),
        action: cell.action("action"),
        currency: cell.currency("currency"),
        max_amount: cell.amount("max_amount"),
        valid_until: cell.date("valid_until") ?? null,
      };
    case "approval_matrix":
      return {
        row,
        action: cell.action("action"),
        currency: cell.currency("currency"),
        up_to_amount: cell.amount("up_to_amount"),
        approvals_required: cell.count("approvals_required"),
      };
  }
}

// Orders errors as a reader scans the documents: by document, then row (document-level
// problems first); the sort is stable, so a row's errors keep their column order.
function byRow(errors: GovernanceError[], documentIds: string[]): GovernanceError[] {
  const position = (e: GovernanceError): [number, number] => [documentIds.indexOf(e.document_id), e.row ?? -1];
  return [...errors].sort((a, b) => {
    const [da, ra] = position(a);
    const [db, rb] = position(b);
    return da - db || ra - rb;
  });
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
