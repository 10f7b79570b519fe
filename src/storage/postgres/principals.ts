import type { Cursor } from "../../base/pagination.js";
import type { NewPrincipal, PrincipalRow, PrincipalStore } from "../principals.js";
import type { Database, Queryable } from "./database.js";

/** SQL for principals (also for other stores that read a principal inside their own transaction). */
export const principalSql = {
  async insert(q: Queryable, p: NewPrincipal): Promise<PrincipalRow> {
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

  async list(q: Queryable, organizationId: string, after: Cursor | null, limit: number): Promise<PrincipalRow[]> {
    const { rows } = await q.query<PrincipalRow>(
      `SELECT * FROM principals WHERE organization_id = $1
         AND ($2::timestamptz IS NULL OR (created_at, principal_id) > ($2, $3))
       ORDER BY created_at, principal_id LIMIT $4`,
      [organizationId, after?.createdAt ?? null, after?.id ?? "", limit],
    );
    return rows;
  },

  async externalRefs(q: Queryable, organizationId: string): Promise<Set<string>> {
    const { rows } = await q.query<{ external_ref: string }>(
      "SELECT external_ref FROM principals WHERE organization_id = $1 AND external_ref IS NOT NULL",
      [organizationId],
    );
    return new Set(rows.map((r) => r.external_ref));
  },
};

/** The PrincipalStore on Postgres. */
export class PostgresPrincipalStore implements PrincipalStore {
  constructor(private readonly db: Database) {}

  create(principal: NewPrincipal): Promise<PrincipalRow> {
    return principalSql.insert(this.db.pool, principal);
  }

  get(organizationId: string, principalId: string): Promise<PrincipalRow | null> {
    return principalSql.get(this.db.pool, organizationId, principalId);
  }

  list(organizationId: string, after: Cursor | null, limit: number): Promise<PrincipalRow[]> {
    return principalSql.list(this.db.pool, organizationId, after, limit);
  }

  externalRefs(organizationId: string): Promise<Set<string>> {
    return principalSql.externalRefs(this.db.pool, organizationId);
  }
}
