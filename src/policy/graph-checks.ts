import { CellReader, isRecord } from "./cell-reader.js";
import { ROLE_PREFIX, computeHoldings, maxHolding } from "./graph-index.js";
import type { AuthorityGraph, GraphValidation, RoleEdge } from "./graph-types.js";
import { renderPath, type Path } from "./source.js";

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

interface Problem {
  path: Path;
  code: string;
  message: string;
}

/** Receives one problem, at its path in the graph (`[list, index, field]` for a field of an entry). */
export type ReportProblem = (path: Path, code: string, message: string) => void;

const GRAPH_LISTS = ["roles", "memberships", "limits", "delegations", "approval_matrix"] as const;
type GraphList = (typeof GRAPH_LISTS)[number];

const GRAPH_COLUMNS: Record<GraphList, readonly string[]> = {
  roles: ["role", "reports_to"],
  memberships: ["principal", "role"],
  limits: ["holder", "action", "currency", "max_amount", "valid_until"],
  delegations: ["holder", "delegate", "action", "currency", "max_amount", "valid_until"],
  approval_matrix: ["action", "currency", "up_to_amount", "approvals_required"],
};

/**
 * Validates and normalises a graph, reporting each problem at its path; returns undefined when
 * the shape is too broken to go on. Error paths cite the input's own list indexes, even where
 * invalid entries were left out. validateGraph reports the paths as they are; generateGraph
 * maps them back to the document rows the entries came from.
 */
export function checkGraph(input: unknown, known: ReadonlySet<string>, report: ReportProblem): AuthorityGraph | undefined {
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
