import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CollisionError, NotFoundError } from "../../src/storage/errors.js";
import type { EvidenceEntry, EvidenceStore } from "../../src/storage/evidence.js";
import type { IntegrationStore, NewAdapter, NewIntegration } from "../../src/storage/integrations.js";
import { type Database } from "../../src/storage/postgres/database.js";
import { PostgresIntegrationStore } from "../../src/storage/postgres/integrations.js";
import { newOrganizations, storeDatabase } from "../support/stores.js";

/*
 * The IntegrationStore contract (src/storage/integrations.ts) on real Postgres: an integration
 * created with every action claimed or not at all (CollisionError `integration_actions_pkey`,
 * one winner among concurrent claims, the same action free in another organization); lists
 * scoped to the organization, oldest first; contract versions numbered after the highest under
 * the integration's lock, one active at a time (also under concurrent approvals); adapters refused on a taken public key
 * (CollisionError `adapters_public_key_key`) and found by id alone; every change that leaves
 * evidence writes both or neither, with `step` handed the row under lock and nothing written
 * when it throws; NotFoundError for another organization's rows.
 */

let db: Database;
let store: IntegrationStore;
let evidence: EvidenceStore;
const orgs: string[] = [];

beforeAll(async () => {
  const made = await storeDatabase("integration_store", (svc) => newOrganizations(svc, 4));
  ({ db, evidence } = made);
  orgs.push(...made.fixtures);
  store = new PostgresIntegrationStore(db, made.chain);
});

afterAll(async () => {
  await db?.close();
});

let n = 0;
const integration = (organizationId: string, actions: string[]): NewIntegration => ({
  integration_id: `int_test${String(++n).padStart(22, "0")}`,
  organization_id: organizationId,
  name: `integration ${n}`,
  actions,
});
const adapter = (organizationId: string, integrationId: string, role: NewAdapter["role"] = "adapter"): NewAdapter => ({
  adapter_id: `adp_test${String(++n).padStart(22, "0")}`,
  integration_id: integrationId,
  organization_id: organizationId,
  name: `adapter ${n}`,
  public_key: randomBytes(32).toString("base64url"),
  role,
});
const entry = (organizationId: string, kind: string, subjectId: string): EvidenceEntry => ({ organizationId, kind, subjectId, payload: { kind, subjectId } });
const records = async (organizationId: string) => (await evidence.page(organizationId, 0, 1000)).records;
const contract = (integrationId: string, author = "alice") => ({
  integration_id: integrationId,
  resource_path: "payment.amount",
  context_bindings: { tier: "context.tier" },
  field_types: { amount: { type: "number" as const, required: true }, "context.tier": { type: "enum" as const, values: ["a", "b"] } },
  author,
});

describe("PostgresIntegrationStore: integrations", () => {
  it("creates an integration with its actions claimed, all or nothing, and lists the organization's oldest first", async () => {
    const [a, b] = [orgs[0]!, orgs[1]!];
    const first = integration(a, ["pay", "refund"]);
    await store.create(first);
    const clash = integration(a, ["transfer", "refund"]);
    const refused = store.create(clash);
    await expect(refused).rejects.toBeInstanceOf(CollisionError);
    await expect(refused).rejects.toMatchObject({ key: "integration_actions_pkey" });
    // Nothing of the refused integration stays, not even its free action.
    expect(await store.list(a, clash.integration_id)).toEqual([]);
    const free = integration(a, ["transfer"]);
    await store.create(free);
    // Another organization's actions are its own.
    await store.create(integration(b, ["pay"]));

    const listed = await store.list(a);
    expect(listed.map((i) => i.integration_id)).toEqual([first.integration_id, free.integration_id]);
    expect(listed[0]).toMatchObject({ ...first, state: "active" });
    expect(listed[0]!.created_at).toBeInstanceOf(Date);
    expect(await store.list(a, free.integration_id)).toEqual([listed[1]]);
    expect(await store.list(b, first.integration_id)).toEqual([]);
  });

  it("lets exactly one of concurrent creations claim an action", async () => {
    const a = orgs[2]!;
    const results = await Promise.allSettled(Array.from({ length: 4 }, () => store.create(integration(a, ["contested"]))));
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    for (const r of results.filter((r) => r.status === "rejected")) expect((r as PromiseRejectedResult).reason).toMatchObject({ key: "integration_actions_pkey" });
    expect((await store.list(a)).filter((i) => i.actions.includes("contested"))).toHaveLength(1);
  });

  it("changes an integration's state with its evidence under lock; writes neither when step refuses; NotFoundError for another organization's", async () => {
    const [a, b] = [orgs[0]!, orgs[1]!];
    const i = integration(a, [`act_${n}`]);
    await store.create(i);
    const before = (await records(a)).length;
    const seen: string[] = [];
    const suspended = await store.setState(a, i.integration_id, (current) => {
      seen.push(current.state);
      return { state: "suspended", evidence: entry(a, "integration.suspended", i.integration_id) };
    });
    expect(suspended).toMatchObject({ integration_id: i.integration_id, state: "suspended" });
    await expect(store.setState(a, i.integration_id, (current) => {
      seen.push(current.state);
      throw new Error("already suspended");
    })).rejects.toThrow("already suspended");
    expect(seen).toEqual(["active", "suspended"]);
    expect((await store.list(a, i.integration_id))[0]!.state).toBe("suspended");
    const appended = (await records(a)).slice(before);
    expect(appended.map((r) => [r.kind, r.subject_id])).toEqual([["integration.suspended", i.integration_id]]);

    let called = false;
    const step = () => {
      called = true;
      return { state: "revoked" as const, evidence: entry(b, "integration.revoked", i.integration_id) };
    };
    await expect(store.setState(b, i.integration_id, step)).rejects.toBeInstanceOf(NotFoundError);
    await expect(store.setState(a, "int_none", step)).rejects.toBeInstanceOf(NotFoundError);
    expect(called).toBe(false);
    expect((await records(a)).length).toBe(before + 1);
  });
});

