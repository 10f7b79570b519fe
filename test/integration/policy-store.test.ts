import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CollisionError, NotFoundError } from "../../src/storage/errors.js";
import type { EvidenceStore } from "../../src/storage/evidence.js";
import type { NewPolicyChange, PolicyChangeBasis, PolicyHead, PolicyStore, Publication, PublicationBasis } from "../../src/storage/policies.js";
import { type Database } from "../../src/storage/postgres/database.js";
import { PostgresPolicyStore } from "../../src/storage/postgres/policies.js";
import { newOrganizations, storeDatabase } from "../support/stores.js";
import { intentDoc, newAgent, newOrgFixture, signBody, submitIntent } from "../support/agents.js";
import { deferred } from "../support/wait.js";

/*
 * The PolicyStore contract (src/storage/policies.ts) on real Postgres: bundles stored once under
 * their digest and served to an organization only when it used them; policies and versions
 * numbered under a lock (concurrent adds never collide), a taken key refused with CollisionError,
 * NotFoundError for another organization's rows; a version's state changed only as `step` says,
 * nothing written when it refuses, concurrent changes each handed the version as the last left it
 * (one approval, one publication, one application of a pending change wins); a publication (of a version or a graph) that stores bundle,
 * head, version states and one evidence record together or nothing at all, with publications of
 * one organization serialized on its head (the second is built from what the first published);
 * four-eyes rollback and disable: one pending change per policy (CollisionError
 * `policy_changes_one_pending`), never applied by its requester, applied or made stale in one
 * transaction; governance documents with names unique among the live ones; graph versions.
 * No service runs on this database while the store is exercised.
 */

let db: Database;
let store: PolicyStore;
let evidence: EvidenceStore;
const orgs: string[] = [];
/** An organization that made one decision, evaluated with its initial head's bundle. */
let decided: string;

beforeAll(async () => {
  // Organizations, each with its initial policy and head, and one that has made a decision.
  const made = await storeDatabase("policy_store", async (svc) => {
    orgs.push(...(await newOrganizations(svc, 8)));
    const org = await newOrgFixture(svc);
    const agent = await newAgent(svc, org);
    const res = await submitIntent(svc, "v1", signBody(agent, intentDoc(agent.agentId)));
    if (res.body.outcome !== "ALLOW") throw new Error(`intent: ${res.status} ${JSON.stringify(res.body)}`);
    decided = org.organizationId;
  });
  ({ db, evidence } = made);
  store = new PostgresPolicyStore(db, made.chain);
});

afterAll(async () => {
  await db?.close();
});

let n = 0;
// Zero-padded, so ids made in order also sort in order (the tie-break of rows made in the same millisecond).
const unique = (prefix: string) => `${prefix}_${String(++n).padStart(6, "0")}_${Date.now().toString(36)}`;
const version = (organizationId: string, policyKey: string, author = "alice") => ({
  organization_id: organizationId,
  policy_key: policyKey,
  state: "draft" as const,
  source: { rego: `package ${policyKey}` },
  rego: `package ${policyKey}\n`,
  author,
});
/** A publication of a fresh bundle whose evidence names it, as the domain's do. */
function publication(policyVersions: Record<string, number>, graphVersion = 0, kind = "policy.published"): Publication {
  const digest = unique("sha256:bundle");
  return {
    bundle: { digest, bytes: Buffer.from(digest) },
    head: { bundle_digest: digest, policy_versions: policyVersions, graph_version: graphVersion },
    evidence: { kind, subjectId: "policy", payload: { bundle_digest: digest } },
  };
}
const records = async (organizationId: string) => (await evidence.page(organizationId, 0, 1000)).records;
/** Everything a refused change could have touched. */
const snapshot = async (organizationId: string) => ({
  head: await store.head(organizationId),
  versions: await store.versions(organizationId),
  graphs: await store.graphVersions(organizationId),
  records: (await records(organizationId)).length,
});
/** Creates a policy and publishes its first version; returns its key and the publication's head. */
async function publishedPolicy(organizationId: string): Promise<{ key: string; head: PolicyHead }> {
  const key = unique("p");
  await store.createPolicy("", version(organizationId, key));
  const pub = publication({ [key]: 1 });
  await store.publishVersion(organizationId, key, 1, async () => pub);
  return { key, head: pub.head };
}

