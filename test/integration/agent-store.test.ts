import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newId } from "../../src/domain/ids.js";
import type { AgentRow, AgentState, AgentStore, AgentTransition, NewAgent } from "../../src/storage/agents.js";
import { CollisionError, NotFoundError, UnstorableValueError } from "../../src/storage/errors.js";
import type { EvidenceEntry, EvidenceStore } from "../../src/storage/evidence.js";
import type { OrganizationStore } from "../../src/storage/organizations.js";
import type { PolicyStore } from "../../src/storage/policies.js";
import type { IntegrationStore } from "../../src/storage/integrations.js";
import { PostgresAgentStore } from "../../src/storage/postgres/agents.js";
import { PostgresIntegrationStore } from "../../src/storage/postgres/integrations.js";
import { type Database } from "../../src/storage/postgres/database.js";
import { PostgresOrganizationStore } from "../../src/storage/postgres/organizations.js";
import { PostgresPolicyStore } from "../../src/storage/postgres/policies.js";
import { PostgresPrincipalStore } from "../../src/storage/postgres/principals.js";
import type { PrincipalRow, PrincipalStore } from "../../src/storage/principals.js";
import { newOrganizations, storeDatabase } from "../support/stores.js";

/*
 * The AgentStore contract (src/storage/agents.ts) on real Postgres, through the interface alone:
 * get and list only within the organization, in (created_at, agent_id) order; certificates found
 * by key and by id in any state, with the agent's, the organization's and the policy head's state
 * at read time; register, transition, rotateKey and relabel writing the change and its evidence
 * together or neither (a refusing `step`, a taken key, a missing principal or agent, evidence that
 * cannot be stored); changes of one agent serialized on its lock, each step seeing the last one's
 * result; heartbeats recorded only for an active agent and a later sent time, once under
 * concurrent replays. Organizations come from a service that migrates this database and leaves.
 */

let db: Database;
let agents: AgentStore;
let principals: PrincipalStore;
let organizations: OrganizationStore;
let evidence: EvidenceStore;
let policies: PolicyStore;
let integrations: IntegrationStore;
const orgs: string[] = [];

beforeAll(async () => {
  const made = await storeDatabase("agent_store", (svc) => newOrganizations(svc, 3));
  ({ db, evidence } = made);
  const chain = made.chain;
  orgs.push(...made.fixtures);
  agents = new PostgresAgentStore(db, chain);
  principals = new PostgresPrincipalStore(db);
  organizations = new PostgresOrganizationStore(db, chain);
  policies = new PostgresPolicyStore(db, chain);
  integrations = new PostgresIntegrationStore(db, chain);
});

afterAll(async () => {
  await db?.close();
});

const newKey = () => `ed25519:base64:${randomBytes(32).toString("base64")}`;

async function principal(organizationId: string): Promise<PrincipalRow> {
  return principals.create({ principal_id: newId("prn"), organization_id: organizationId, display_name: "Acting for", kind: "role", external_ref: newId("ref") });
}

function draft(organizationId: string, principalId: string, fields: Partial<NewAgent> = {}): NewAgent {
  return {
    agent_id: newId("agt"),
    organization_id: organizationId,
    name: "an agent",
    acting_for_principal_id: principalId,
    public_key: newKey(),
    owner: "",
    business_unit: "",
    environment: "",
    certificate_id: newId("crt"),
    ...fields,
  };
}

/** The fields AgentRow declares (the Postgres row carries more: see the report on last_heartbeat_sent_at). */
const AGENT_FIELDS = ["agent_id", "organization_id", "name", "acting_for_principal_id", "public_key", "owner", "business_unit", "environment", "state", "created_at", "updated_at", "last_heartbeat_at", "certificate_id"] as const;
const declared = (row: AgentRow) => Object.fromEntries(AGENT_FIELDS.map((f) => [f, row[f]]));

const entry = (organizationId: string, kind: string, subjectId: string): EvidenceEntry => ({ organizationId, kind, subjectId, payload: { kind } });

/** A registered agent of the organization, acting for a fresh principal. */
async function registered(organizationId: string, fields: Partial<NewAgent> = {}): Promise<AgentRow> {
  const p = await principal(organizationId);
  const a = draft(organizationId, p.principal_id, fields);
  return agents.register(a, entry(organizationId, "agent.registered", a.agent_id));
}

/** A transition `step` that moves to `state` from `from` only, as the domain's state machine does. */
const move =
  (from: AgentState, state: AgentState, revokeCertificates = false) =>
  (current: AgentRow): AgentTransition => {
    if (current.state !== from) throw new Error(`not ${from}: ${current.state}`);
    return { state, revokeCertificates, evidence: entry(current.organization_id, `agent.${state}`, current.agent_id) };
  };

