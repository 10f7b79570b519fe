import { isDeepStrictEqual } from "node:util";
import type { Database } from "../storage/postgres/database.js";
import { decisionStore, type NewDecision } from "../storage/postgres/decisions.js";
import { MandateError } from "../base/errors.js";
import { commitAcrossOrganizations, GroupCommit, waitForCompany } from "./group-commit.js";
import { requireLiveSigner } from "./signatures.js";
import type { EvidenceEntry, EvidenceLog } from "./evidence-log.js";

/**
 * The decision was evaluated against a policy head or integration contract that has changed
 * since: it is not recorded, and the Intent must be evaluated again (Intents does so).
 */
export class StaleContext extends MandateError {
  constructor() {
    super("unavailable", "The organization's policy or integration contract changed while the Intent was evaluated; submit it again.");
  }
}

interface Pending {
  decision: NewDecision;
  /** The certificate that signed the Intent, rechecked at commit. */
  certificateId: string;
  payload: Record<string, unknown>;
}

/**
 * Writes decisions and their evidence, committing concurrent decisions of every
 * organization together (see GroupCommit). Every caller's promise resolves
 * only after its decision and evidence are durable.
 */
export class DecisionWriter {
  private readonly groups = new GroupCommit<Pending>((batch) => this.commit(batch), waitForCompany);

  constructor(
    private readonly db: Database,
    private readonly evidence: EvidenceLog,
  ) {}

  /**
   * Records the decision with a `decision` evidence record; sets
   * `decision.evidence_id`. Rejects with the agent-state error when the agent
   * was revoked, retired or re-keyed after its signature was verified; an
   * agent suspended meanwhile gets HUMAN_REVIEW `agent_suspended` instead.
   * Rejects with StaleContext when the policy head or the action's integration
   * contract is no longer the one the decision was evaluated against.
   */
  write(decision: NewDecision, certificateId: string, payload: Record<string, unknown>): Promise<void> {
    return this.groups.submit({ decision, certificateId, payload });
  }

  /**
   * Commits the group's admissible decisions, of every organization; returns the refused ones
   * with their error. The usual case takes one statement and no lock (EvidenceLog.appendCheckedAcross):
   * each organization's chain head is checked, not locked, and its signers, policy head and
   * contracts are checked live in the same statement. An organization whose check fails (another
   * writer moved its chain, a signer changed state, a policy was published) is tried once more
   * on its current head, then takes the locking path, which sorts out every item; so does one
   * with a suspended signer's decision. One organization's refusal holds up no other's.
   */
  private commit(batch: readonly Pending[]): Promise<Map<Pending, unknown>> {
    const suspended = new Set(batch.filter((p) => p.decision.reason === "agent_suspended").map((p) => p.decision.organization_id));
    return commitAcrossOrganizations(batch, new Set(batch.filter((p) => suspended.has(p.decision.organization_id))), {
      organizationOf: (p) => p.decision.organization_id,
      checked: (items) => this.commitChecked(items),
      locking: (items) => this.commitLocking(items),
    });
  }

  /** The checked statement for `batch`; returns the items of the organizations it did not write. */
  private async commitChecked(batch: readonly Pending[]): Promise<Pending[]> {
    const signers = new Map(batch.map((p) => [p.certificateId, { certificateId: p.certificateId, organizationId: p.decision.organization_id }]));
    const { written } = await this.evidence.appendCheckedAcross(batch.map((p) => this.entryOf(p)), batch[0]!.decision.evaluated_at, (moves, sealed) => {
      batch.forEach((p, i) => (p.decision.evidence_id = sealed[i]!.evidence_id));
      return decisionStore.insertWithEvidence(this.db.pool, moves, sealed, batch.map((p) => p.decision), [...signers.values()]);
    });
    return batch.filter((p) => !written.has(p.decision.organization_id));
  }

  private entryOf(p: Pending): EvidenceEntry {
    return { organizationId: p.decision.organization_id, kind: "decision", subjectId: p.decision.decision_id, payload: p.payload };
  }

  private async commitLocking(batch: readonly Pending[]): Promise<Map<Pending, MandateError>> {
    const refused = new Map<Pending, MandateError>();
    await this.db.transaction(async (tx) => {
      // Lock order: agents, then the evidence head, as lifecycle transitions do (no deadlock).
      const signers = await decisionStore.lockSigners(tx, [...new Set(batch.map((p) => p.certificateId))]);
      const live = batch.filter((p) => {
        const why = recheck(p, signers.get(p.certificateId));
        if (why) refused.set(p, why);
        return !why;
      });
      if (live.length === 0) return;
      const current = await decisionStore.currentContext(tx, live[0]!.decision.organization_id, [...new Set(live.map((p) => p.decision.action))]);
      const admitted = live.filter((p) => {
        const stale = p.decision.reason !== "agent_suspended" && !evaluatedOnCurrent(p.decision, current);
        if (stale) refused.set(p, new StaleContext());
        return !stale;
      });
      if (admitted.length === 0) return;
      const records = await this.evidence.append(tx, admitted.map((p) => this.entryOf(p)), admitted[0]!.decision.evaluated_at);
      admitted.forEach((p, i) => (p.decision.evidence_id = records[i]!.evidence_id));
      await decisionStore.insertMany(tx, admitted.map((p) => p.decision));
    });
    return refused;
  }
}

/**
 * The agent may have changed state between signature verification and this
 * commit: refuse what may no longer be recorded; send a now-suspended agent's
 * action to review with no rule result.
 */
function recheck(p: Pending, signer: { cert_state: string; agent_state: string } | undefined): MandateError | null {
  try {
    requireLiveSigner(signer ?? { cert_state: "replaced", agent_state: "revoked" }, true);
  } catch (err) {
    return err as MandateError;
  }
  if (signer!.agent_state === "suspended" && p.decision.reason !== "agent_suspended") {
    Object.assign(p.decision, { outcome: "HUMAN_REVIEW", reason: "agent_suspended", status: "PENDING", policy_versions: {}, graph_version: 0, bundle_digest: "" });
    Object.assign(p.payload, { outcome: "HUMAN_REVIEW", reason: "agent_suspended", status: "PENDING", policy_versions: {}, graph_version: 0, bundle_digest: "", trace: [] });
  }
  return null;
}

/** True when the decision names the policy head and the action's integration contract that are current. */
function evaluatedOnCurrent(d: NewDecision, current: Awaited<ReturnType<typeof decisionStore.currentContext>>): boolean {
  const contract = current.contracts.get(d.action);
  return (
    current.head !== null &&
    current.head.bundle_digest === d.bundle_digest &&
    current.head.graph_version === d.graph_version &&
    isDeepStrictEqual(current.head.policy_versions, d.policy_versions) &&
    (contract?.integration_id ?? null) === d.integration_id &&
    (contract?.contract_version ?? null) === d.contract_version
  );
}
