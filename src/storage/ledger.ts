import type { CapabilityRow, ConsumeRefusal, NewCapability } from "./capabilities.js";
import type { NewDecision } from "./decisions.js";
import type { EvidenceEntry } from "./evidence.js";

export type { EvidenceEntry };

/** A decision to record, with what must still hold when it commits. */
export interface DecisionToRecord {
  /** The decision; its `evidence_id` is the ledger's to assign. */
  decision: Omit<NewDecision, "evidence_id">;
  /** Its `decision` evidence payload. */
  payload: Record<string, unknown>;
  /** The certificate that signed the Intent: it and its agent must still be active at commit. */
  certificateId: string;
  /**
   * What is recorded instead when the signer's agent is found suspended at commit (the same
   * Intent sent to review, `agent_suspended`; called only then); null when `decision` already
   * is that, in which case a suspended agent is what it expects.
   */
  ifSuspended: (() => { decision: Omit<NewDecision, "evidence_id">; payload: Record<string, unknown> }) | null;
}

/** What became of a decision handed to the ledger. */
export type DecisionRecording =
  /** Durable with its evidence record: `decision` (or `ifSuspended`, when the agent was found suspended). */
  | { recorded: "decision" | "ifSuspended"; evidenceId: string }
  /** The certificate or its agent is no longer in a state that may sign: their states now. */
  | { refused: "signer_inactive"; certState: string; agentState: string }
  /** The decision's organization is no longer active (the platform operator suspended it). */
  | { refused: "organization_suspended" }
  /** The policy head or the action's integration contract is no longer the one evaluated against. */
  | { refused: "stale_context" }
  /** The agent already has a decision for this nonce (a concurrent twin won). */
  | { refused: "nonce_taken" };

/** What became of a capability handed to the ledger for issue. */
export type IssueRecording = { issued: true; evidenceId: string } | { refused: "already_issued" };

/** What became of a consume handed to the ledger. */
export type ConsumeRecording = { consumed: CapabilityRow } | { refused: ConsumeRefusal };

/**
 * The one way the hot paths record: a decision, a capability's issue, a capability's consume,
 * each with its evidence record. For every item, this guarantees:
 *
 * - **All or nothing.** The item's rows and its evidence record commit together or not at all;
 *   an item refused (a result with `refused`) wrote nothing.
 * - **Preconditions are checked where it commits**, not before: the signer, its organization
 *   being active and the evaluated policy head and contract (decisions), the decision having
 *   no capability yet (issues), the capability being unexpired, unconsumed and every
 *   dependency active (consumes).
 * - **Chain order per organization.** Each organization's records get consecutive positions,
 *   each linked to the one before, whatever replicas write concurrently.
 * - **Durable before it resolves.** A promise resolves only after the commit.
 *
 * Concurrent items (of any organizations) may share one commit; one item's refusal never
 * refuses another. It throws only when the item's outcome is unknown or the store failed:
 * UnavailableError (storage/errors.ts) when the store cannot be reached, anything else is a bug.
 */
export interface Ledger {
  /** Records a decision with its `decision` evidence record. */
  recordDecision(item: DecisionToRecord): Promise<DecisionRecording>;
  /** Records a capability's issue with its `capability.issued` evidence record (payload as given). */
  issueCapability(capability: NewCapability, payload: Record<string, unknown>): Promise<IssueRecording>;
  /** Consumes a capability once, with its `capability.consumed` evidence record; `by` is who consumed it. */
  consumeCapability(capability: CapabilityRow, by: string): Promise<ConsumeRecording>;
}

/** The kinds of group the ledger commits. */
export type LedgerGroupKind = "decision" | "issue" | "consume";

/**
 * Told what the ledger committed, from the recording path itself, for metrics: never called for
 * an item that was not recorded, and must not throw (a failing observer never fails a commit).
 */
export interface LedgerObserver {
  /** A group of `size` items was committed (or failed) in `seconds`, from its start to its end. */
  group(kind: LedgerGroupKind, size: number, seconds: number): void;
  /** A decision is durable with its evidence record. */
  decisionRecorded(outcome: string, reason: string): void;
}
