import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AgentService } from "../../src/gen/mandate/v1/agents_pb.js";
import { WIRE_TIMESTAMP } from "../support/api.js";
import {
  call,
  decisionCount,
  expectResult,
  heartbeat,
  intentDoc,
  newAgent,
  newAgentKey,
  newApiKey,
  newOrgFixture,
  signBody,
  submitIntent,
  TRANSPORTS,
  type Auth,
  type OrgFixture,
  type TestAgent,
  type Transport,
} from "../support/agents.js";
import { startService, type TestService } from "../support/service.js";

/*
 * Issue 3: agent identity and lifecycle through both transports. The spec's
 * transition table row by row (every operation from every state) with the audit
 * record each transition leaves, registration idempotency, ownership labels,
 * key rotation, revocation, heartbeats, and concurrent transitions serializing
 * in the database. The plain request/answer contract (validation of public keys,
 * principals and names, permissions, heartbeat refusals, unknown ids) is in
 * test/cases/agents.yaml; evidence export and tamper detection in evidence.test.ts.
 */

let svc: TestService;
let org: OrgFixture;
let other: OrgFixture;

beforeAll(async () => {
  svc = await startService();
  [org, other] = await Promise.all([newOrgFixture(svc), newOrgFixture(svc)]);
});
afterAll(() => svc?.close());

const M = AgentService.method;
const bearer = (o: OrgFixture): Auth => ({ bearer: o.apiKey });

type State = "registered" | "active" | "suspended" | "revoked" | "retired";
type Op = "activate" | "suspend" | "reactivate" | "revoke" | "retire";
const STATES: State[] = ["registered", "active", "suspended", "revoked", "retired"];
const OPS: Op[] = ["activate", "suspend", "reactivate", "revoke", "retire"];
const METHOD = { activate: M.activateAgent, suspend: M.suspendAgent, reactivate: M.reactivateAgent, revoke: M.revokeAgent, retire: M.retireAgent };

/** The spec's "Agent transitions" table, written out independently of src/domain. */
const ALLOWED: Record<Op, Partial<Record<State, State>>> = {
  activate: { registered: "active" },
  suspend: { active: "suspended" },
  reactivate: { suspended: "active" },
  revoke: { registered: "revoked", active: "revoked", suspended: "revoked" },
  retire: { registered: "retired", active: "retired", suspended: "retired" },
};

/** Every member of the Agent wire body. */
const AGENT_KEYS = [
  "agent_id", "certificate_id", "name", "acting_for_principal_id", "public_key", "owner", "business_unit", "environment", "state", "created_at", "updated_at",
];

async function getAgent(agentId: string, o = org) {
  const res = await svc.v1("GET", `/v1/agents/${agentId}`, { bearer: o.apiKey });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}

async function auditRecords(agentId: string, o = org): Promise<any[]> {
  const res = await svc.v1("GET", `/v1/agents/${agentId}/audit-records`, { bearer: o.apiKey });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.records;
}

function expectAgentBody(body: any) {
  for (const k of AGENT_KEYS) expect(body, `missing ${k}`).toHaveProperty(k);
  expect(body.created_at).toMatch(WIRE_TIMESTAMP);
  expect(body.updated_at).toMatch(WIRE_TIMESTAMP);
}

