import type { Cursor } from "../../base/pagination.js";
import type { Queryable } from "./database.js";

/** A principal row. */
export interface PrincipalRow {
  principal_id: string;
  organization_id: string;
  display_name: string;
  kind: "person" | "role" | "org_unit" | "service";
  external_ref: string | null;
  created_at: Date;
}

/** SQL for principals. */
export const principalStore = {
  /** Inserts; throws a unique violation (principals_organization_id_external_ref_key) for a duplicate external_ref. */
  async insert(q: Queryable, p: Omit<PrincipalRow, "created_at">): Promise<PrincipalRow> {
    const { rows } = await q.query<PrincipalRow>(
      `INSERT INTO principals (principal_id, organization_id, display_name, kind, external_ref)
       VALUES ($1, $2, $3, $4, $5) RETURNING *`,
      [p.principal_id, p.organization_id, p.display_name, p.kind, p.external_ref],
    );
    return rows[0]!;
  },

  /** The principal if it belongs to the organization, else null. */
  async get(q: Queryable, organizationId: string, principalId: string): Promise<PrincipalRow | null> {
    const { rows } = await q.query<PrincipalRow>("SELECT * FROM principals WHERE organization_id = $1 AND principal_id = $2", [
      organizationId,
      principalId,
    ]);
    return rows[0] ?? null;
  },

  /** A page in (created_at, principal_id) order after `after`. */
  async list(q: Queryable, organizationId: string, after: Cursor | null, limit: number): Promise<PrincipalRow[]> {
    const { rows } = await q.query<PrincipalRow>(
      `SELECT * FROM principals WHERE organization_id = $1
         AND ($2::timestamptz IS NULL OR (created_at, principal_id) > ($2, $3))
       ORDER BY created_at, principal_id LIMIT $4`,
      [organizationId, after?.createdAt ?? null, after?.id ?? "", limit],
    );
    return rows;
  },

  /** The external_refs of the organization's principals (the graph references principals by them). */
  async externalRefs(q: Queryable, organizationId: string): Promise<Set<string>> {
    const { rows } = await q.query<{ external_ref: string }>(
      "SELECT external_ref FROM principals WHERE organization_id = $1 AND external_ref IS NOT NULL",
      [organizationId],
    );
    return new Set(rows.map((r) => r.external_ref));
  },
};