describe("PostgresPolicyStore: bundles and heads", () => {
  it("stores a bundle once under its digest; serves it to an organization only while it is the head or named by its evidence", async () => {
    const [a, b] = [orgs[0]!, orgs[1]!];
    const digest = unique("sha256:d");
    expect(await store.bundle(digest)).toBeNull();
    await store.putBundle(digest, Buffer.from("first"));
    await store.putBundle(digest, Buffer.from("second"));
    expect((await store.bundle(digest))!.toString()).toBe("first");
    // Stored, but no organization used it.
    expect(await store.organizationBundle(a, digest)).toBeNull();

    const initial = (await store.head(a))!;
    expect(initial.bundle_digest).not.toBe("");
    expect((await store.organizationBundle(a, initial.bundle_digest))).not.toBeNull();
    expect(await store.head("org_nobody")).toBeNull();

    const first = await publishedPolicy(a);
    const second = await publishedPolicy(a);
    expect((await store.head(a))!).toEqual(second.head);
    // No longer the head, but a publication recorded it: still served; never to another organization.
    expect((await store.organizationBundle(a, first.head.bundle_digest))!.toString()).toBe(first.head.bundle_digest);
    expect(await store.organizationBundle(b, first.head.bundle_digest)).toBeNull();
    expect(await store.organizationBundle(b, second.head.bundle_digest)).toBeNull();
    expect(await store.organizationBundle(a, unique("sha256:none"))).toBeNull();
  });

  it("serves a former head's bundle to an organization that made decisions with it, not to one that only had it as its head", async () => {
    const c = orgs[7]!;
    const initial = (await store.head(decided))!.bundle_digest;
    // Every organization starts on the same compiled bundle.
    expect((await store.head(c))!.bundle_digest).toBe(initial);
    await publishedPolicy(decided);
    await publishedPolicy(c);
    expect((await store.head(decided))!.bundle_digest).not.toBe(initial);
    expect((await store.organizationBundle(decided, initial))!.equals((await store.bundle(initial))!)).toBe(true);
    expect(await store.organizationBundle(c, initial)).toBeNull();
  });
});

describe("PostgresPolicyStore: policies and versions", () => {
  it("creates a policy with version 1, refuses a taken key with CollisionError policies_pkey, and lists policies by key", async () => {
    const [a, b] = [orgs[2]!, orgs[3]!];
    const before = await store.policies(a);
    const first = await store.createPolicy("Payments", version(a, "zz_payments"));
    expect(first).toMatchObject({ organization_id: a, policy_key: "zz_payments", version: 1, state: "draft", author: "alice", approver: null, published_at: null, previous_version: null, rego: "package zz_payments\n" });
    expect(first.source).toEqual({ rego: "package zz_payments" });
    const taken = store.createPolicy("again", version(a, "zz_payments"));
    await expect(taken).rejects.toBeInstanceOf(CollisionError);
    await expect(taken).rejects.toMatchObject({ key: "policies_pkey" });
    // Nothing of the refused creation stays.
    expect(await store.versions(a, "zz_payments")).toHaveLength(1);
    // The key is the organization's: another may use it.
    expect((await store.createPolicy("", version(b, "zz_payments"))).version).toBe(1);
    await store.createPolicy("Aardvark", version(a, "aa_first"));
    const after = await store.policies(a);
    expect(after).toHaveLength(before.length + 2);
    expect(after.map((p) => p.policy_key)).toEqual([...after.map((p) => p.policy_key)].sort());
    expect(after).toContainEqual({ policy_key: "zz_payments", description: "Payments" });
    expect(after[0]).toEqual({ policy_key: "aa_first", description: "Aardvark" });
  });

  it("numbers concurrent versions one past the last under the policy's lock, refuses another organization's policy, lists by key and version", async () => {
    const [a, b] = [orgs[2]!, orgs[3]!];
    const key = unique("p");
    await store.createPolicy("", version(a, key));
    const added = await Promise.all(Array.from({ length: 6 }, (_, i) => store.addVersion(version(a, key, `author${i}`))));
    expect(added.map((v) => v.version).sort((x, y) => x - y)).toEqual([2, 3, 4, 5, 6, 7]);
    expect(added.every((v) => v.state === "draft" && v.policy_key === key && v.organization_id === a)).toBe(true);
    await expect(store.addVersion(version(b, key))).rejects.toBeInstanceOf(NotFoundError);
    await expect(store.addVersion(version(a, unique("missing")))).rejects.toBeInstanceOf(NotFoundError);
    expect((await store.versions(a, key)).map((v) => v.version)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    const all = await store.versions(a);
    const order = all.map((v) => [v.policy_key, v.version] as const);
    expect(order).toEqual([...order].sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : x[1] - y[1])));
    expect(all.filter((v) => v.policy_key === key)).toHaveLength(7);
    expect(await store.versions(b, key)).toEqual([]);
  });

  it("changes a version's state as step says under its lock, keeps the approver on null, writes nothing when step refuses", async () => {
    const [a, b] = [orgs[2]!, orgs[3]!];
    const key = unique("p");
    await store.createPolicy("", version(a, key));
    const seen: string[] = [];
    const inReview = await store.changeVersion(a, key, 1, (current) => {
      seen.push(current.state);
      return { state: "in_review", approver: null };
    });
    expect(inReview).toMatchObject({ version: 1, state: "in_review", approver: null });
    const approved = await store.changeVersion(a, key, 1, () => ({ state: "approved", approver: "bob" }));
    expect(approved).toMatchObject({ state: "approved", approver: "bob" });
    const kept = await store.changeVersion(a, key, 1, (current) => {
      seen.push(current.state);
      return { state: "approved", approver: null };
    });
    expect(kept.approver).toBe("bob");
    expect(seen).toEqual(["draft", "approved"]);
    const refused = store.changeVersion(a, key, 1, () => {
      throw new Error("not yours to change");
    });
    await expect(refused).rejects.toThrow("not yours to change");
    expect((await store.versions(a, key))[0]).toMatchObject({ state: "approved", approver: "bob" });
    await expect(store.changeVersion(a, key, 2, () => ({ state: "approved", approver: null }))).rejects.toBeInstanceOf(NotFoundError);
    await expect(store.changeVersion(b, key, 1, () => ({ state: "approved", approver: null }))).rejects.toBeInstanceOf(NotFoundError);
  });
});

