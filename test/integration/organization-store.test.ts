import { createHash, randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PERMISSIONS } from "../../src/base/caller.js";
import { newId } from "../../src/domain/ids.js";
import { CollisionError, NotFoundError } from "../../src/storage/errors.js";
import type { EvidenceStore } from "../../src/storage/evidence.js";
import type { ApiKeyRow, NewApiKey, NewOrganization, OrganizationRow, OrganizationStateChange, OrganizationStore, SandboxCounts, SandboxSignup } from "../../src/storage/organizations.js";
import type { InitialPolicy, PolicyStore } from "../../src/storage/policies.js";
import { type Database } from "../../src/storage/postgres/database.js";
import { PostgresOrganizationStore } from "../../src/storage/postgres/organizations.js";
import { PostgresPolicyStore } from "../../src/storage/postgres/policies.js";
import { storeDatabase } from "../support/stores.js";
import { waitFor } from "../support/wait.js";

/*
 * The OrganizationStore contract (src/storage/organizations.ts) on real Postgres, through the
 * interface alone: create stores the organization, its first key (read back without its secret
 * hash) and its first policy, active with the head at its bundle, all or nothing (CollisionError
 * on a taken organization id, key id or secret hash); createSandbox hands `admit` the counts as
 * they stand before the signup, writes nothing when it refuses, and serializes concurrent signups
 * so a cap holds; changeState hands `step` the organization under lock and stores the state with
 * its evidence (subject: the organization) or nothing; liveKeys answers one entry per hash in
 * order with the organization's state now; listKeys keeps revoked keys, oldest first; revokeKey
 * keeps the first revocation time and answers null for another organization's key. The service
 * only migrates this database (its own database: sandbox totals count every signup in it).
 */

let db: Database;
let store: OrganizationStore;
let policies: PolicyStore;
let evidence: EvidenceStore;
let policy: InitialPolicy;

beforeAll(async () => {
  const made = await storeDatabase("organization_store");
  ({ db, evidence } = made);
  const chain = made.chain;
  store = new PostgresOrganizationStore(db, chain);
  policies = new PostgresPolicyStore(db, chain);
  const bundle = Buffer.from("a bundle for the organization store suite");
  const digest = `sha256:${createHash("sha256").update(bundle).digest("hex")}`;
  await policies.putBundle(digest, bundle);
  policy = {
    policy_key: "starter",
    description: "The first policy.",
    source: { rules: [] },
    rego: "package starter\n",
    author: "system",
    head: { bundle_digest: digest, policy_versions: { starter: 1 }, graph_version: 0 },
  };
});

afterAll(async () => {
  await db?.close();
});

const newOrg = (fields: Partial<NewOrganization> = {}): NewOrganization => ({ organization_id: newId("org"), name: "Acme", sandbox: false, ...fields });
const secret = () => createHash("sha256").update(randomBytes(32)).digest();
const newKey = (organizationId: string, fields: Partial<NewApiKey> = {}): NewApiKey => ({
  key_id: newId("key"),
  organization_id: organizationId,
  name: "initial",
  secret_sha256: secret(),
  permissions: ["ORG_ADMIN", "AGENT_ADMIN"],
  ...fields,
});
/** What a key reads back as: never its secret's hash. */
const readBack = (k: NewApiKey): ApiKeyRow => ({ key_id: k.key_id, organization_id: k.organization_id, name: k.name, permissions: [...k.permissions], created_at: expect.any(Date), revoked_at: null });

/** A state change `step` allowed from `from` only, as the domain's does. */
const toState =
  (from: OrganizationRow["state"], state: OrganizationRow["state"]) =>
  (current: OrganizationRow): OrganizationStateChange => {
    if (current.state !== from) throw new Error(`already ${current.state}`);
    return { state, evidence: { kind: state === "suspended" ? "organization.suspended" : "organization.reactivated", payload: { from } } };
  };

async function organization(): Promise<{ org: OrganizationRow; key: ApiKeyRow; secret: Buffer }> {
  const o = newOrg();
  const k = newKey(o.organization_id);
  return { ...(await store.create(o, k, policy)), secret: k.secret_sha256 };
}