describe.each(TRANSPORTS)("transition table over %s", (transport: Transport) => {
  for (const from of STATES) {
    for (const op of OPS) {
      const to = ALLOWED[op][from];
      it(`${op} from ${from} → ${to ?? "409 invalid_transition"}`, async () => {
        const agent = await newAgent(svc, org, from);
        const before = await getAgent(agent.agentId);
        const recordsBefore = await auditRecords(agent.agentId);
        expect(before.state).toBe(from);

        const res = await call(svc, transport, METHOD[op], { agent_id: agent.agentId, reason: `table ${op}` }, bearer(org));
        const after = await getAgent(agent.agentId);
        const records = await auditRecords(agent.agentId);

        if (to) {
          expectResult(res, 200);
          expectAgentBody(res.body);
          expect(res.body.state).toBe(to);
          expect(res.body.agent_id).toBe(agent.agentId);
          expect(after.state).toBe(to);
          // Exactly one new record, the transition's, signed and linked like the rest.
          expect(records).toHaveLength(recordsBefore.length + 1);
          const rec = records[records.length - 1];
          expect(rec.kind).toMatch(/^agent\./);
          expect(rec.subject_id).toBe(agent.agentId);
          expect(rec.payload).toMatchObject({ agent_id: agent.agentId, operation: op, from, to, reason: `table ${op}` });
          expect(rec.seq).toBeGreaterThan(recordsBefore[recordsBefore.length - 1].seq);
        } else {
          expectResult(res, 409, "invalid_transition");
          // Nothing changes: state, timestamps, records.
          expect(after).toEqual(before);
          expect(records).toEqual(recordsBefore);
        }
      });
    }
  }

  it("an unknown agent, another organization's agent → 404; a key without AGENT_ADMIN → 403; no credentials → 401", async () => {
    const mine = await newAgent(svc, org, "registered");
    expectResult(await call(svc, transport, M.activateAgent, { agent_id: "agt_doesnotexist" }, bearer(org)), 404, "not_found");
    expectResult(await call(svc, transport, M.activateAgent, { agent_id: mine.agentId }, bearer(other)), 404, "not_found");
    const reader = await newApiKey(svc, org.apiKey, ["DECISION_READ", "EVIDENCE_READ"]);
    expectResult(await call(svc, transport, M.activateAgent, { agent_id: mine.agentId }, { bearer: reader.apiKey }), 403, "permission_denied");
    expectResult(await call(svc, transport, M.activateAgent, { agent_id: mine.agentId }), 401, "missing_credentials");
    expect((await getAgent(mine.agentId)).state).toBe("registered");
    expect(await auditRecords(mine.agentId)).toHaveLength(1);
  });

  it("the operator key naming the organization registers and activates", async () => {
    const key = newAgentKey();
    const auth: Auth = { operator: svc.operatorKey!, organizationId: org.organizationId };
    const reg = await call(svc, transport, M.registerAgent, { name: "ops-bot", acting_for_principal_id: org.principalId, public_key: key.publicKey }, auth);
    expectResult(reg, 200);
    expect(reg.body.state).toBe("registered");
    const act = await call(svc, transport, M.activateAgent, { agent_id: reg.body.agent_id }, auth);
    expectResult(act, 200);
    expect(act.body.state).toBe("active");
    const records = await auditRecords(reg.body.agent_id);
    expect(records.map((r) => r.payload.by)).toEqual(["operator", "operator"]);
  });
});

describe.each(TRANSPORTS)("registration over %s", (transport: Transport) => {
  const register = (o: OrgFixture, fields: Record<string, unknown>) =>
    call(svc, transport, M.registerAgent, { name: "payables-bot", acting_for_principal_id: o.principalId, ...fields }, bearer(o));

  it("is idempotent per key: same key and fields, same org → same identity and no new record; other fields or org → 409 already_exists", async () => {
    const key = newAgentKey();
    const first = await register(org, { public_key: key.publicKey });
    expectResult(first, 200);
    const again = await register(org, { public_key: key.publicKey });
    expectResult(again, 200);
    expect(again.body.agent_id).toBe(first.body.agent_id);
    expect(again.body.certificate_id).toBe(first.body.certificate_id);
    // Idempotent also once the agent moved on: the same identity, in its current state.
    expectResult(await call(svc, transport, M.activateAgent, { agent_id: first.body.agent_id }, bearer(org)), 200);
    const third = await register(org, { public_key: key.publicKey });
    expect(third.body.agent_id).toBe(first.body.agent_id);
    expect(third.body.state).toBe("active");
    // The same key under another name, or for another principal, is not this identity's registration.
    expectResult(await register(org, { public_key: key.publicKey, name: "renamed" }), 409, "already_exists");
    const role = await svc.v1("POST", "/v1/principals", { bearer: org.apiKey, body: { display_name: "Treasury", kind: "role" } });
    expectResult(await register(org, { public_key: key.publicKey, acting_for_principal_id: role.body.principal_id }), 409, "already_exists");
    expect(await auditRecords(first.body.agent_id)).toHaveLength(2);

    const elsewhere = await register(other, { public_key: key.publicKey });
    expectResult(elsewhere, 409, "already_exists");
    const list = await svc.v1("GET", "/v1/agents?page_size=500", { bearer: other.apiKey });
    expect(JSON.stringify(list.body)).not.toContain(first.body.agent_id);
  });

  it("concurrent registrations of one key yield one identity", async () => {
    const key = newAgentKey();
    const results = await Promise.all(Array.from({ length: 6 }, () => register(org, { public_key: key.publicKey })));
    for (const r of results) expectResult(r, 200);
    expect(new Set(results.map((r) => r.body.agent_id)).size).toBe(1);
    expect(await auditRecords(results[0]!.body.agent_id)).toHaveLength(1);
  });
});