describe("PostgresPolicyStore: changes under lock", () => {
  it("hands concurrent changes of one version the version as the previous one left it: one approval wins", async () => {
    const a = orgs[3]!;
    const key = unique("p");
    await store.createPolicy("", version(a, key));
    await store.changeVersion(a, key, 1, () => ({ state: "in_review", approver: null }));
    const seen: string[] = [];
    const results = await Promise.allSettled(
      ["bob", "carol", "dave"].map((approver) =>
        store.changeVersion(a, key, 1, (current) => {
          seen.push(current.state);
          if (current.state !== "in_review") throw new Error(`already ${current.state}`);
          return { state: "approved", approver };
        }),
      ),
    );
    const won = results.filter((r) => r.status === "fulfilled");
    expect(won).toHaveLength(1);
    expect(seen.sort()).toEqual(["approved", "approved", "in_review"]);
    const winner = (won[0] as PromiseFulfilledResult<{ approver: string | null }>).value.approver;
    expect((await store.versions(a, key))[0]).toMatchObject({ state: "approved", approver: winner });
  });

  it("hands concurrent publications of one version the version as the first left it: one publishes", async () => {
    const a = orgs[3]!;
    const key = unique("p");
    await store.createPolicy("", version(a, key));
    await store.changeVersion(a, key, 1, () => ({ state: "approved", approver: "bob" }));
    const before = (await records(a)).length;
    const results = await Promise.allSettled(
      Array.from({ length: 3 }, () =>
        store.publishVersion(a, key, 1, async (target) => {
          if (target.state !== "approved") throw new Error(`already ${target.state}`);
          return publication({ [key]: 1 });
        }),
      ),
    );
    expect(results.map((r) => r.status).sort()).toEqual(["fulfilled", "rejected", "rejected"]);
    for (const r of results) if (r.status === "rejected") expect((r.reason as Error).message).toBe("already active");
    expect((await records(a)).length).toBe(before + 1);
  });

  it("hands concurrent approvals of one pending change the basis the first left: one applies, the other finds nothing pending", async () => {
    const a = orgs[3]!;
    const key = unique("p");
    await store.createPolicy("", version(a, key));
    await store.addVersion(version(a, key));
    await store.publishVersion(a, key, 1, async () => publication({ [key]: 1 }));
    await store.publishVersion(a, key, 2, async () => publication({ [key]: 2 }));
    await store.changePolicy(a, key, async (basis) => ({
      step: "request",
      change: { change_id: unique("pch"), organization_id: a, policy_key: key, kind: "rollback", from_version: 2, to_version: basis.previous!.version, requested_by: "alice", note: "" },
    }));
    const before = (await records(a)).length;
    const results = await Promise.allSettled(
      ["bob", "carol"].map((approver) =>
        store.changePolicy(a, key, async (basis) => {
          if (!basis.pending) throw new Error("nothing pending");
          return { step: "apply", approvedBy: approver, publication: publication({ [key]: 1 }, 0, "policy.rolled_back") };
        }),
      ),
    );
    expect(results.map((r) => r.status).sort()).toEqual(["fulfilled", "rejected"]);
    expect(((results.find((r) => r.status === "rejected") as PromiseRejectedResult).reason as Error).message).toBe("nothing pending");
    expect((await store.versions(a, key)).map((v) => v.state)).toEqual(["active", "superseded"]);
    expect((await records(a)).slice(before).map((r) => r.kind)).toEqual(["policy.rolled_back"]);
  });
});

