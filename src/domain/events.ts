/*
 * Events are a projection of the evidence log (docs/events.md). Every change Mandate records
 * already appends a signed record to its organization's chain in the same transaction as the
 * change, so the log is the transactional outbox: an event exists exactly when its change
 * committed, across crashes, and the decision path writes nothing more for it. This module is the
 * pure function from one record to the events it stands for, and the event ids that let a
 * consumer resume where it stopped.
 */

/** Every event name, in the order docs/events.md lists them. */
export const EVENT_TYPES = [
  "IntentReceived",
  "DecisionCompleted",
  "HumanReviewRequested",
  "HumanReviewResolved",
  "ReceiptIssued",
  "PolicyPublished",
  "AuthorityGraphUpdated",
  "ExecutionReconciled",
  "AgentStateChanged",
  "WebhookFailing",
] as const;

/** One event name. */
export type EventType = (typeof EVENT_TYPES)[number];

const EVENT_TYPE_SET: ReadonlySet<string> = new Set(EVENT_TYPES);

/** Whether `name` is an event name. */
export function isEventType(name: string): name is EventType {
  return EVENT_TYPE_SET.has(name);
}

/** The spec's envelope: exactly these four members, on the stream and in webhook bodies. */
export interface EventEnvelope {
  event: EventType;
  event_id: string;
  /** The record's created_at: ISO 8601 UTC with three fractional digits. */
  occurred_at: string;
  data: Record<string, unknown>;
}

/** What the projection reads of one evidence record (a sealed record has all of it). */
export interface ProjectedRecord {
  evidence_id: string;
  seq: number;
  kind: string;
  created_at: string;
  payload: Record<string, unknown>;
  /** The record's digest, when known: ReceiptIssued carries it. */
  digest?: string;
}

/** Agent lifecycle record kinds (src/domain/agents.ts) that change an agent's state. */
const AGENT_STATE_KINDS: Readonly<Record<string, { operation: string; to: string }>> = {
  "agent.registered": { operation: "register", to: "registered" },
  "agent.activated": { operation: "activate", to: "active" },
  "agent.suspended": { operation: "suspend", to: "suspended" },
  "agent.reactivated": { operation: "reactivate", to: "active" },
  "agent.revoked": { operation: "revoke", to: "revoked" },
  "agent.retired": { operation: "retire", to: "retired" },
};

/** Which record kinds each event type comes from: a stream filtered by type reads only these. */
export const KINDS_OF_EVENT: Readonly<Record<EventType, readonly string[]>> = {
  IntentReceived: ["decision"],
  DecisionCompleted: ["decision"],
  HumanReviewRequested: ["decision"],
  ReceiptIssued: ["decision"],
  HumanReviewResolved: ["decision.resolved"],
  PolicyPublished: ["policy.published", "policy.rolled_back", "policy.disabled"],
  AuthorityGraphUpdated: ["graph.published"],
  ExecutionReconciled: ["reconciliation"],
  AgentStateChanged: Object.keys(AGENT_STATE_KINDS),
  WebhookFailing: ["webhook.failing"],
};

/** The record kinds that project to at least one of `types`. */
export function kindsOf(types: Iterable<EventType>): string[] {
  const kinds = new Set<string>();
  for (const t of types) for (const k of KINDS_OF_EVENT[t]) kinds.add(k);
  return [...kinds].sort();
}

// -------------------------------------------------------------------------------------------
// Event ids

/** Digits of the position in an event id: enough for any seq a bigint column holds within 2^53. */
const SEQ_DIGITS = 16;
const EVENT_ID = /^evt_(\d{16})_(\d)_([0-9a-z]{26})$/;

/**
 * The id of the `index`-th event (0-based) of the record at `seq` whose id is `evidenceId`:
 * `evt_<seq, 16 digits>_<index>_<the evidence id's random part>`. Unique everywhere (the evidence
 * id is 130 random bits), stable (a function of the record, which never changes), and within one
 * organization sorts as the events were recorded. It is also the stream's cursor: the position is
 * read back from it, and the evidence id lets the store check that the position is this
 * organization's record and not a guess.
 */
export function eventId(seq: number, index: number, evidenceId: string): string {
  if (!Number.isSafeInteger(seq) || seq < 1) throw new RangeError(`seq must be a positive integer, got ${seq}`);
  if (!Number.isInteger(index) || index < 0 || index > 9) throw new RangeError(`index must be 0..9, got ${index}`);
  const random = evidenceId.startsWith("evd_") ? evidenceId.slice(4) : evidenceId;
  return `evt_${String(seq).padStart(SEQ_DIGITS, "0")}_${index}_${random}`;
}

/** Where an event sits in its organization's log, read back from its id. */
export interface EventPosition {
  seq: number;
  index: number;
  evidenceId: string;
}

/** The position an event id names, or null when `id` is not an event id. */
export function parseEventId(id: string): EventPosition | null {
  const m = EVENT_ID.exec(id);
  if (!m) return null;
  const seq = Number(m[1]);
  if (!Number.isSafeInteger(seq) || seq < 1) return null;
  return { seq, index: Number(m[2]), evidenceId: `evd_${m[3]}` };
}

