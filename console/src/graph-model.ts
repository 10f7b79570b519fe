import type { JsonObject, JsonValue } from "@bufbuild/protobuf";

/*
 * The authority graph's JSON form (docs/architecture.md, Policies: {roles, memberships, limits,
 * delegations, approval_matrix}) read from an AuthorityGraph's Struct, and the difference
 * between two versions, row by row.
 */

export interface GraphRows {
  roles: { role: string; reports_to: string | null }[];
  memberships: { principal: string; role: string }[];
  limits: { holder: string; action: string; currency: string; max_amount: number; valid_until: string | null }[];
  delegations: { holder: string; delegate: string; action: string; currency: string; max_amount: number; valid_until: string | null }[];
  approval_matrix: { action: string; currency: string; up_to_amount: number; approvals_required: number }[];
}

/** The five lists of a graph, in the order the tables show them, with their headings and columns. */
export const SECTIONS = [
  { key: "roles", title: "Roles and hierarchy", columns: ["role", "reports_to"] },
  { key: "memberships", title: "Principals and their roles", columns: ["principal", "role"] },
  { key: "limits", title: "Limits", columns: ["holder", "action", "currency", "max_amount", "valid_until"] },
  { key: "delegations", title: "Delegations", columns: ["holder", "delegate", "action", "currency", "max_amount", "valid_until"] },
  { key: "approval_matrix", title: "Approval bands", columns: ["action", "currency", "up_to_amount", "approvals_required"] },
] as const;

export type SectionKey = (typeof SECTIONS)[number]["key"];

/** The graph's lists, each an empty list when absent. */
export function readGraph(graph: JsonObject | undefined): GraphRows {
  const list = (k: SectionKey) => (Array.isArray(graph?.[k]) ? (graph[k] as JsonValue[]) : []) as never[];
  return { roles: list("roles"), memberships: list("memberships"), limits: list("limits"), delegations: list("delegations"), approval_matrix: list("approval_matrix") };
}

/** A row as one comparable string (its columns in order). */
function rowKey(row: Record<string, unknown>, columns: readonly string[]): string {
  return JSON.stringify(columns.map((c) => row[c] ?? null));
}

/** What a version adds to and removes from another, per list. */
export type GraphDiff = Record<SectionKey, { added: Record<string, unknown>[]; removed: Record<string, unknown>[] }>;

/** The rows of `next` not in `base` (added) and of `base` not in `next` (removed), per list. */
export function diffGraphs(base: GraphRows, next: GraphRows): GraphDiff {
  const out = {} as GraphDiff;
  for (const s of SECTIONS) {
    const b = base[s.key] as unknown as Record<string, unknown>[];
    const n = next[s.key] as unknown as Record<string, unknown>[];
    const bKeys = new Set(b.map((r) => rowKey(r, s.columns)));
    const nKeys = new Set(n.map((r) => rowKey(r, s.columns)));
    out[s.key] = { added: n.filter((r) => !bKeys.has(rowKey(r, s.columns))), removed: b.filter((r) => !nKeys.has(rowKey(r, s.columns))) };
  }
  return out;
}

/** A cell as the tables show it. */
export function cellText(value: unknown): string {
  if (value === null || value === undefined || value === "") return "—";
  if (typeof value === "number") return value.toLocaleString(undefined, { maximumFractionDigits: 20 });
  return String(value);
}
