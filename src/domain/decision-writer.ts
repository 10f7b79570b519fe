import type { Database } from "../storage/postgres/database.js";
import { decisionStore, type DecisionRow } from "../storage/postgres/decisions.js";
import type { EvidenceEntry, EvidenceLog } from "./evidence-log.js";

type NewDecision = Omit<DecisionRow, "resolution" | "approvals">;

interface Pending {
  decision: NewDecision;
  payload: Record<string, unknown>;
  resolve(): void;
  reject(err: unknown): void;
}

/** Largest group written by one transaction. */
const MAX_BATCH = 256;

/**
 * Writes decisions and their evidence, committing concurrent decisions of one
 * organization together (group commit). Appends to an organization's evidence
 * chain serialize on its head row; one transaction per group pays that lock and
 * one fsync for many decisions instead of one each. Nothing waits on a timer:
 * whatever arrives while a group commits forms the next group. Every caller's
 * promise resolves only after its decision and evidence are durable.
 */
export class DecisionWriter {
  private readonly queues = new Map<string, Pending[]>();

  constructor(
    private readonly db: Database,
    private readonly evidence: EvidenceLog,
  ) {}

  /** Records the decision with a `decision` evidence record; sets `decision.evidence_id`. */
  write(decision: NewDecision, payload: Record<string, unknown>): Promise<void> {
    return new Promise((resolve, reject) => {
      const org = decision.organization_id;
      const queue = this.queues.get(org);
      const item = { decision, payload, resolve, reject };
      if (queue) {
        queue.push(item);
        return;
      }
      this.queues.set(org, [item]);
      void this.drain(org);
    });
  }

  private async drain(org: string): Promise<void> {
    for (;;) {
      const queue = this.queues.get(org)!;
      if (queue.length === 0) {
        this.queues.delete(org);
        return;
      }
      const batch = queue.splice(0, MAX_BATCH);
      try {
        await this.commit(batch);
        batch.forEach((p) => p.resolve());
      } catch (err) {
        if (batch.length === 1) {
          batch[0]!.reject(err);
          continue;
        }
        // One bad apple (e.g. a nonce that raced in) must not fail its neighbours: retry each alone.
        for (const p of batch) {
          try {
            await this.commit([p]);
            p.resolve();
          } catch (e) {
            p.reject(e);
          }
        }
      }
    }
  }

  private async commit(batch: readonly Pending[]): Promise<void> {
    await this.db.transaction(async (tx) => {
      const entries: EvidenceEntry[] = batch.map((p) => ({
        organizationId: p.decision.organization_id,
        kind: "decision",
        subjectId: p.decision.decision_id,
        payload: p.payload,
      }));
      const records = await this.evidence.append(tx, entries, batch[0]!.decision.evaluated_at);
      batch.forEach((p, i) => (p.decision.evidence_id = records[i]!.evidence_id));
      await decisionStore.insertMany(tx, batch.map((p) => p.decision));
    });
  }
}