describe.each(TRANSPORTS)("ownership labels over %s", (transport: Transport) => {
  it("PATCH changes labels only; an owner change is recorded as a transfer; the principal never changes", async () => {
    const agent = await newAgent(svc, org);
    const patch = (fields: Record<string, unknown>) => call(svc, transport, M.updateAgent, { agent_id: agent.agentId, ...fields }, bearer(org));

    const moved = await patch({ owner: "bob@example.com", business_unit: "treasury" });
    expectResult(moved, 200);
    expectAgentBody(moved.body);
    expect(moved.body).toMatchObject({ owner: "bob@example.com", business_unit: "treasury", environment: "", acting_for_principal_id: org.principalId, state: "active" });

    const env = await patch({ environment: "staging" });
    expectResult(env, 200);
    expect(env.body).toMatchObject({ owner: "bob@example.com", business_unit: "treasury", environment: "staging" });

    const records = await auditRecords(agent.agentId);
    const [transfer, labels] = records.slice(-2);
    expect(transfer.kind).toBe("agent.ownership_transferred");
    expect(transfer.payload).toMatchObject({
      before: { owner: "", business_unit: "" },
      after: { owner: "bob@example.com", business_unit: "treasury" },
      acting_for_principal_id: org.principalId,
    });
    expect(labels.kind).not.toBe("agent.ownership_transferred");
    expect(labels.payload).toMatchObject({ before: { environment: "" }, after: { environment: "staging" } });

    // An attempt to change the acting principal is refused whole: labels in the same request do not apply.
    const count = records.length;
    for (const principal of [other.principalId, org.principalId]) {
      const refused = await patch({ acting_for_principal_id: principal, owner: "mallory@example.com" });
      expectResult(refused, 422, "validation_failed");
      expect(refused.body.errors).toEqual(expect.arrayContaining([expect.objectContaining({ field: "acting_for_principal_id" })]));
    }
    const after = await getAgent(agent.agentId);
    expect(after).toMatchObject({ owner: "bob@example.com", acting_for_principal_id: org.principalId });
    expect(await auditRecords(agent.agentId)).toHaveLength(count);

    // Another organization cannot see or relabel it.
    expectResult(await call(svc, transport, M.updateAgent, { agent_id: agent.agentId, owner: "eve" }, bearer(other)), 404, "not_found");
  });
});