describe("PostgresPolicyStore: publication", () => {
  it("publishes a version with its bundle, head, version states and one evidence record together", async () => {
    const a = orgs[4]!;
    const key = unique("p");
    await store.createPolicy("", version(a, key));
    await store.addVersion(version(a, key));
    const initialActive = (await store.versions(a)).filter((v) => v.state === "active");
    const before = (await records(a)).length;

    const first = publication({ [key]: 1 });
    const bases: PublicationBasis[] = [];
    const v1 = await store.publishVersion(a, key, 1, async (target, basis) => {
      expect(target).toMatchObject({ policy_key: key, version: 1, state: "draft" });
      bases.push(basis);
      return first;
    });
    expect(v1).toMatchObject({ policy_key: key, version: 1, state: "active", previous_version: null });
    expect(bases[0]!.activeVersions.map((v) => [v.policy_key, v.version])).toEqual(initialActive.map((v) => [v.policy_key, v.version]));
    expect(bases[0]!.activeGraph).toBeNull();
    expect(await store.head(a)).toEqual(first.head);
    expect((await store.bundle(first.bundle.digest))!.toString()).toBe(first.bundle.digest);

    const second = publication({ [key]: 2 });
    const v2 = await store.publishVersion(a, key, 2, async (_target, basis) => {
      bases.push(basis);
      return second;
    });
    expect(v2).toMatchObject({ version: 2, state: "active", previous_version: 1 });
    expect(bases[1]!.activeVersions.find((v) => v.policy_key === key)).toMatchObject({ version: 1, state: "active" });
    const stored = await store.versions(a, key);
    expect(stored.map((v) => [v.version, v.state, v.previous_version])).toEqual([
      [1, "superseded", null],
      [2, "active", 1],
    ]);
    expect(stored[1]!.published_at).toBeInstanceOf(Date);
    expect(await store.head(a)).toEqual(second.head);
    const appended = (await records(a)).slice(before);
    expect(appended.map((r) => [r.kind, r.subject_id, (r.payload as { bundle_digest: string }).bundle_digest])).toEqual([
      ["policy.published", "policy", first.bundle.digest],
      ["policy.published", "policy", second.bundle.digest],
    ]);
  });

  it("writes nothing when publish refuses, and refuses a version the organization does not have with NotFoundError", async () => {
    const [a, b] = [orgs[4]!, orgs[5]!];
    const key = unique("p");
    await store.createPolicy("", version(a, key));
    const before = await snapshot(a);
    const pub = publication({ [key]: 1 });
    await expect(store.publishVersion(a, key, 1, async () => {
      throw new Error("does not compile");
    })).rejects.toThrow("does not compile");
    expect(await snapshot(a)).toEqual(before);
    expect(await store.bundle(pub.bundle.digest)).toBeNull();

    let called = false;
    const publish = async () => {
      called = true;
      return pub;
    };
    await expect(store.publishVersion(a, key, 9, publish)).rejects.toBeInstanceOf(NotFoundError);
    await expect(store.publishVersion(b, key, 1, publish)).rejects.toBeInstanceOf(NotFoundError);
    expect(called).toBe(false);
    expect(await snapshot(a)).toEqual(before);
    expect(await store.bundle(pub.bundle.digest)).toBeNull();
  });

  it("serializes an organization's publications on its head: the second is built from what the first published", async () => {
    const a = orgs[5]!;
    const [k1, k2] = [unique("p"), unique("p")];
    await store.createPolicy("", version(a, k1));
    await store.createPolicy("", version(a, k2));
    const holding = deferred();
    const firstBuilding = deferred();
    const p1 = publication({ [k1]: 1 });
    const p2 = publication({ [k1]: 1, [k2]: 1 });
    const first = store.publishVersion(a, k1, 1, async () => {
      firstBuilding.resolve();
      await holding.promise;
      return p1;
    });
    await firstBuilding.promise;
    let secondBasis: PublicationBasis | undefined;
    const second = store.publishVersion(a, k2, 1, async (_target, basis) => {
      secondBasis = basis;
      return p2;
    });
    // A graph publication waits on the same head.
    const g = await store.addGraphVersion(a, { edges: [] }, "alice");
    let graphBasis: PublicationBasis | undefined;
    const p3 = publication({ [k1]: 1 }, g.version, "graph.published");
    const third = store.publishGraph(a, g.version, async (_target, basis) => {
      graphBasis = basis;
      return p3;
    });
    // A statement on another connection after both started: the head still held, neither has read its basis.
    await db.pool.query("SELECT 1");
    expect([secondBasis, graphBasis]).toEqual([undefined, undefined]);
    holding.resolve();
    await Promise.all([first, second, third]);
    for (const basis of [secondBasis!, graphBasis!]) expect(basis.activeVersions.find((v) => v.policy_key === k1)).toMatchObject({ version: 1, state: "active" });
    const digests = (await records(a)).slice(-3).map((r) => (r.payload as { bundle_digest: string }).bundle_digest);
    expect(digests[0]).toBe(p1.bundle.digest);
    expect([...digests.slice(1)].sort()).toEqual([p2.bundle.digest, p3.bundle.digest].sort());
    // The head is the last publication's.
    expect((await store.head(a))!.bundle_digest).toBe(digests[2]);
  });
});

