import { CollisionError } from "../storage/errors.js";
import type { PrincipalRow, PrincipalStore } from "../storage/principals.js";
import type { OrgCaller } from "../base/caller.js";
import { MandateError, notFound, validationFailed, type FieldError } from "../base/errors.js";
import { newId } from "./ids.js";
import { decodeCursor, encodeCursor, pageSize } from "../base/pagination.js";

/** The stored shapes this module hands to services. */
export type { PrincipalRow } from "../storage/principals.js";

/** Principal kinds. */
export const PRINCIPAL_KINDS = ["person", "role", "org_unit", "service"] as const;
export type PrincipalKind = (typeof PRINCIPAL_KINDS)[number];

const EXTERNAL_REF = /^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,127}$/;

/** Principals: the people, roles, units and services agents act for. */
export class Principals {
  constructor(private readonly store: PrincipalStore) {}

  /** Creates a principal; 409 `already_exists` for a duplicate external_ref. */
  async create(caller: OrgCaller, input: { displayName: string; kind: PrincipalKind; externalRef?: string }): Promise<PrincipalRow> {
    const errors: FieldError[] = [];
    const displayName = input.displayName.trim();
    if (!displayName) errors.push({ field: "display_name", code: "required", message: "must not be empty" });
    else if (displayName.length > 200) errors.push({ field: "display_name", code: "too_long", message: "at most 200 characters" });
    if (input.externalRef !== undefined && !EXTERNAL_REF.test(input.externalRef)) {
      errors.push({ field: "external_ref", code: "invalid_format", message: "1..128 characters: letters, digits and . _ : @ / -" });
    }
    if (errors.length) throw validationFailed(errors);
    try {
      return await this.store.create({
        principal_id: newId("prn"),
        organization_id: caller.organizationId,
        display_name: displayName,
        kind: input.kind,
        external_ref: input.externalRef ?? null,
      });
    } catch (err) {
      if (err instanceof CollisionError) throw new MandateError("already_exists", "A principal with this external_ref already exists.");
      throw err;
    }
  }

  /** One principal of the caller's organization; 404 otherwise. */
  async get(caller: OrgCaller, principalId: string): Promise<PrincipalRow> {
    const row = await this.store.get(caller.organizationId, principalId);
    if (!row) throw notFound("Principal");
    return row;
  }

  /** A page of principals and the token of the next one ("" at the end). */
  async list(caller: OrgCaller, size: number, token: string): Promise<{ rows: PrincipalRow[]; next: string }> {
    const limit = pageSize(size);
    const rows = await this.store.list(caller.organizationId, decodeCursor(token), limit + 1);
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return { rows: page, next: rows.length > limit && last ? encodeCursor({ createdAt: last.created_at, id: last.principal_id }) : "" };
  }
}