describe.each(TRANSPORTS)("key rotation and revocation over %s", (transport: Transport) => {
  it("rotation issues a new certificate; the old one is 401 unknown_key at once; the new one signs", async () => {
    const agent = await newAgent(svc, org);
    expectResult(await submitIntent(svc, transport, signBody(agent, intentDoc(agent.agentId))), 200);

    const next = newAgentKey();
    const rotated = await call(svc, transport, M.rotateAgentKey, { agent_id: agent.agentId, public_key: next.publicKey }, bearer(org));
    expectResult(rotated, 200);
    expect(rotated.body.public_key).toBe(next.publicKey);
    expect(rotated.body.certificate_id).not.toBe(agent.certificateId);
    expect(rotated.body.agent_id).toBe(agent.agentId);
    expect(rotated.body.state).toBe("active");

    const decisions = await decisionCount(svc, org.apiKey, agent.agentId);
    // The old certificate, with the old key or the new one: unknown.
    expectResult(await submitIntent(svc, transport, signBody(agent, intentDoc(agent.agentId))), 401, "unknown_key");
    expectResult(await submitIntent(svc, transport, signBody({ certificateId: agent.certificateId, key: next }, intentDoc(agent.agentId))), 401, "unknown_key");
    // The new certificate with the old key: the signature does not verify.
    expectResult(await submitIntent(svc, transport, signBody({ certificateId: rotated.body.certificate_id, key: agent.key }, intentDoc(agent.agentId))), 401, "signature_invalid");
    expect(await decisionCount(svc, org.apiKey, agent.agentId)).toBe(decisions);

    const renewed: TestAgent = { ...agent, certificateId: rotated.body.certificate_id, key: next };
    const ok = await submitIntent(svc, transport, signBody(renewed, intentDoc(agent.agentId)));
    expectResult(ok, 200);
    expect(ok.body.outcome).toBe("ALLOW");
    expectResult(await heartbeat(svc, transport, renewed), 200);

    const rec = (await auditRecords(agent.agentId)).at(-1);
    expect(rec.kind).toBe("agent.key_rotated");
    expect(rec.payload).toMatchObject({ previous_certificate_id: agent.certificateId, certificate_id: rotated.body.certificate_id, public_key: next.publicKey });

    // The rotated-away key cannot come back as a new identity, nor be reused by another agent.
    const reuse = await call(svc, transport, M.registerAgent, { name: "x", acting_for_principal_id: org.principalId, public_key: agent.key.publicKey }, bearer(org));
    expectResult(reuse, 409, "already_exists");
    const other2 = await newAgent(svc, org);
    expectResult(await call(svc, transport, M.rotateAgentKey, { agent_id: other2.agentId, public_key: next.publicKey }, bearer(org)), 409, "already_exists");
    expectResult(await call(svc, transport, M.rotateAgentKey, { agent_id: agent.agentId, public_key: "ed25519:base64:nope" }, bearer(org)), 422, "validation_failed");
  });

  it("revocation stops the agent for good: Intents and heartbeats 403 agent_revoked, no rotation, nothing leaves revoked", async () => {
    const agent = await newAgent(svc, org);
    expectResult(await call(svc, transport, M.revokeAgent, { agent_id: agent.agentId, reason: "key leaked" }, bearer(org)), 200);
    const decisions = await decisionCount(svc, org.apiKey, agent.agentId);
    expectResult(await submitIntent(svc, transport, signBody(agent, intentDoc(agent.agentId))), 403, "agent_revoked");
    expectResult(await heartbeat(svc, transport, agent), 403, "agent_revoked");
    expectResult(await call(svc, transport, M.rotateAgentKey, { agent_id: agent.agentId, public_key: newAgentKey().publicKey }, bearer(org)), 409, "invalid_transition");
    for (const op of OPS) expectResult(await call(svc, transport, METHOD[op], { agent_id: agent.agentId }, bearer(org)), 409, "invalid_transition");
    expect(await decisionCount(svc, org.apiKey, agent.agentId)).toBe(decisions);
    expect((await getAgent(agent.agentId)).state).toBe("revoked");
  });
});

describe.each(TRANSPORTS)("heartbeat over %s", (transport: Transport) => {
  it("an active agent's heartbeat updates last_heartbeat_at", async () => {
    const agent = await newAgent(svc, org);
    expect((await getAgent(agent.agentId)).last_heartbeat_at).toBeUndefined();
    const res = await heartbeat(svc, transport, agent);
    expectResult(res, 200);
    expect(res.body).toMatchObject({ agent_id: agent.agentId, state: "active" });
    expect(res.body.last_heartbeat_at).toMatch(WIRE_TIMESTAMP);
    expect(Math.abs(Date.parse(res.body.last_heartbeat_at) - Date.now())).toBeLessThan(10_000);
    expect((await getAgent(agent.agentId)).last_heartbeat_at).toBe(res.body.last_heartbeat_at);
  });
});

