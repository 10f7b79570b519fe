import type { EvidenceKeyring } from "../../evidence/keys.js";
import { newEvidenceId, sealChain, type EvidenceRecord } from "../../evidence/record.js";
import type { EvidenceEntry } from "../evidence.js";
import type { Database, Queryable } from "./database.js";
import { evidenceSql, type ChainHead, type HeadMove } from "./evidence.js";

/** Heads remembered beyond this many organizations are forgotten (and read again when needed). */
const MAX_REMEMBERED_HEADS = 50_000;

/**
 * Appends to the organizations' evidence chains: seals entries (ids, positions, links, time,
 * signature) on the head they follow and stores them. Two ways: `append` inside a transaction
 * under the organization's chain lock (every change that is not a hot path), and
 * `sealAcross` + `settle` for statements that write many organizations at once and check each
 * head instead of locking it first (the Ledger's usual path). Remembers where this process last
 * left each chain so that the checked path needs no read; a wrong guess (another replica wrote)
 * fails the check and costs one retry.
 */
export class EvidenceChain {
  private readonly heads = new Map<string, ChainHead>();

  constructor(
    private readonly db: Database,
    /** The keyring that signs now (it changes when the key rotates). */
    private readonly keyring: () => EvidenceKeyring,
    /**
     * Told, after they commit, which organizations' chains grew: the wake-up of event readers
     * (EventNotifications.announce, docs/events.md). Called after the commit, outside it, so the
     * commit itself pays nothing for it; a crash in between loses only the wake-up.
     */
    private readonly committed: (organizationIds: readonly string[]) => void = () => undefined,
  ) {}

  /**
   * Appends entries of one organization in order inside `tx`, taking the organization's chain
   * lock until `tx` ends; returns the sealed records. Call it after locking any other rows
   * the change needs: agents and other rows first, the chain head last, everywhere.
   */
  async append(tx: Queryable, entries: readonly EvidenceEntry[], now = new Date()): Promise<EvidenceRecord[]> {
    if (entries.length === 0) return [];
    const organizationId = entries[0]!.organizationId;
    const head = await evidenceSql.lockHead(tx, organizationId);
    const sealed = await this.seal(head, entries, now);
    await evidenceSql.append(tx, sealed);
    this.db.afterCommit(tx, () => this.committed([organizationId]));
    // Remembered before `tx` commits: if it rolls back instead, the next checked write
    // misses its head check and reads the real head, so a wrong guess costs one retry.
    const last = sealed[sealed.length - 1]!;
    this.remember(organizationId, { seq: last.seq, digest: last.digest });
    return sealed;
  }

  /**
   * Seals entries of any organizations, each organization's in their order, on the head this
   * process last wrote (heads it does not know are read in one query). Returns one record per
   * entry, in order, and each organization's head move, for ONE statement that writes an
   * organization's records only if its head is still where the move expects; then call
   * `settle` with the organizations that statement wrote.
   */
  async sealAcross(entries: readonly EvidenceEntry[], now: Date): Promise<{ records: EvidenceRecord[]; moves: HeadMove[] }> {
    const byOrg = new Map<string, number[]>();
    entries.forEach((e, i) => {
      const at = byOrg.get(e.organizationId);
      if (at) at.push(i);
      else byOrg.set(e.organizationId, [i]);
    });
    const unknown = [...byOrg.keys()].filter((id) => !this.heads.has(id));
    const read = unknown.length > 0 ? await evidenceSql.heads(this.db.pool, unknown) : new Map<string, ChainHead>();
    const records: EvidenceRecord[] = new Array(entries.length);
    const moves = await Promise.all(
      [...byOrg].map(async ([organizationId, at]) => {
        const expected = this.heads.get(organizationId) ?? read.get(organizationId)!;
        const sealed = await this.seal(expected, at.map((i) => entries[i]!), now);
        sealed.forEach((r, k) => (records[at[k]!] = r));
        const last = sealed[sealed.length - 1]!;
        return { organizationId, expected, next: { seq: last.seq, digest: last.digest } };
      }),
    );
    return { records, moves };
  }

  /** After a `sealAcross` statement (committed): remembers the heads it moved, forgets the others (read again next time), and announces the organizations it wrote. */
  settle(moves: readonly HeadMove[], written: ReadonlySet<string>): void {
    // The statement ran on its own (autocommit): what it wrote is committed.
    if (written.size > 0) this.committed([...written]);
    for (const m of moves) {
      if (written.has(m.organizationId)) this.remember(m.organizationId, m.next);
      else this.heads.delete(m.organizationId);
    }
  }

  private seal(head: ChainHead, entries: readonly EvidenceEntry[], now: Date): Promise<EvidenceRecord[]> {
    const organizationId = entries[0]!.organizationId;
    const createdAt = now.toISOString();
    return sealChain(
      entries.length,
      (i, prevDigest) => {
        const e = entries[i]!;
        return {
          evidence_id: newEvidenceId(),
          organization_id: organizationId,
          seq: head.seq + i + 1,
          prev_digest: prevDigest,
          kind: e.kind,
          subject_id: e.subjectId,
          payload: e.payload,
          created_at: createdAt,
        };
      },
      this.keyring(),
      head.digest,
    );
  }

  private remember(organizationId: string, head: ChainHead): void {
    if (this.heads.size > MAX_REMEMBERED_HEADS) this.heads.clear();
    this.heads.set(organizationId, head);
  }
}
