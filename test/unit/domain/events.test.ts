import { describe, expect, it } from "vitest";
import { EVENT_TYPES, KINDS_OF_EVENT, eventId, kindsOf, parseEventId, projectEvents, type ProjectedRecord } from "../../../src/domain/events.js";
import { TRANSITIONS } from "../../../src/domain/agents.js";

const EVD = "evd_0123456789abcdefghjkmnpqrs";
const AT = "2026-11-26T21:47:37.120Z";

function record(kind: string, payload: Record<string, unknown>, seq = 42): ProjectedRecord {
  return { evidence_id: EVD, seq, kind, created_at: AT, payload, digest: "d".repeat(64) };
}

/** A `decision` payload as src/domain/intents.ts writes it, with an Intent carrying free-form context. */
function decision(outcome: string, reason: string): Record<string, unknown> {
  return {
    decision_id: "dec_1",
    agent_id: "agt_1",
    principal_id: "prn_1",
    certificate_id: "crt_1",
    intent: { agent_id: "agt_1", action: "payments.send", amount: 12.5, currency: "EUR", counterparty: "acme", context: { secret_note: "never in an event" }, nonce: "n-1", requested_at: AT },
    intent_sha256: "a".repeat(64),
    outcome,
    reason,
    status: outcome === "HUMAN_REVIEW" ? "PENDING" : null,
    policy_versions: { payments: 3 },
    graph_version: 2,
    bundle_digest: "b".repeat(64),
    trace: [],
    evaluated_at: AT,
    now: AT,
    agent: { agent_id: "agt_1", state: "active" },
    principal: { principal_id: "prn_1", external_ref: "alice", kind: "person" },
  };
}

describe("event ids", () => {
  it("name the record's position and evidence id, and read back", () => {
    const id = eventId(42, 1, EVD);
    expect(id).toBe("evt_0000000000000042_1_0123456789abcdefghjkmnpqrs");
    expect(parseEventId(id)).toEqual({ seq: 42, index: 1, evidenceId: EVD });
  });

  it("sort as the events were recorded within an organization", () => {
    const ids = [eventId(9, 0, EVD), eventId(10, 0, EVD), eventId(10, 2, EVD), eventId(123456, 1, EVD)];
    expect([...ids].sort()).toEqual(ids);
  });

  it("refuse what is not an event id", () => {
    for (const bad of ["", "evt_42_1_x", EVD, "evt_0000000000000000_0_0123456789abcdefghjkmnpqrs", `${eventId(1, 0, EVD)}x`, "evt_000000000000004a_1_0123456789abcdefghjkmnpqrs"]) {
      expect(parseEventId(bad)).toBeNull();
    }
  });
});