describe("concurrent transitions on one agent", () => {
  /** Whether `op` is refused in `state` (the spec's table). */
  const refused = (op: Op, state: State) => ALLOWED[op][state] === undefined;

  for (let round = 1; round <= 3; round++) {
    it(`round ${round}: 20 simultaneous suspend/reactivate/revoke calls serialize, one record per applied transition`, async () => {
      const agent = await newAgent(svc, org, round === 2 ? "suspended" : "active");
      const start: State = round === 2 ? "suspended" : "active";
      const before = await auditRecords(agent.agentId);
      const ops: Op[] = [];
      for (let i = 0; i < 20; i++) ops.push(i % 10 === 7 && round !== 3 ? "revoke" : i % 2 === 0 ? "suspend" : "reactivate");
      const results = await Promise.all(
        ops.map((op, i) => call(svc, TRANSPORTS[i % 2]!, METHOD[op], { agent_id: agent.agentId, reason: `race ${i}` }, bearer(org)).then((r) => ({ op, i, r }))),
      );
      const applied = results.filter((x) => x.r.status === 200);
      for (const x of results) if (x.r.status !== 200) expectResult(x.r, 409, "invalid_transition");
      expect(applied.length).toBeGreaterThan(0);

      // Exactly one record per 200, and the records (in chain order) are a serial history from the start state.
      const records = (await auditRecords(agent.agentId)).slice(before.length);
      expect(records).toHaveLength(applied.length);
      expect(records.map((r) => r.payload.reason).sort()).toEqual(applied.map((x) => `race ${x.i}`).sort());
      let state = start;
      const visited: State[] = [state];
      for (const rec of records) {
        const op = rec.payload.operation as Op;
        expect(rec.payload.from).toBe(state);
        expect(ALLOWED[op][state]).toBe(rec.payload.to);
        state = rec.payload.to;
        visited.push(state);
      }
      // Each 200 answered the state its transition produced.
      for (const x of applied) expect(x.r.body.state).toBe(ALLOWED[x.op][records.find((r) => r.payload.reason === `race ${x.i}`).payload.from as State]);
      // Each refusal fits the serial history: the op is refused in some state the agent passed through.
      for (const x of results.filter((x) => x.r.status !== 200)) expect(visited.some((s) => refused(x.op, s)), `${x.op} refused`).toBe(true);
      expect((await getAgent(agent.agentId)).state).toBe(state);
      if (round !== 3) expect(state).toBe("revoked");
    });
  }
});

describe("agent reads", () => {
  it.each(TRANSPORTS)("GET, list and audit records over %s are org-scoped", async (transport) => {
    const agent = await newAgent(svc, org);
    const got = await call(svc, transport, M.getAgent, { agent_id: agent.agentId }, bearer(org));
    expectResult(got, 200);
    expect(got.body).toMatchObject({ agent_id: agent.agentId, certificate_id: agent.certificateId, state: "active" });
    expectResult(await call(svc, transport, M.getAgent, { agent_id: agent.agentId }, bearer(other)), 404, "not_found");
    const audit = await call(svc, transport, M.listAgentAuditRecords, { agent_id: agent.agentId }, bearer(org));
    expectResult(audit, 200);
    expect(audit.body.records.map((r: any) => r.payload.operation ?? "register")).toEqual(["register", "activate"]);
    expectResult(await call(svc, transport, M.listAgentAuditRecords, { agent_id: agent.agentId }, bearer(other)), 404, "not_found");
    const list = await call(svc, transport, M.listAgents, { page_size: 500 }, bearer(other));
    expectResult(list, 200);
    expect(JSON.stringify(list.body)).not.toContain(agent.agentId);
  });
});