describe("OrganizationStore (Postgres)", () => {
  it("creates an organization with its first key and its first policy, active with the head at its bundle; get serves it", async () => {
    const o = newOrg({ name: "Acme Payments" });
    const k = newKey(o.organization_id, { permissions: PERMISSIONS });
    const created = await store.create(o, k, policy);
    expect(created).toEqual({ org: { ...o, state: "active", created_at: expect.any(Date) }, key: readBack(k) });
    expect(await store.get(o.organization_id)).toEqual(created.org);
    expect(await store.get(newId("org"))).toBeNull();
    expect(await policies.head(o.organization_id)).toEqual(policy.head);
    expect(await policies.versions(o.organization_id)).toEqual([
      expect.objectContaining({ organization_id: o.organization_id, policy_key: "starter", version: 1, state: "active", rego: policy.rego, author: "system" }),
    ]);
    expect(await store.listKeys(o.organization_id)).toEqual([created.key]);
    expect(await store.liveKeys([k.secret_sha256])).toEqual([{ ...created.key, organization_state: "active" }]);
  });

  it("refuses a taken organization id, key id or secret hash with CollisionError, writing nothing of the organization", async () => {
    const { org, key, secret: taken } = await organization();
    const attempts: [string, NewOrganization, (o: NewOrganization) => NewApiKey][] = [
      ["organization id", newOrg({ organization_id: org.organization_id }), (o) => newKey(o.organization_id)],
      ["key id", newOrg(), (o) => newKey(o.organization_id, { key_id: key.key_id })],
      ["secret hash", newOrg(), (o) => newKey(o.organization_id, { secret_sha256: taken })],
    ];
    for (const [what, o, k] of attempts) {
      const attempt = k(o);
      const err = await store.create(o, attempt, policy).catch((e: unknown) => e);
      expect(err, what).toBeInstanceOf(CollisionError);
      if (o.organization_id !== org.organization_id) {
        expect(await store.get(o.organization_id), what).toBeNull();
        expect(await policies.head(o.organization_id), what).toBeNull();
      }
      if (attempt.secret_sha256 !== taken) expect(await store.liveKeys([attempt.secret_sha256]), what).toEqual([null]);
    }
    expect(await store.get(org.organization_id)).toEqual(org);
    expect(await store.listKeys(org.organization_id)).toEqual([key]);
  });

  it("hands admit the sandbox counts as they stand before the signup, writes nothing when admit refuses, and serializes concurrent signups so a cap holds", async () => {
    const signup = (fields: Partial<SandboxSignup> = {}): SandboxSignup => ({ email: `${newId("dev")}@example.com`, client_address: `203.0.113.${randomBytes(1)[0]}:${newId("a")}`, ...fields });
    const sandbox = async (s: SandboxSignup, admit: (c: SandboxCounts) => void, key: Partial<NewApiKey> = {}) => {
      const o = newOrg({ sandbox: true, name: "Sandbox" });
      return { o, result: store.createSandbox(o, newKey(o.organization_id, key), policy, s, admit) };
    };
    /** The counts a signup would be admitted on, read by a signup that is then refused. */
    const counts = async (s: SandboxSignup): Promise<SandboxCounts> => {
      let seen: SandboxCounts | undefined;
      const refused = new Error("only counting");
      const attempt = await sandbox(s, (c) => {
        seen = c;
        throw refused;
      });
      await expect(attempt.result).rejects.toBe(refused);
      return seen!;
    };
    const seen: SandboxCounts[] = [];
    const first = signup();
    const { o, result } = await sandbox(first, (c) => void seen.push(c));
    expect((await result).org).toEqual({ ...o, state: "active", created_at: expect.any(Date) });
    expect(await policies.head(o.organization_id)).toEqual(policy.head);
    expect(seen[0]).toEqual({ byAddressLastHour: 0, byEmailLastDay: 0, total: seen[0]!.total, addressWindowFreesInSeconds: 0, emailWindowFreesInSeconds: 0 });
    const total = seen[0]!.total;

    const sameAddress = signup({ client_address: first.client_address });
    await (await sandbox(sameAddress, (c) => void seen.push(c))).result;
    expect(seen[1]).toMatchObject({ byAddressLastHour: 1, byEmailLastDay: 0, total: total + 1, emailWindowFreesInSeconds: 0 });
    expect(seen[1]!.addressWindowFreesInSeconds).toBeGreaterThan(0);
    expect(seen[1]!.addressWindowFreesInSeconds).toBeLessThanOrEqual(3600);
    await (await sandbox(signup({ email: first.email }), (c) => void seen.push(c))).result;
    expect(seen[2]).toMatchObject({ byAddressLastHour: 0, byEmailLastDay: 1, total: total + 2, addressWindowFreesInSeconds: 0 });
    expect(seen[2]!.emailWindowFreesInSeconds).toBeGreaterThan(0);
    expect(seen[2]!.emailWindowFreesInSeconds).toBeLessThanOrEqual(86_400);

    const refusal = new Error("the sandbox is full");
    const refused = await sandbox(first, () => {
      throw refusal;
    });
    await expect(refused.result).rejects.toBe(refusal);
    expect(await store.get(refused.o.organization_id)).toBeNull();
    expect(await policies.head(refused.o.organization_id)).toBeNull();
    // Admitted, then the key collides: the signup goes with the rest (the next one counts none more).
    const { secret: taken } = await organization();
    const collided = await sandbox(first, () => undefined, { secret_sha256: taken });
    await expect(collided.result).rejects.toBeInstanceOf(CollisionError);
    expect(await store.get(collided.o.organization_id)).toBeNull();
    expect(await counts(first)).toMatchObject({ total: total + 3, byAddressLastHour: 2, byEmailLastDay: 2 });

    // Six at once against a cap of three more: each counts the others that committed before it.
    const cap = total + 6;
    const racing = await Promise.all(
      Array.from({ length: 6 }, () =>
        sandbox(signup(), (c) => {
          if (c.total >= cap) throw new Error("full");
        }),
      ),
    );
    const settled = await Promise.allSettled(racing.map((r) => r.result));
    expect(settled.filter((s) => s.status === "fulfilled")).toHaveLength(3);
    expect(settled.filter((s) => s.status === "rejected").map((s) => (s as PromiseRejectedResult).reason.message)).toEqual(["full", "full", "full"]);
    expect((await counts(signup())).total).toBe(cap);
  });

  it("changes state under lock with its evidence about the organization: concurrent changes each see the last one's result; a refusing step, unstorable evidence or an unknown organization writes nothing", async () => {
    const { org } = await organization();
    const id = org.organization_id;
    const suspended = await store.changeState(id, (current) => {
      expect(current).toEqual(org);
      return toState("active", "suspended")(current);
    });
    expect(suspended).toEqual({ ...org, state: "suspended" });
    expect(await store.get(id)).toEqual(suspended);
    const records = await evidence.bySubject(id, id);
    expect(records.map((r) => [r.kind, r.payload])).toEqual([["organization.suspended", { from: "active" }]]);

    const refusal = new Error("already suspended");
    await expect(
      store.changeState(id, () => {
        throw refusal;
      }),
    ).rejects.toBe(refusal);
    // Evidence the chain refuses to seal, after the state was set in the same transaction.
    await expect(store.changeState(id, (current) => ({ ...toState("suspended", "active")(current), evidence: { kind: "organization.\u0000", payload: {} } }))).rejects.toThrow();
    expect((await store.get(id))!.state).toBe("suspended");
    expect(await evidence.bySubject(id, id)).toHaveLength(1);

    let called = false;
    await expect(
      store.changeState(newId("org"), (current) => {
        called = true;
        return toState("active", "suspended")(current);
      }),
    ).rejects.toBeInstanceOf(NotFoundError);
    expect(called).toBe(false);

    // Five toggles at once: under the lock each sees the state the one before it stored.
    const flip = (current: OrganizationRow) => toState(current.state, current.state === "active" ? "suspended" : "active")(current);
    await Promise.all(Array.from({ length: 5 }, () => store.changeState(id, flip)));
    expect((await store.get(id))!.state).toBe("active");
    const froms = (await evidence.bySubject(id, id)).map((r) => r.payload.from);
    expect(froms).toEqual(["active", "suspended", "active", "suspended", "active", "suspended"]);
  });

  it("creates keys (CollisionError on a taken id or secret hash, NotFoundError for an unknown organization); liveKeys answers one entry per hash in order with the organization's state now, null for unknown or revoked; liveKey the same by id", async () => {
    const { org, key, secret: first } = await organization();
    const other = await organization();
    const id = org.organization_id;
    const k = newKey(id, { name: "ci", permissions: ["DECISION_READ"] });
    const created = await store.createKey(k);
    expect(created).toEqual(readBack(k));
    for (const taken of [newKey(id, { key_id: k.key_id }), newKey(id, { secret_sha256: k.secret_sha256 }), newKey(id, { secret_sha256: other.secret })]) {
      await expect(store.createKey(taken)).rejects.toBeInstanceOf(CollisionError);
    }
    expect(await store.listKeys(id)).toHaveLength(2);
    await expect(store.createKey(newKey(newId("org")))).rejects.toBeInstanceOf(NotFoundError);

    const unknown = secret();
    expect(await store.liveKeys([])).toEqual([]);
    expect(await store.liveKeys([k.secret_sha256, unknown, first, other.secret, k.secret_sha256])).toEqual([
      { ...created, organization_state: "active" },
      null,
      { ...key, organization_state: "active" },
      { ...other.key, organization_state: "active" },
      { ...created, organization_state: "active" },
    ]);
    await store.changeState(id, toState("active", "suspended"));
    expect(await store.liveKeys([k.secret_sha256, other.secret])).toEqual([
      { ...created, organization_state: "suspended" },
      { ...other.key, organization_state: "active" },
    ]);
    // liveKey: the same reading by key id, within its organization only.
    expect(await store.liveKey(id, k.key_id)).toEqual({ ...created, organization_state: "suspended" });
    expect(await store.liveKey(other.org.organization_id, k.key_id)).toBeNull();
    await store.revokeKey(id, k.key_id);
    expect(await store.liveKeys([k.secret_sha256, first])).toEqual([null, { ...key, organization_state: "suspended" }]);
    expect(await store.liveKey(id, k.key_id)).toBeNull();
    expect(await store.liveKey(id, key.key_id)).toEqual({ ...key, organization_state: "suspended" });
  });

  it("revokes a key once (a second revocation keeps the first time), never another organization's; listKeys keeps revoked keys, oldest first", async () => {
    const { org, key, secret: first } = await organization();
    const other = await organization();
    const id = org.organization_id;
    const more: ApiKeyRow[] = [];
    for (const name of ["second", "third"]) more.push(await store.createKey(newKey(id, { name })));

    expect(await store.revokeKey(other.org.organization_id, key.key_id)).toBeNull();
    expect(await store.revokeKey(id, newId("key"))).toBeNull();
    expect(await store.liveKeys([first])).toEqual([{ ...key, organization_state: "active" }]);

    const revoked = await store.revokeKey(id, key.key_id);
    expect(revoked).toEqual({ ...key, revoked_at: expect.any(Date) });
    // The clock past the first revocation, so a second one that moved the time would show.
    await waitFor("the clock to pass the revocation", () => Date.now() > revoked!.revoked_at!.getTime() + 1);
    expect(await store.revokeKey(id, key.key_id)).toEqual(revoked);
    expect(await store.liveKeys([first])).toEqual([null]);

    const listed = await store.listKeys(id);
    expect(new Set(listed.map((k) => k.key_id))).toEqual(new Set([key.key_id, ...more.map((k) => k.key_id)]));
    expect(listed.find((k) => k.key_id === key.key_id)).toEqual(revoked);
    const times = listed.map((k) => k.created_at.getTime());
    expect(times).toEqual([...times].sort((a, b) => a - b));
    expect(await store.listKeys(other.org.organization_id)).toEqual([other.key]);
    expect(await store.listKeys(newId("org"))).toEqual([]);
  });
});