// -------------------------------------------------------------------------------------------
// The projection

type Fields = Record<string, unknown>;

const str = (v: unknown): string | null => (typeof v === "string" ? v : null);
const num = (v: unknown): number | null => (typeof v === "number" && Number.isFinite(v) ? v : null);

/**
 * The events one evidence record stands for, in order (possibly none: a capability's issue, a
 * contract approval, an adapter report are recorded but are no event of the taxonomy). Pure and
 * deterministic: the same record always gives the same events with the same ids, which is what
 * makes an event id a cursor. docs/events.md lists every event and its data; what is left out on
 * purpose is the Intent itself (its free-form `context`, amounts, counterparties), reviewers' and
 * administrators' notes beyond a transition's reason, keys and secrets.
 */
export function projectEvents(record: ProjectedRecord): EventEnvelope[] {
  const p = record.payload;
  const envelopes: Array<[EventType, Fields]> = [];
  const kind = record.kind;
  if (kind === "decision") {
    const intent = (typeof p.intent === "object" && p.intent !== null ? p.intent : {}) as Fields;
    const common = { decision_id: str(p.decision_id), agent_id: str(p.agent_id) };
    const action = str(intent.action);
    envelopes.push(["IntentReceived", { ...common, principal_id: str(p.principal_id), action, intent_sha256: str(p.intent_sha256) }]);
    if (p.outcome === "HUMAN_REVIEW") {
      envelopes.push(["HumanReviewRequested", { ...common, reason: str(p.reason), action, evidence_id: record.evidence_id }]);
    } else {
      envelopes.push([
        "DecisionCompleted",
        {
          ...common,
          outcome: str(p.outcome),
          evidence_id: record.evidence_id,
          reason: str(p.reason),
          action,
          policy_versions: typeof p.policy_versions === "object" && p.policy_versions !== null ? p.policy_versions : {},
          graph_version: num(p.graph_version),
        },
      ]);
    }
    envelopes.push(["ReceiptIssued", { decision_id: common.decision_id, evidence_id: record.evidence_id, seq: record.seq, digest: record.digest ?? null }]);
  } else if (kind === "decision.resolved") {
    envelopes.push([
      "HumanReviewResolved",
      { decision_id: str(p.decision_id), resolution: str(p.resolution), resolved_by: str(p.by), approvals: num(p.approvals_so_far), evidence_id: record.evidence_id },
    ]);
  } else if (kind === "policy.published") {
    envelopes.push([
      "PolicyPublished",
      { policy_key: str(p.policy_key), change: "published", version: num(p.version), previous_version: null, bundle_digest: str(p.bundle_digest), author: str(p.author), approver: str(p.approver), by: str(p.by), evidence_id: record.evidence_id },
    ]);
  } else if (kind === "policy.rolled_back" || kind === "policy.disabled") {
    const rolledBack = kind === "policy.rolled_back";
    envelopes.push([
      "PolicyPublished",
      {
        policy_key: str(p.policy_key),
        change: rolledBack ? "rolled_back" : "disabled",
        // Disabling leaves no version of the policy active.
        version: rolledBack ? num(p.to_version) : null,
        previous_version: num(p.from_version),
        bundle_digest: str(p.bundle_digest),
        author: str(p.requested_by),
        approver: str(p.approved_by),
        by: str(p.approved_by),
        evidence_id: record.evidence_id,
      },
    ]);
  } else if (kind === "graph.published") {
    envelopes.push([
      "AuthorityGraphUpdated",
      { version: num(p.version), bundle_digest: str(p.bundle_digest), author: str(p.author), approver: str(p.approver), by: str(p.by), evidence_id: record.evidence_id },
    ]);
  } else if (kind === "reconciliation") {
    envelopes.push([
      "ExecutionReconciled",
      // An empty receipt id means no receipt was involved (INDETERMINATE, RECEIPT_MISSING).
      { decision_id: str(p.decision_id), reconciliation_status: str(p.status), receipt_id: str(p.receipt_id) || null, reported_by: str(p.reported_by) || null, evidence_id: record.evidence_id },
    ]);
  } else if (kind in AGENT_STATE_KINDS) {
    const change = AGENT_STATE_KINDS[kind]!;
    envelopes.push([
      "AgentStateChanged",
      {
        agent_id: str(p.agent_id),
        operation: change.operation,
        from: kind === "agent.registered" ? null : str(p.from),
        to: change.to,
        reason: str(p.reason) ?? "",
        by: str(p.by),
        evidence_id: record.evidence_id,
      },
    ]);
  } else if (kind === "webhook.failing") {
    envelopes.push(["WebhookFailing", { webhook_id: str(p.webhook_id), event_id: str(p.event_id), attempts: num(p.attempts), evidence_id: record.evidence_id }]);
  }
  return envelopes.map(([event, data], index) => ({ event, event_id: eventId(record.seq, index, record.evidence_id), occurred_at: record.created_at, data }));
}
