import type { Cursor } from "../base/pagination.js";

/** A principal as stored. */
export interface PrincipalRow {
  principal_id: string;
  organization_id: string;
  display_name: string;
  kind: "person" | "role" | "org_unit" | "service";
  external_ref: string | null;
  created_at: Date;
}

/** A principal to create. */
export type NewPrincipal = Omit<PrincipalRow, "created_at">;

/** Principals: the people, roles, units and services agents act for. */
export interface PrincipalStore {
  /**
   * Creates a principal; returns it. Throws CollisionError (key
   * `principals_organization_id_external_ref_key`) when the organization already has a
   * principal with that external_ref (another key only on an id collision), NotFoundError when
   * the organization does not exist.
   */
  create(principal: NewPrincipal): Promise<PrincipalRow>;

  /** The principal, or null when the organization has none with that id. */
  get(organizationId: string, principalId: string): Promise<PrincipalRow | null>;

  /** Up to `limit` of the organization's principals in (created_at, principal_id) order, after `after` when given. */
  list(organizationId: string, after: Cursor | null, limit: number): Promise<PrincipalRow[]>;

  /** The external_refs of the organization's principals (the authority graph names principals by them). */
  externalRefs(organizationId: string): Promise<Set<string>>;
}