/** The kinds of the evidence records about `subjectId`, oldest first. */
async function kinds(organizationId: string, subjectId: string): Promise<string[]> {
  return (await evidence.bySubject(organizationId, subjectId)).map((r) => r.kind);
}

/** Evidence no store can keep (U+0000 in its subject): the append fails after the change was written. */
const unstorable = (organizationId: string): EvidenceEntry => ({ organizationId, kind: "agent.test", subjectId: "bad\u0000subject", payload: {} });

describe("AgentStore (Postgres)", () => {
  it("registers an agent in state registered with its first active certificate and evidence; get and list serve it only to its organization, in (created_at, agent_id) order", async () => {
    const [org, other] = [orgs[0]!, orgs[1]!];
    const p = await principal(org);
    const made: AgentRow[] = [];
    for (let i = 0; i < 5; i++) {
      const a = draft(org, p.principal_id, { name: `agent ${i}`, owner: `owner ${i}`, business_unit: "bu", environment: "prod" });
      const row = await agents.register(a, entry(org, "agent.registered", a.agent_id));
      expect(declared(row)).toEqual({ ...a, state: "registered", last_heartbeat_at: null, created_at: expect.any(Date), updated_at: expect.any(Date) });
      made.push(row);
    }
    const first = made[0]!;
    expect(await agents.get(org, first.agent_id)).toEqual(first);
    expect(await agents.get(other, first.agent_id)).toBeNull();
    expect(await agents.get(org, newId("agt"))).toBeNull();
    expect(await kinds(org, first.agent_id)).toEqual(["agent.registered"]);

    const order = [...made].sort((a, b) => a.created_at.getTime() - b.created_at.getTime() || (a.agent_id < b.agent_id ? -1 : 1)).map((a) => a.agent_id);
    const all = await agents.list(org, null, 100);
    expect(all.map((a) => a.agent_id)).toEqual(order);
    expect(all[0]).toEqual(made.find((a) => a.agent_id === order[0]));
    const page = await agents.list(org, null, 2);
    expect(page.map((a) => a.agent_id)).toEqual(order.slice(0, 2));
    const last = page[1]!;
    expect((await agents.list(org, { createdAt: last.created_at, id: last.agent_id }, 100)).map((a) => a.agent_id)).toEqual(order.slice(2));
    expect((await agents.list(other, null, 100)).map((a) => a.agent_id)).not.toContain(first.agent_id);
  });

  it("finds a certificate by key and by id, of any organization, with its agent's, organization's and policy head's state as they stand at read time", async () => {
    const org = orgs[2]!;
    const p = await principal(org);
    const a = draft(org, p.principal_id);
    await agents.register(a, entry(org, "agent.registered", a.agent_id));
    expect(await agents.certificateByKey(a.public_key)).toEqual({ certificate_id: a.certificate_id, agent_id: a.agent_id, organization_id: org, state: "active" });
    expect(await agents.certificateByKey(newKey())).toBeNull();
    const head = (await policies.head(org))!;
    expect(head).not.toBeNull();
    expect(await agents.certificate(a.certificate_id)).toEqual({
      certificate_id: a.certificate_id,
      agent_id: a.agent_id,
      organization_id: org,
      public_key: a.public_key,
      state: "active",
      agent_state: "registered",
      organization_state: "active",
      acting_for_principal_id: p.principal_id,
      principal_external_ref: p.external_ref,
      principal_kind: "role",
      bundle_digest: head.bundle_digest,
      policy_versions: head.policy_versions,
      graph_version: head.graph_version,
    });
    expect(await agents.certificate(newId("crt"))).toBeNull();

    await agents.transition(org, a.agent_id, move("registered", "active"));
    const suspend = (state: "active" | "suspended") => () => ({ state, evidence: { kind: `organization.${state}`, payload: {} } });
    await organizations.changeState(org, suspend("suspended"));
    try {
      expect(await agents.certificate(a.certificate_id)).toMatchObject({ state: "active", agent_state: "active", organization_state: "suspended" });
    } finally {
      await organizations.changeState(org, suspend("active"));
    }
    expect(await agents.certificate(a.certificate_id)).toMatchObject({ organization_state: "active" });
  });

  it("refuses a principal the organization lacks (NotFoundError), a key some certificate holds (CollisionError certificates_public_key_key), an agent id taken, and evidence it cannot store, writing nothing", async () => {
    const [org, other] = [orgs[0]!, orgs[1]!];
    const foreign = await principal(other);
    const lost = draft(org, foreign.principal_id);
    await expect(agents.register(lost, entry(org, "agent.registered", lost.agent_id))).rejects.toBeInstanceOf(NotFoundError);
    expect(await agents.get(org, lost.agent_id)).toBeNull();
    expect(await agents.certificateByKey(lost.public_key)).toBeNull();

    const held = await registered(other);
    const p = await principal(org);
    const twin = draft(org, p.principal_id, { public_key: held.public_key });
    const collision = await agents.register(twin, entry(org, "agent.registered", twin.agent_id)).catch((e: unknown) => e);
    expect(collision).toBeInstanceOf(CollisionError);
    expect((collision as CollisionError).key).toBe("certificates_public_key_key");
    expect(await agents.get(org, twin.agent_id)).toBeNull();
    expect(await kinds(org, twin.agent_id)).toEqual([]);
    expect(await agents.certificateByKey(held.public_key)).toMatchObject({ agent_id: held.agent_id, organization_id: other });

    const sameId = draft(other, foreign.principal_id, { agent_id: held.agent_id });
    const idCollision = await agents.register(sameId, entry(other, "agent.registered", held.agent_id)).catch((e: unknown) => e);
    expect(idCollision).toBeInstanceOf(CollisionError);
    expect((idCollision as CollisionError).key).not.toBe("certificates_public_key_key");
    expect(await agents.certificateByKey(sameId.public_key)).toBeNull();
    expect(await kinds(other, held.agent_id)).toEqual(["agent.registered"]);

    const unrecorded = draft(org, p.principal_id);
    await expect(agents.register(unrecorded, unstorable(org))).rejects.toBeInstanceOf(UnstorableValueError);
    expect(await agents.get(org, unrecorded.agent_id)).toBeNull();
    expect(await agents.certificateByKey(unrecorded.public_key)).toBeNull();
  });

  it("holds a key for one identity: a certificate cannot take an adapter's key (public_key_held_by_adapter), nor an adapter a certificate's (public_key_held_by_certificate), even racing", async () => {
    const org = orgs[2]!;
    const integrationId = newId("int");
    await integrations.create({ integration_id: integrationId, organization_id: org, name: "keys", actions: [`keys_${integrationId}`] });
    const adapterOf = (publicKey: string) => {
      const adapterId = newId("adp");
      const adapter = { adapter_id: adapterId, integration_id: integrationId, organization_id: org, name: "an adapter", public_key: publicKey, role: "adapter" as const };
      return integrations.registerAdapter(adapter, entry(org, "adapter.registered", adapterId));
    };
    const refusedWith = async (work: Promise<unknown>) => ((await work.then(() => null, (e: unknown) => e)) as CollisionError | null)?.key;

    const adapterKey = newKey();
    await adapterOf(adapterKey);
    const p = await principal(org);
    const twin = draft(org, p.principal_id, { public_key: adapterKey });
    expect(await refusedWith(agents.register(twin, entry(org, "agent.registered", twin.agent_id)))).toBe("public_key_held_by_adapter");
    expect(await agents.get(org, twin.agent_id)).toBeNull();
    const agent = await registered(org);
    const rotation = () => ({ certificateId: newId("crt"), publicKey: adapterKey, evidence: entry(org, "agent.key_rotated", agent.agent_id) });
    expect(await refusedWith(agents.rotateKey(org, agent.agent_id, rotation))).toBe("public_key_held_by_adapter");
    expect((await agents.get(org, agent.agent_id))!.public_key).toBe(agent.public_key);
    expect(await refusedWith(adapterOf(agent.public_key))).toBe("public_key_held_by_certificate");

    // Racing for one fresh key, an agent and an adapter: exactly one holds it.
    for (let round = 0; round < 5; round++) {
      const contested = newKey();
      const racer = draft(org, p.principal_id, { public_key: contested });
      const [asAgent, asAdapter] = await Promise.allSettled([agents.register(racer, entry(org, "agent.registered", racer.agent_id)), adapterOf(contested)]);
      expect([asAgent.status, asAdapter.status].sort(), `round ${round}`).toEqual(["fulfilled", "rejected"]);
      const refusal = (asAgent.status === "rejected" ? asAgent.reason : (asAdapter as PromiseRejectedResult).reason) as CollisionError;
      expect(refusal.key).toBe(asAgent.status === "rejected" ? "public_key_held_by_adapter" : "public_key_held_by_certificate");
    }
  });

  it("transitions under lock: stores the state step returns and its evidence, revokes certificates only when told; a step that throws, a missing agent or unstorable evidence writes nothing", async () => {
    const [org, other] = [orgs[0]!, orgs[1]!];
    const a = await registered(org);
    const seen: AgentRow[] = [];
    const active = await agents.transition(org, a.agent_id, (current) => {
      seen.push(current);
      return move("registered", "active")(current);
    });
    expect(seen).toEqual([a]);
    expect(active).toMatchObject({ agent_id: a.agent_id, state: "active", certificate_id: a.certificate_id });
    expect(active.updated_at.getTime()).toBeGreaterThanOrEqual(a.updated_at.getTime());
    expect(await agents.state(a.agent_id)).toBe("active");

    const refusal = new Error("refused by the domain");
    await expect(
      agents.transition(org, a.agent_id, () => {
        throw refusal;
      }),
    ).rejects.toBe(refusal);
    await expect(agents.transition(org, a.agent_id, (current) => ({ ...move("active", "suspended")(current), evidence: unstorable(org) }))).rejects.toBeInstanceOf(UnstorableValueError);
    expect(await agents.state(a.agent_id)).toBe("active");
    expect(await kinds(org, a.agent_id)).toEqual(["agent.registered", "agent.active"]);

    let called = false;
    const missing = agents.transition(other, a.agent_id, (current) => {
      called = true;
      return move("active", "suspended")(current);
    });
    await expect(missing).rejects.toBeInstanceOf(NotFoundError);
    await expect(agents.transition(org, newId("agt"), move("active", "suspended"))).rejects.toBeInstanceOf(NotFoundError);
    expect(called).toBe(false);

    const suspended = await agents.transition(org, a.agent_id, move("active", "suspended"));
    expect(suspended.state).toBe("suspended");
    expect(await agents.certificate(a.certificate_id)).toMatchObject({ state: "active", agent_state: "suspended" });

    const revoked = await agents.transition(org, a.agent_id, move("suspended", "revoked", true));
    // Once revoked, the row carries its last certificate.
    expect(revoked).toMatchObject({ state: "revoked", certificate_id: a.certificate_id });
    expect(await agents.certificate(a.certificate_id)).toMatchObject({ state: "revoked", agent_state: "revoked" });
    expect(await agents.certificateByKey(a.public_key)).toMatchObject({ certificate_id: a.certificate_id, state: "revoked" });
    expect(await kinds(org, a.agent_id)).toEqual(["agent.registered", "agent.active", "agent.suspended", "agent.revoked"]);
  });

  it("serializes concurrent changes of one agent on its lock: each step sees the last one's result, so one of racing activations wins and no relabel is lost", async () => {
    const org = orgs[1]!;
    const a = await registered(org);
    const refusals: unknown[] = [];
    const results = await Promise.allSettled(Array.from({ length: 5 }, () => agents.transition(org, a.agent_id, move("registered", "active"))));
    for (const r of results) if (r.status === "rejected") refusals.push(r.reason);
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    expect(refusals.map((e) => (e as Error).message)).toEqual(Array(4).fill("not registered: active"));
    expect(await kinds(org, a.agent_id)).toEqual(["agent.registered", "agent.active"]);

    await Promise.all(
      Array.from({ length: 6 }, () =>
        agents.relabel(org, a.agent_id, (current) => ({
          labels: { owner: `${current.owner}x`, business_unit: current.business_unit, environment: current.environment },
          evidence: entry(org, "agent.labels_changed", a.agent_id),
        })),
      ),
    );
    expect((await agents.get(org, a.agent_id))!.owner).toBe("xxxxxx");
    expect((await kinds(org, a.agent_id)).filter((k) => k === "agent.labels_changed")).toHaveLength(6);
  });

  it("rotates a key: the new certificate is the agent's, the old one is replaced at once; a key any certificate held (even the agent's own old one) is a CollisionError that writes nothing", async () => {
    const [org, other] = [orgs[2]!, orgs[0]!];
    const a = await registered(org);
    const b = await registered(other);
    const rotation = (certificateId: string, publicKey: string) => (current: AgentRow) => ({ certificateId, publicKey, evidence: entry(current.organization_id, "agent.key_rotated", current.agent_id) });
    const fresh = { id: newId("crt"), key: newKey() };
    const seen: AgentRow[] = [];
    const rotated = await agents.rotateKey(org, a.agent_id, (current) => {
      seen.push(current);
      return rotation(fresh.id, fresh.key)(current);
    });
    expect(seen.map((s) => s.certificate_id)).toEqual([a.certificate_id]);
    expect(rotated).toMatchObject({ agent_id: a.agent_id, state: "registered", certificate_id: fresh.id, public_key: fresh.key });
    expect(await agents.get(org, a.agent_id)).toEqual(rotated);
    expect(await agents.certificate(a.certificate_id)).toMatchObject({ state: "replaced", public_key: a.public_key });
    expect(await agents.certificate(fresh.id)).toMatchObject({ state: "active", agent_id: a.agent_id, public_key: fresh.key });
    expect(await agents.certificateByKey(a.public_key)).toEqual({ certificate_id: a.certificate_id, agent_id: a.agent_id, organization_id: org, state: "replaced" });
    expect(await kinds(org, a.agent_id)).toEqual(["agent.registered", "agent.key_rotated"]);

    for (const taken of [b.public_key, a.public_key]) {
      const err = await agents.rotateKey(org, a.agent_id, rotation(newId("crt"), taken)).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(CollisionError);
      expect((err as CollisionError).key).toBe("certificates_public_key_key");
    }
    const refusal = new Error("rotation refused");
    await expect(
      agents.rotateKey(org, a.agent_id, () => {
        throw refusal;
      }),
    ).rejects.toBe(refusal);
    expect(await agents.get(org, a.agent_id)).toEqual(rotated);
    expect(await agents.certificate(fresh.id)).toMatchObject({ state: "active" });
    expect(await kinds(org, a.agent_id)).toEqual(["agent.registered", "agent.key_rotated"]);
    await expect(agents.rotateKey(other, a.agent_id, rotation(newId("crt"), newKey()))).rejects.toBeInstanceOf(NotFoundError);
  });

  it("relabels with the labels step returns and their evidence; a null step changes nothing and returns the agent as it stands; a missing agent is a NotFoundError", async () => {
    const [org, other] = [orgs[2]!, orgs[1]!];
    const a = await registered(org, { owner: "team-a", business_unit: "payments", environment: "staging" });
    const unchanged = await agents.relabel(org, a.agent_id, () => null);
    expect(unchanged).toEqual(a);
    expect(await agents.get(org, a.agent_id)).toEqual(a);
    expect(await kinds(org, a.agent_id)).toEqual(["agent.registered"]);

    const labels = { owner: "team-b", business_unit: "risk", environment: "prod" };
    const changed = await agents.relabel(org, a.agent_id, (current) => {
      expect(current).toEqual(a);
      return { labels, evidence: entry(org, "agent.labels_changed", a.agent_id) };
    });
    expect(changed).toEqual({ ...a, ...labels, updated_at: expect.any(Date) });
    expect(await agents.get(org, a.agent_id)).toEqual(changed);
    expect(await kinds(org, a.agent_id)).toEqual(["agent.registered", "agent.labels_changed"]);

    await expect(agents.relabel(org, a.agent_id, () => ({ labels: { ...labels, owner: "team-c" }, evidence: unstorable(org) }))).rejects.toBeInstanceOf(UnstorableValueError);
    expect((await agents.get(org, a.agent_id))!.owner).toBe("team-b");
    await expect(agents.relabel(other, a.agent_id, () => null)).rejects.toBeInstanceOf(NotFoundError);
  });

  it("records a heartbeat only for an active agent and a sent time later than the last accepted one, once among concurrent replays; state says why not", async () => {
    const org = orgs[0]!;
    const a = await registered(org);
    const t0 = Date.now();
    expect(await agents.heartbeat(a.agent_id, new Date(t0))).toBeNull();
    expect(await agents.state(a.agent_id)).toBe("registered");
    await agents.transition(org, a.agent_id, move("registered", "active"));

    const accepted = await Promise.all(Array.from({ length: 5 }, () => agents.heartbeat(a.agent_id, new Date(t0 + 1000))));
    const received = accepted.filter((r): r is Date => r !== null);
    expect(received).toHaveLength(1);
    expect(received[0]).toBeInstanceOf(Date);
    expect((await agents.get(org, a.agent_id))!.last_heartbeat_at).toEqual(received[0]);
    expect(await agents.heartbeat(a.agent_id, new Date(t0 + 1000))).toBeNull();
    expect(await agents.heartbeat(a.agent_id, new Date(t0 + 500))).toBeNull();
    expect(await agents.heartbeat(a.agent_id, new Date(t0 + 1001))).toBeInstanceOf(Date);

    await agents.transition(org, a.agent_id, move("active", "suspended"));
    expect(await agents.heartbeat(a.agent_id, new Date(t0 + 2000))).toBeNull();
    expect(await agents.state(a.agent_id)).toBe("suspended");
    expect(await agents.heartbeat(newId("agt"), new Date(t0 + 2000))).toBeNull();
    expect(await agents.state(newId("agt"))).toBeNull();
  });
});