describe("PostgresPolicyStore: four-eyes rollback and disable", () => {
  const request = (basis: PolicyChangeBasis, organizationId: string, policyKey: string, kind: "rollback" | "disable", by = "alice"): { step: "request"; change: NewPolicyChange } => ({
    step: "request",
    change: {
      change_id: unique("pch"),
      organization_id: organizationId,
      policy_key: policyKey,
      kind,
      from_version: basis.active!.version,
      to_version: kind === "rollback" ? basis.previous!.version : 0,
      requested_by: by,
      note: `${kind} please`,
    },
  });

  /** A policy with versions 1 (superseded) and 2 (active, previous 1). */
  async function twoPublications(organizationId: string): Promise<string> {
    const key = unique("p");
    await store.createPolicy("", version(organizationId, key));
    await store.addVersion(version(organizationId, key));
    await store.publishVersion(organizationId, key, 1, async () => publication({ [key]: 1 }));
    await store.publishVersion(organizationId, key, 2, async () => publication({ [key]: 2 }));
    return key;
  }

  it("hands decide the active and previous versions, stores one pending change per policy and refuses a second with CollisionError", async () => {
    const a = orgs[6]!;
    const key = await twoPublications(a);
    let seen: PolicyChangeBasis | undefined;
    const requested = await store.changePolicy(a, key, async (basis) => {
      seen = basis;
      return request(basis, a, key, "rollback");
    });
    expect(seen!.active).toMatchObject({ version: 2, state: "active", previous_version: 1 });
    expect(seen!.previous).toMatchObject({ version: 1, state: "superseded" });
    expect(seen!.pending).toBeNull();
    expect(requested.step).toBe("request");
    expect(requested.change).toMatchObject({ organization_id: a, policy_key: key, kind: "rollback", state: "pending_approval", from_version: 2, to_version: 1, requested_by: "alice", approved_by: null, applied_at: null, note: "rollback please" });

    const again = store.changePolicy(a, key, async (basis) => {
      seen = basis;
      return request(basis, a, key, "disable", "carol");
    });
    await expect(again).rejects.toBeInstanceOf(CollisionError);
    await expect(again).rejects.toMatchObject({ key: "policy_changes_one_pending" });
    expect(seen!.pending).toMatchObject({ change_id: requested.change.change_id, state: "pending_approval" });
  });

  it("lets concurrent requests of one policy store exactly one; the other sees it pending", async () => {
    const a = orgs[6]!;
    const key = await twoPublications(a);
    const pendingSeen: (string | null)[] = [];
    const results = await Promise.allSettled(
      Array.from({ length: 3 }, () =>
        store.changePolicy(a, key, async (basis) => {
          pendingSeen.push(basis.pending?.change_id ?? null);
          return request(basis, a, key, "disable");
        }),
      ),
    );
    const stored = results.filter((r) => r.status === "fulfilled");
    expect(stored).toHaveLength(1);
    expect(results.filter((r) => r.status === "rejected").every((r) => (r as PromiseRejectedResult).reason instanceof CollisionError)).toBe(true);
    // Serialized: the first saw none pending, the others the one it stored.
    const id = (stored[0] as PromiseFulfilledResult<{ change: { change_id: string } }>).value.change.change_id;
    expect(pendingSeen).toEqual([null, id, id]);
  });

  it("never applies a change approved by its requester; writes nothing when decide refuses", async () => {
    const a = orgs[7]!;
    const key = await twoPublications(a);
    await store.changePolicy(a, key, async (basis) => request(basis, a, key, "rollback", "alice"));
    const before = await snapshot(a);
    const pub = publication({ [key]: 1 }, 0, "policy.rolled_back");
    // Refused by the database (the four-eyes check on policy_changes) after the head and versions moved: all rolled back.
    await expect(store.changePolicy(a, key, async () => ({ step: "apply", approvedBy: "alice", publication: pub }))).rejects.toThrow();
    expect(await snapshot(a)).toEqual(before);
    expect(await store.bundle(pub.bundle.digest)).toBeNull();
    await expect(store.changePolicy(a, key, async () => {
      throw new Error("refused");
    })).rejects.toThrow("refused");
    expect(await snapshot(a)).toEqual(before);
    let called = false;
    await expect(store.changePolicy(a, unique("missing"), async (basis) => {
      called = true;
      return request(basis, a, key, "rollback");
    })).rejects.toBeInstanceOf(NotFoundError);
    await expect(store.changePolicy(orgs[6]!, key, async (basis) => {
      called = true;
      return request(basis, a, key, "rollback");
    })).rejects.toBeInstanceOf(NotFoundError);
    expect(called).toBe(false);
  });

  it("applies a rollback approved by another identity with its head, versions and evidence together", async () => {
    const a = orgs[7]!;
    const key = await twoPublications(a);
    const { change } = await store.changePolicy(a, key, async (basis) => request(basis, a, key, "rollback", "alice"));
    const before = (await records(a)).length;
    const pub = publication({ [key]: 1 }, 0, "policy.rolled_back");
    let pendingSeen: string | undefined;
    const applied = await store.changePolicy(a, key, async (basis) => {
      pendingSeen = basis.pending?.change_id;
      return { step: "apply", approvedBy: "bob", publication: pub };
    });
    expect(pendingSeen).toBe(change.change_id);
    expect(applied.step).toBe("apply");
    expect(applied.change).toMatchObject({ change_id: change.change_id, state: "applied", approved_by: "bob", from_version: 2, to_version: 1 });
    expect(applied.change.applied_at).toBeInstanceOf(Date);
    expect((await store.versions(a, key)).map((v) => [v.version, v.state])).toEqual([
      [1, "active"],
      [2, "superseded"],
    ]);
    expect(await store.head(a)).toEqual(pub.head);
    expect((await store.organizationBundle(a, pub.bundle.digest))!.toString()).toBe(pub.bundle.digest);
    const appended = (await records(a)).slice(before);
    expect(appended.map((r) => r.kind)).toEqual(["policy.rolled_back"]);
    // Applied: nothing pending any more, so a new change may be requested.
    const next = await store.changePolicy(a, key, async (basis) => {
      expect(basis.pending).toBeNull();
      expect(basis.active).toMatchObject({ version: 1 });
      return request(basis, a, key, "disable", "carol");
    });
    expect(next.change).toMatchObject({ kind: "disable", from_version: 1, to_version: 0, state: "pending_approval" });
  });

  it("applies a disable (the active version disabled), and marks a pending change stale", async () => {
    const a = orgs[5]!;
    const key = await twoPublications(a);
    await store.changePolicy(a, key, async (basis) => request(basis, a, key, "disable", "alice"));
    const pub = publication({}, 0, "policy.disabled");
    const applied = await store.changePolicy(a, key, async () => ({ step: "apply", approvedBy: "bob", publication: pub }));
    expect(applied.change).toMatchObject({ kind: "disable", state: "applied", approved_by: "bob" });
    expect((await store.versions(a, key)).map((v) => [v.version, v.state])).toEqual([
      [1, "superseded"],
      [2, "disabled"],
    ]);
    expect(await store.head(a)).toEqual(pub.head);

    const other = await twoPublications(a);
    const { change } = await store.changePolicy(a, other, async (basis) => request(basis, a, other, "rollback", "alice"));
    const head = await store.head(a);
    const stale = await store.changePolicy(a, other, async () => ({ step: "stale" }));
    expect(stale).toMatchObject({ step: "stale", change: { change_id: change.change_id, state: "stale", approved_by: null, applied_at: null } });
    expect(await store.head(a)).toEqual(head);
    expect((await store.versions(a, other)).map((v) => v.state)).toEqual(["superseded", "active"]);
    const again = await store.changePolicy(a, other, async (basis) => {
      expect(basis.pending).toBeNull();
      return request(basis, a, other, "rollback", "carol");
    });
    expect(again.change.state).toBe("pending_approval");
  });
});