describe("projectEvents", () => {
  it("an ALLOW decision: IntentReceived, DecisionCompleted (the spec's fields), ReceiptIssued", () => {
    const events = projectEvents(record("decision", decision("ALLOW", "within_delegated_authority")));
    expect(events.map((e) => e.event)).toEqual(["IntentReceived", "DecisionCompleted", "ReceiptIssued"]);
    expect(events.map((e) => e.event_id)).toEqual([0, 1, 2].map((i) => eventId(42, i, EVD)));
    expect(events.every((e) => e.occurred_at === AT)).toBe(true);
    expect(events[0]!.data).toEqual({ decision_id: "dec_1", agent_id: "agt_1", principal_id: "prn_1", action: "payments.send", intent_sha256: "a".repeat(64) });
    expect(events[1]!.data).toEqual({
      decision_id: "dec_1",
      outcome: "ALLOW",
      agent_id: "agt_1",
      evidence_id: EVD,
      reason: "within_delegated_authority",
      action: "payments.send",
      policy_versions: { payments: 3 },
      graph_version: 2,
    });
    expect(events[2]!.data).toEqual({ decision_id: "dec_1", evidence_id: EVD, seq: 42, digest: "d".repeat(64) });
  });

  it("a DENY decision completes too", () => {
    const events = projectEvents(record("decision", decision("DENY", "exceeds_approval_limit")));
    expect(events.map((e) => e.event)).toEqual(["IntentReceived", "DecisionCompleted", "ReceiptIssued"]);
    expect(events[1]!.data).toMatchObject({ outcome: "DENY", reason: "exceeds_approval_limit" });
  });

  it("a HUMAN_REVIEW decision requests review instead of completing", () => {
    const events = projectEvents(record("decision", decision("HUMAN_REVIEW", "requires_approval")));
    expect(events.map((e) => e.event)).toEqual(["IntentReceived", "HumanReviewRequested", "ReceiptIssued"]);
    expect(events[1]!.data).toEqual({ decision_id: "dec_1", agent_id: "agt_1", reason: "requires_approval", action: "payments.send", evidence_id: EVD });
  });

  it("never carries the Intent's context, amounts or counterparties", () => {
    for (const outcome of ["ALLOW", "DENY", "HUMAN_REVIEW"]) {
      const text = JSON.stringify(projectEvents(record("decision", decision(outcome, "r"))));
      for (const leak of ["secret_note", "never in an event", "acme", "12.5", "EUR", "n-1", "alice"]) expect(text).not.toContain(leak);
    }
  });

  it("a final review resolution; a first of two approvals is no event", () => {
    const payload = { decision_id: "dec_1", resolution: "approved", reason: "looks fine, private note", by: "key_r", status: "RESOLVED", approvals_so_far: 2 };
    const [resolved, ...rest] = projectEvents(record("decision.resolved", payload));
    expect(rest).toEqual([]);
    expect(resolved).toEqual({
      event: "HumanReviewResolved",
      event_id: eventId(42, 0, EVD),
      occurred_at: AT,
      data: { decision_id: "dec_1", resolution: "approved", resolved_by: "key_r", approvals: 2, evidence_id: EVD },
    });
    expect(projectEvents(record("decision.approval_recorded", { ...payload, status: "PENDING", approvals_so_far: 1 }))).toEqual([]);
  });

  it("policy publication, rollback and disable are PolicyPublished, saying which", () => {
    const [published] = projectEvents(record("policy.published", { policy_key: "payments", version: 3, author: "key_a", approver: "key_b", bundle_digest: "c", by: "key_b" }));
    expect(published!.event).toBe("PolicyPublished");
    expect(published!.data).toEqual({ policy_key: "payments", change: "published", version: 3, previous_version: null, bundle_digest: "c", author: "key_a", approver: "key_b", by: "key_b", evidence_id: EVD });
    const change = { policy_key: "payments", from_version: 3, to_version: 2, requested_by: "key_a", approved_by: "key_b", note: "n", approval_note: "m", bundle_digest: "e" };
    const [rolledBack] = projectEvents(record("policy.rolled_back", change));
    expect(rolledBack!.data).toEqual({ policy_key: "payments", change: "rolled_back", version: 2, previous_version: 3, bundle_digest: "e", author: "key_a", approver: "key_b", by: "key_b", evidence_id: EVD });
    const [disabled] = projectEvents(record("policy.disabled", { ...change, to_version: null }));
    expect(disabled!.data).toMatchObject({ change: "disabled", version: null, previous_version: 3 });
  });

  it("a graph publication is AuthorityGraphUpdated", () => {
    expect(projectEvents(record("graph.published", { version: 4, bundle_digest: "c", by: "key_b", author: "key_a", approver: "key_b" }))).toEqual([
      { event: "AuthorityGraphUpdated", event_id: eventId(42, 0, EVD), occurred_at: AT, data: { version: 4, bundle_digest: "c", author: "key_a", approver: "key_b", by: "key_b", evidence_id: EVD } },
    ]);
  });

  it("a reconciliation is ExecutionReconciled with the spec's fields", () => {
    const [matched] = projectEvents(record("reconciliation", { decision_id: "dec_1", status: "MATCHED", receipt_id: "rcp_1", reported_by: "adp_1", receipts: ["rcp_1"], by: "operator", reconciled_at: AT }));
    expect(matched).toMatchObject({ event: "ExecutionReconciled", data: { decision_id: "dec_1", reconciliation_status: "MATCHED", receipt_id: "rcp_1", reported_by: "adp_1", evidence_id: EVD } });
    const [missing] = projectEvents(record("reconciliation", { decision_id: "dec_1", status: "RECEIPT_MISSING", receipt_id: "", reported_by: "", receipts: [] }));
    expect(missing!.data).toMatchObject({ reconciliation_status: "RECEIPT_MISSING", receipt_id: null, reported_by: null });
  });

  it("every agent state transition is AgentStateChanged; key rotation and label changes are not", () => {
    for (const [op, t] of Object.entries(TRANSITIONS)) {
      const events = projectEvents(record(t.evidence, { agent_id: "agt_1", operation: op, from: t.from[0], to: t.to, reason: "why", by: "key_a" }));
      expect(events).toEqual([
        { event: "AgentStateChanged", event_id: eventId(42, 0, EVD), occurred_at: AT, data: { agent_id: "agt_1", operation: op, from: t.from[0], to: t.to, reason: "why", by: "key_a", evidence_id: EVD } },
      ]);
    }
    const [registered] = projectEvents(record("agent.registered", { agent_id: "agt_1", certificate_id: "crt_1", name: "n", public_key: "ed25519:base64:x", by: "key_a" }));
    expect(registered!.data).toEqual({ agent_id: "agt_1", operation: "register", from: null, to: "registered", reason: "", by: "key_a", evidence_id: EVD });
    expect(JSON.stringify(registered)).not.toContain("ed25519");
    for (const kind of ["agent.key_rotated", "agent.ownership_transferred", "agent.labels_changed"]) expect(projectEvents(record(kind, { agent_id: "agt_1" }))).toEqual([]);
  });

  it("a failing webhook is WebhookFailing", () => {
    const [failing] = projectEvents(record("webhook.failing", { webhook_id: "whk_1", event_id: eventId(7, 1, EVD), attempts: 8, url: "https://example.com/hook?token=secret" }));
    expect(failing).toMatchObject({ event: "WebhookFailing", data: { webhook_id: "whk_1", event_id: eventId(7, 1, EVD), attempts: 8, evidence_id: EVD } });
    expect(JSON.stringify(failing)).not.toContain("secret");
  });

  it("records that are no event of the taxonomy project to nothing", () => {
    for (const kind of ["capability.issued", "capability.consumed", "receipt.received", "adapter.report_received", "contract.approved", "organization.suspended", "organization.reactivated", "adapter.registered", "integration.suspended", "some.future_kind"]) {
      expect(projectEvents(record(kind, { anything: 1 }))).toEqual([]);
    }
  });

  it("is deterministic: the same record gives the same events", () => {
    const r = record("decision", decision("ALLOW", "x"));
    expect(projectEvents(r)).toEqual(projectEvents(structuredClone(r)));
  });

  it("the kinds a type filter reads are exactly those whose records project to that type", () => {
    const samples: ProjectedRecord[] = [
      record("decision", decision("ALLOW", "x")),
      record("decision", decision("HUMAN_REVIEW", "x")),
      record("decision.resolved", { decision_id: "d" }),
      ...["policy.published", "policy.rolled_back", "policy.disabled", "graph.published", "reconciliation", "webhook.failing"].map((k) => record(k, {})),
      ...["agent.registered", ...Object.values(TRANSITIONS).map((t) => t.evidence)].map((k) => record(k, {})),
    ];
    for (const type of EVENT_TYPES) {
      const producing = new Set(samples.filter((s) => projectEvents(s).some((e) => e.event === type)).map((s) => s.kind));
      expect([...producing].sort(), type).toEqual([...KINDS_OF_EVENT[type]].sort());
    }
    expect(kindsOf(["PolicyPublished", "AuthorityGraphUpdated"])).toEqual(["graph.published", "policy.disabled", "policy.published", "policy.rolled_back"]);
  });
});