describe("PostgresIntegrationStore: contracts", () => {
  it("numbers concurrent proposals after the highest, lists them by integration and version", async () => {
    const [a, b] = [orgs[1]!, orgs[2]!];
    const i1 = integration(a, [`c1_${n}`]);
    const i2 = integration(a, [`c2_${n}`]);
    await store.create(i2);
    await store.create(i1);
    const proposed = await Promise.all(Array.from({ length: 5 }, (_, k) => store.proposeContract(a, contract(i1.integration_id, `author${k}`))));
    expect(proposed.map((c) => c.version).sort()).toEqual([1, 2, 3, 4, 5]);
    expect(proposed[0]).toMatchObject({ integration_id: i1.integration_id, state: "proposed", approver: null, resource_path: "payment.amount", context_bindings: { tier: "context.tier" } });
    expect(proposed[0]!.field_types).toEqual(contract(i1.integration_id).field_types);
    await store.proposeContract(a, contract(i2.integration_id));
    await expect(store.proposeContract(b, contract(i1.integration_id))).rejects.toBeInstanceOf(NotFoundError);
    await expect(store.proposeContract(a, contract("int_none"))).rejects.toBeInstanceOf(NotFoundError);

    const ids = [i1.integration_id, i2.integration_id].sort();
    const listed = await store.contracts([i2.integration_id, i1.integration_id]);
    const order = listed.map((c) => [c.integration_id, c.version] as const);
    expect(order).toEqual([...order].sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : x[1] - y[1])));
    expect(new Set(listed.map((c) => c.integration_id))).toEqual(new Set(ids));
    expect(listed).toHaveLength(6);
    expect(await store.contracts(["int_none"])).toEqual([]);
  });

  it("approves a version with its evidence, superseding the active one; writes neither when step refuses", async () => {
    const [a, b] = [orgs[3]!, orgs[0]!];
    const i = integration(a, [`ap_${n}`]);
    await store.create(i);
    await store.proposeContract(a, contract(i.integration_id));
    await store.proposeContract(a, contract(i.integration_id));
    const before = (await records(a)).length;
    const v1 = await store.approveContract(a, i.integration_id, 1, (current) => {
      expect(current).toMatchObject({ version: 1, state: "proposed", author: "alice" });
      return { approver: "bob", evidence: entry(a, "contract.approved", `${i.integration_id}/1`) };
    });
    expect(v1).toMatchObject({ integration_id: i.integration_id, version: 1, state: "active", approver: "bob" });

    await expect(store.approveContract(a, i.integration_id, 2, () => {
      throw new Error("the author cannot approve");
    })).rejects.toThrow("the author cannot approve");
    expect((await store.contracts([i.integration_id])).map((c) => [c.version, c.state, c.approver])).toEqual([
      [1, "active", "bob"],
      [2, "proposed", null],
    ]);

    await store.approveContract(a, i.integration_id, 2, () => ({ approver: "carol", evidence: entry(a, "contract.approved", `${i.integration_id}/2`) }));
    expect((await store.contracts([i.integration_id])).map((c) => [c.version, c.state, c.approver])).toEqual([
      [1, "superseded", "bob"],
      [2, "active", "carol"],
    ]);
    expect((await records(a)).slice(before).map((r) => r.subject_id)).toEqual([`${i.integration_id}/1`, `${i.integration_id}/2`]);

    const step = () => ({ approver: "x", evidence: entry(b, "contract.approved", "x") });
    await expect(store.approveContract(b, i.integration_id, 1, step)).rejects.toBeInstanceOf(NotFoundError);
    await expect(store.approveContract(a, i.integration_id, 3, step)).rejects.toBeInstanceOf(NotFoundError);
    expect((await records(a)).length).toBe(before + 2);
  });
  it("takes concurrent approvals in turn: each succeeds with its evidence, and one version is active at the end", async () => {
    const a = orgs[3]!;
    const i = integration(a, [`cc_${n}`]);
    await store.create(i);
    for (let v = 0; v < 3; v++) await store.proposeContract(a, contract(i.integration_id));
    const before = (await records(a)).length;
    const results = await Promise.allSettled([1, 2, 3].map((v) => store.approveContract(a, i.integration_id, v, () => ({ approver: "bob", evidence: entry(a, "contract.approved", `${i.integration_id}/${v}`) }))));
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "fulfilled", "fulfilled"]);
    const approved = results.map((_, k) => `${i.integration_id}/${k + 1}`);
    const states = (await store.contracts([i.integration_id])).map((c) => c.state);
    expect(states.filter((s) => s === "active")).toHaveLength(1);
    expect(states.filter((s) => s !== "proposed")).toHaveLength(approved.length);
    expect((await records(a)).slice(before).map((r) => r.subject_id).sort()).toEqual(approved.sort());
  });
});