describe("PostgresPolicyStore: governance documents", () => {
  const doc = (organizationId: string, name: string) => ({
    document_id: unique("gdoc"),
    organization_id: organizationId,
    name,
    kind: "approval_matrix",
    format: "csv",
    content: "role,limit\ncfo,1000\n",
    row_count: 1,
    author: "alice",
  });

  it("stores documents with names unique among the organization's live ones, lists them oldest first, deletes them", async () => {
    const [a, b] = [orgs[0]!, orgs[1]!];
    const first = doc(a, "matrix.csv");
    const summary = await store.addDocument(first);
    expect(summary).toMatchObject({ document_id: first.document_id, name: "matrix.csv", kind: "approval_matrix", format: "csv", row_count: 1, author: "alice" });
    expect(summary).not.toHaveProperty("content");
    expect(summary.created_at).toBeInstanceOf(Date);
    const taken = store.addDocument(doc(a, "matrix.csv"));
    await expect(taken).rejects.toBeInstanceOf(CollisionError);
    await expect(taken).rejects.toMatchObject({ key: "governance_documents_name" });
    await store.addDocument(doc(b, "matrix.csv"));
    const second = doc(a, "schedule.csv");
    await store.addDocument(second);

    const listed = await store.documents(a);
    expect(listed.map((d) => d.document_id)).toEqual([first.document_id, second.document_id]);
    expect(listed[0]).toMatchObject({ name: "matrix.csv", content: "role,limit\ncfo,1000\n" });
    expect((await store.documents(a, [second.document_id, "gdoc_none"])).map((d) => d.document_id)).toEqual([second.document_id]);
    const ofB = (await store.documents(b))[0]!.document_id;
    expect(await store.documents(a, [ofB])).toEqual([]);

    expect(await store.deleteDocument(b, first.document_id)).toBe(false);
    expect(await store.deleteDocument(a, first.document_id)).toBe(true);
    expect(await store.deleteDocument(a, first.document_id)).toBe(false);
    expect(await store.deleteDocument(a, "gdoc_none")).toBe(false);
    expect((await store.documents(a)).map((d) => d.document_id)).toEqual([second.document_id]);
    expect(await store.documents(a, [first.document_id])).toEqual([]);
    // Its name is free again.
    expect((await store.addDocument(doc(a, "matrix.csv"))).name).toBe("matrix.csv");
  });
});

