import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newId } from "../../src/domain/ids.js";
import { CollisionError, NotFoundError } from "../../src/storage/errors.js";
import { type Database } from "../../src/storage/postgres/database.js";
import { PostgresPrincipalStore } from "../../src/storage/postgres/principals.js";
import type { NewPrincipal, PrincipalRow, PrincipalStore } from "../../src/storage/principals.js";
import { newOrganizations, storeDatabase } from "../support/stores.js";

/*
 * The PrincipalStore contract (src/storage/principals.ts) on real Postgres, through the interface
 * alone: create returns what it stored; one external_ref per organization (CollisionError
 * `principals_organization_id_external_ref_key`, also between concurrent creators, while other
 * organizations and principals without one are free); get only within the organization; list in
 * (created_at, principal_id) order, strictly after the cursor; externalRefs the organization's
 * own, without principals that have none. Organizations come from a service that migrates this
 * database and leaves.
 */

let db: Database;
let store: PrincipalStore;
const orgs: string[] = [];

beforeAll(async () => {
  const made = await storeDatabase("principal_store", (svc) => newOrganizations(svc, 3));
  db = made.db;
  orgs.push(...made.fixtures);
  store = new PostgresPrincipalStore(db);
});

afterAll(async () => {
  await db?.close();
});

const draft = (organizationId: string, fields: Partial<NewPrincipal> = {}): NewPrincipal => ({
  principal_id: newId("prn"),
  organization_id: organizationId,
  display_name: "Head of Payments",
  kind: "role",
  external_ref: newId("ref"),
  ...fields,
});

const byPosition = (a: PrincipalRow, b: PrincipalRow) => a.created_at.getTime() - b.created_at.getTime() || (a.principal_id < b.principal_id ? -1 : 1);

describe("PrincipalStore (Postgres)", () => {
  it("creates principals of every kind and returns them as stored (NotFoundError for an unknown organization); get serves one only to its organization", async () => {
    const [org, other] = [orgs[0]!, orgs[1]!];
    for (const kind of ["person", "role", "org_unit", "service"] as const) {
      const p = draft(org, { kind, display_name: `a ${kind}` });
      const row = await store.create(p);
      expect(row).toEqual({ ...p, created_at: expect.any(Date) });
      expect(await store.get(org, p.principal_id)).toEqual(row);
      expect(await store.get(other, p.principal_id)).toBeNull();
    }
    const anonymous = await store.create(draft(org, { external_ref: null }));
    expect(anonymous.external_ref).toBeNull();
    expect(await store.get(org, newId("prn"))).toBeNull();
    await expect(store.create(draft(newId("org")))).rejects.toBeInstanceOf(NotFoundError);
  });

  it("keeps one external_ref per organization: a second is a CollisionError that stores nothing, whoever races; other organizations and principals without one are free", async () => {
    const [org, other] = [orgs[1]!, orgs[2]!];
    const ref = "hr:employee:4711";
    const racers = Array.from({ length: 5 }, () => draft(org, { external_ref: ref }));
    const results = await Promise.allSettled(racers.map((p) => store.create(p)));
    const won = results.filter((r): r is PromiseFulfilledResult<PrincipalRow> => r.status === "fulfilled");
    expect(won).toHaveLength(1);
    for (const r of results) {
      if (r.status === "rejected") {
        expect(r.reason).toBeInstanceOf(CollisionError);
        expect((r.reason as CollisionError).key).toBe("principals_organization_id_external_ref_key");
      }
    }
    const losers = racers.filter((p) => p.principal_id !== won[0]!.value.principal_id);
    for (const p of losers) expect(await store.get(org, p.principal_id)).toBeNull();

    expect((await store.create(draft(other, { external_ref: ref }))).external_ref).toBe(ref);
    const unnamed = await Promise.all([store.create(draft(org, { external_ref: null })), store.create(draft(org, { external_ref: null }))]);
    expect(unnamed.map((p) => p.external_ref)).toEqual([null, null]);
  });

  it("lists the organization's principals in (created_at, principal_id) order, up to the limit, strictly after the cursor", async () => {
    const org = orgs[2]!;
    const before = await store.list(org, null, 500);
    const made = await Promise.all(Array.from({ length: 6 }, () => store.create(draft(org))));
    const order = [...before, ...made].sort(byPosition).map((p) => p.principal_id);
    const all = await store.list(org, null, 500);
    expect(all.map((p) => p.principal_id)).toEqual(order);
    expect(all.every((p) => p.organization_id === org)).toBe(true);

    const pages: string[] = [];
    for (let after = null as PrincipalRow | null; ; ) {
      const page = await store.list(org, after && { createdAt: after.created_at, id: after.principal_id }, 4);
      expect(page.length).toBeLessThanOrEqual(4);
      pages.push(...page.map((p) => p.principal_id));
      if (page.length < 4) break;
      after = page[page.length - 1]!;
    }
    expect(pages).toEqual(order);
    const last = all[all.length - 1]!;
    expect(await store.list(org, { createdAt: last.created_at, id: last.principal_id }, 10)).toEqual([]);
    expect((await store.list(orgs[0]!, null, 500)).map((p) => p.principal_id)).not.toContain(made[0]!.principal_id);
  });

  it("gives the organization's own external_refs, leaving out principals without one", async () => {
    const [org, other] = [orgs[0]!, orgs[1]!];
    const before = await store.externalRefs(org);
    await store.create(draft(org, { external_ref: "crm:role:approver" }));
    await store.create(draft(org, { external_ref: null }));
    await store.create(draft(other, { external_ref: "crm:role:other-org" }));
    const refs = await store.externalRefs(org);
    expect(refs).toBeInstanceOf(Set);
    expect(refs).toEqual(new Set([...before, "crm:role:approver"]));
    expect(refs.has("crm:role:other-org")).toBe(false);
    expect([...refs].every((r) => typeof r === "string")).toBe(true);
  });
});