describe("PostgresIntegrationStore: adapters", () => {
  it("registers an adapter with its evidence, refuses a taken public key, finds it by id alone", async () => {
    const [a, b] = [orgs[2]!, orgs[3]!];
    const i = integration(a, [`ad_${n}`]);
    await store.create(i);
    const before = (await records(a)).length;
    const first = adapter(a, i.integration_id);
    const row = await store.registerAdapter(first, entry(a, "adapter.registered", first.adapter_id));
    const { organization_id: _org, ...stored } = first;
    expect(row).toMatchObject({ ...stored, state: "active" });
    expect(row).not.toHaveProperty("organization_id");
    expect(row.created_at).toBeInstanceOf(Date);

    const sameKey = { ...adapter(a, i.integration_id), public_key: first.public_key };
    const refused = store.registerAdapter(sameKey, entry(a, "adapter.registered", sameKey.adapter_id));
    await expect(refused).rejects.toBeInstanceOf(CollisionError);
    await expect(refused).rejects.toMatchObject({ key: "adapters_public_key_key" });
    // Neither the adapter nor its evidence.
    expect(await store.adapter(sameKey.adapter_id)).toBeNull();
    expect((await records(a)).slice(before).map((r) => r.subject_id)).toEqual([first.adapter_id]);

    const destination = adapter(a, i.integration_id, "destination");
    await store.registerAdapter(destination, entry(a, "adapter.registered", destination.adapter_id));
    const listed = await store.adapters([i.integration_id]);
    expect(listed.map((d) => [d.adapter_id, d.role]).sort()).toEqual([
      [first.adapter_id, "adapter"],
      [destination.adapter_id, "destination"],
    ].sort());
    // Oldest first; two made in the same millisecond have no order between them.
    expect(listed[0]!.created_at.getTime()).toBeLessThanOrEqual(listed[1]!.created_at.getTime());
    expect(await store.adapter(first.adapter_id)).toEqual({ ...row, organization_id: a });
    expect(await store.adapter("adp_none")).toBeNull();
    expect(await store.adapters(["int_none"])).toEqual([]);

    // Found by id alone whatever the caller's organization; changed only through its own.
    let called = false;
    const step = () => {
      called = true;
      return { state: "revoked" as const, evidence: entry(b, "adapter.revoked", first.adapter_id) };
    };
    await expect(store.setAdapterState(b, i.integration_id, first.adapter_id, step)).rejects.toBeInstanceOf(NotFoundError);
    await expect(store.setAdapterState(a, "int_none", first.adapter_id, step)).rejects.toBeInstanceOf(NotFoundError);
    await expect(store.setAdapterState(a, i.integration_id, "adp_none", step)).rejects.toBeInstanceOf(NotFoundError);
    expect(called).toBe(false);
  });

  it("changes an adapter's state with its evidence under lock; writes neither when step refuses", async () => {
    const a = orgs[2]!;
    const i = integration(a, [`as_${n}`]);
    await store.create(i);
    const ad = adapter(a, i.integration_id);
    await store.registerAdapter(ad, entry(a, "adapter.registered", ad.adapter_id));
    const before = (await records(a)).length;
    const seen: string[] = [];
    const suspended = await store.setAdapterState(a, i.integration_id, ad.adapter_id, (current) => {
      seen.push(current.state);
      return { state: "suspended", evidence: entry(a, "adapter.suspended", ad.adapter_id) };
    });
    expect(suspended).toMatchObject({ adapter_id: ad.adapter_id, state: "suspended" });
    await expect(store.setAdapterState(a, i.integration_id, ad.adapter_id, (current) => {
      seen.push(current.state);
      throw new Error("refused");
    })).rejects.toThrow("refused");
    expect(seen).toEqual(["active", "suspended"]);
    expect((await store.adapter(ad.adapter_id))!.state).toBe("suspended");
    expect((await records(a)).slice(before).map((r) => r.kind)).toEqual(["adapter.suspended"]);
  });
});