describe("PostgresPolicyStore: graph versions", () => {
  it("numbers concurrent drafts, lists them newest first without graphs, finds any one of the organization's", async () => {
    const [a, b] = [orgs[1]!, orgs[2]!];
    expect(await store.activeGraph(a)).toBeNull();
    const added = await Promise.all(Array.from({ length: 5 }, (_, i) => store.addGraphVersion(a, { i }, `author${i}`)));
    expect(added.map((g) => g.version).sort()).toEqual([1, 2, 3, 4, 5]);
    expect(added.every((g) => g.state === "draft" && g.approver === null && g.published_at === null && g.organization_id === a)).toBe(true);
    const listed = await store.graphVersions(a);
    expect(listed.map((g) => g.version)).toEqual([5, 4, 3, 2, 1]);
    expect(listed[0]).not.toHaveProperty("graph");
    const third = added.find((g) => g.version === 3)!;
    expect(await store.graphVersion(a, 3)).toEqual(third);
    expect(third.graph).toEqual({ i: added.indexOf(third) });
    expect(await store.graphVersion(a, 6)).toBeNull();
    expect(await store.graphVersion(b, 5)).toBeNull();
    expect(await store.graphVersions(b)).toEqual([]);
  });

  it("changes a graph version's state as step says, writes nothing when it refuses, NotFoundError for another organization's", async () => {
    const [a, b] = [orgs[3]!, orgs[4]!];
    const g = await store.addGraphVersion(a, { edges: [] }, "alice");
    const approved = await store.changeGraphVersion(a, g.version, (current) => {
      expect(current).toMatchObject({ version: g.version, state: "draft", author: "alice" });
      return { state: "approved", approver: "bob" };
    });
    expect(approved).toMatchObject({ state: "approved", approver: "bob" });
    expect((await store.changeGraphVersion(a, g.version, () => ({ state: "approved", approver: null }))).approver).toBe("bob");
    await expect(store.changeGraphVersion(a, g.version, () => {
      throw new Error("refused");
    })).rejects.toThrow("refused");
    expect(await store.graphVersion(a, g.version)).toMatchObject({ state: "approved", approver: "bob" });
    await expect(store.changeGraphVersion(b, g.version, () => ({ state: "approved", approver: "x" }))).rejects.toBeInstanceOf(NotFoundError);
    await expect(store.changeGraphVersion(a, g.version + 1, () => ({ state: "approved", approver: "x" }))).rejects.toBeInstanceOf(NotFoundError);
  });

  it("hands concurrent changes and publications of graph versions the version as the last left it: one approval wins, one graph is active", async () => {
    const a = orgs[6]!;
    const g = await store.addGraphVersion(a, { edges: ["x"] }, "alice");
    const results = await Promise.allSettled(
      ["bob", "carol", "dave"].map((approver) =>
        store.changeGraphVersion(a, g.version, (current) => {
          if (current.state !== "draft") throw new Error(`already ${current.state}`);
          return { state: "approved", approver };
        }),
      ),
    );
    expect(results.map((r) => r.status).sort()).toEqual(["fulfilled", "rejected", "rejected"]);
    const other = await store.addGraphVersion(a, { edges: ["y"] }, "alice");
    const before = (await records(a)).length;
    const published = await Promise.all([g, other].map((v) => store.publishGraph(a, v.version, async () => publication({}, v.version, "graph.published"))));
    expect(published.map((v) => v.state)).toEqual(["active", "active"]);
    const states = (await store.graphVersions(a)).filter((v) => v.version === g.version || v.version === other.version).map((v) => v.state);
    expect(states.sort()).toEqual(["active", "superseded"]);
    expect((await records(a)).slice(before).map((r) => r.kind)).toEqual(["graph.published", "graph.published"]);
    expect((await store.activeGraph(a))!.version).toBe((await store.head(a))!.graph_version);
  });

  it("publishes a graph with bundle, head and evidence, superseding the active graph; writes nothing when publish refuses", async () => {
    const [a, b] = [orgs[0]!, orgs[5]!];
    const g1 = await store.addGraphVersion(a, { edges: [1] }, "alice");
    const g2 = await store.addGraphVersion(a, { edges: [2] }, "alice");
    const before = (await records(a)).length;
    const p1 = publication({}, g1.version, "graph.published");
    const active1 = await store.publishGraph(a, g1.version, async (target, basis) => {
      expect(target).toMatchObject({ version: g1.version, state: "draft" });
      expect(basis.activeGraph).toBeNull();
      return p1;
    });
    expect(active1).toMatchObject({ version: g1.version, state: "active", graph: { edges: [1] } });
    expect(active1.published_at).toBeInstanceOf(Date);
    expect(await store.activeGraph(a)).toEqual(active1);
    expect(await store.head(a)).toEqual(p1.head);

    const unchanged = await snapshot(a);
    await expect(store.publishGraph(a, g2.version, async () => {
      throw new Error("does not compile");
    })).rejects.toThrow("does not compile");
    expect(await snapshot(a)).toEqual(unchanged);
    let called = false;
    await expect(store.publishGraph(b, g2.version, async () => {
      called = true;
      return p1;
    })).rejects.toBeInstanceOf(NotFoundError);
    expect(called).toBe(false);

    const p2 = publication({}, g2.version, "graph.published");
    await store.publishGraph(a, g2.version, async (_target, basis) => {
      expect(basis.activeGraph).toMatchObject({ version: g1.version });
      return p2;
    });
    expect((await store.graphVersions(a)).map((g) => [g.version, g.state])).toEqual([
      [g2.version, "active"],
      [g1.version, "superseded"],
    ]);
    expect(await store.head(a)).toEqual(p2.head);
    expect((await records(a)).slice(before).map((r) => [r.kind, (r.payload as { bundle_digest: string }).bundle_digest])).toEqual([
      ["graph.published", p1.bundle.digest],
      ["graph.published", p2.bundle.digest],
    ]);
  });
});
