import type { KeyObject } from "node:crypto";
import { generateEvidenceKey, importEd25519PublicJwk, EvidenceKeyring } from "../evidence/keys.js";
import { newEvidenceId, sealChain, type EvidenceRecord } from "../evidence/record.js";
import { isConflict, type Database, type Queryable } from "../storage/postgres/database.js";
import { evidenceStore, type ChainHead, type HeadMove } from "../storage/postgres/evidence.js";

export type { ChainHead, HeadMove };

/** What a caller records; the log adds id, position, link, time and signature. */
export interface EvidenceEntry {
  organizationId: string;
  kind: string;
  subjectId: string;
  payload: Record<string, unknown>;
}


/**
 * The signed, hash-chained evidence log. `append` runs inside the caller's
 * transaction, so a change and its evidence commit together or not at all.
 */
export class EvidenceLog {
  private readonly publicKeys = new Map<string, KeyObject>();
  private readonly heads = new Map<string, ChainHead>();

  private constructor(
    private readonly db: Database,
    private keyring: EvidenceKeyring,
  ) {}

  /** Loads the keyring, creating the first key if none exists (call under the migration lock). */
  static async open(db: Database): Promise<EvidenceLog> {
    let rows = await evidenceStore.keys(db.pool);
    if (rows.length === 0) {
      const key = await generateEvidenceKey();
      await db.transaction((tx) => evidenceStore.activateKey(tx, { kid: key.kid, private_key_pem: key.privateKeyPem, public_jwk: key.publicJwk }));
      rows = await evidenceStore.keys(db.pool);
    }
    return new EvidenceLog(db, new EvidenceKeyring(rows));
  }

  /** The active signing keyring (also signs capability tokens, so one JWKS verifies both). */
  get keys(): EvidenceKeyring {
    return this.keyring;
  }

  /** Rotates the signing key; old public keys stay published so old records keep verifying. */
  async rotateKey(): Promise<string> {
    const key = await generateEvidenceKey();
    await this.db.transaction((tx) => evidenceStore.activateKey(tx, { kid: key.kid, private_key_pem: key.privateKeyPem, public_jwk: key.publicJwk }));
    this.keyring = new EvidenceKeyring(await evidenceStore.keys(this.db.pool));
    return key.kid;
  }

  /**
   * The public key of `kid` (parsed once per kid), reloading the keyring once
   * when the kid is unknown (another replica may have rotated); null when no
   * such key exists.
   */
  async publicKey(kid: string): Promise<KeyObject | null> {
    const cached = this.publicKeys.get(kid);
    if (cached) return cached;
    let jwk = this.keyring.jwks().keys.find((k) => k.kid === kid);
    if (!jwk) {
      const rows = await evidenceStore.keys(this.db.pool);
      if (rows.some((r) => r.kid === kid)) this.keyring = new EvidenceKeyring(rows);
      jwk = this.keyring.jwks().keys.find((k) => k.kid === kid);
    }
    if (!jwk) return null;
    const key = importEd25519PublicJwk(jwk);
    this.publicKeys.set(kid, key);
    return key;
  }

  /** The published JWKS, read from the database so keys rotated by another replica appear. */
  async jwks(): Promise<{ keys: object[] }> {
    const rows = await evidenceStore.keys(this.db.pool);
    return new EvidenceKeyring(rows.map((r) => ({ ...r, private_key_pem: r.active ? r.private_key_pem : null }))).jwks();
  }

  /** Appends entries of one organization in order, inside `tx`; returns the sealed records. */
  async append(tx: Queryable, entries: readonly EvidenceEntry[], now = new Date()): Promise<EvidenceRecord[]> {
    if (entries.length === 0) return [];
    const organizationId = entries[0]!.organizationId;
    const head = await evidenceStore.lockHead(tx, organizationId);
    const sealed = await this.seal(head, entries, now);
    await evidenceStore.append(tx, sealed);
    // Remembered before `tx` commits: if it rolls back instead, the next checked write
    // misses its head check and reads the real head, so a wrong guess costs one retry.
    const last = sealed[sealed.length - 1]!;
    this.remember(organizationId, { seq: last.seq, digest: last.digest });
    return sealed;
  }

  /** Seals entries of one organization as the records that follow `head`; stores nothing. */
  seal(head: ChainHead, entries: readonly EvidenceEntry[], now = new Date()): Promise<EvidenceRecord[]> {
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
      this.keyring,
      head.digest,
    );
  }

  /**
   * Appends entries of one or more organizations without the chain lock, for writers whose
   * records and rows go in ONE statement that checks each head (seq and digest) instead.
   * Each organization's entries (in their order) are sealed on the head this process last
   * wrote; heads it does not know are read in one query. `write` stores each organization's
   * share only if that organization's head is still where it was expected, and returns the
   * organizations it wrote. Returns the records (one per entry, in order) and those
   * organizations. A head not written is forgotten, so a second call seals on the head as read
   * then; the caller retries or sends those entries down its locking path. A deadlock or
   * serialization failure of `write` counts as nothing written: the statement was aborted whole.
   */
  async appendCheckedAcross(
    entries: readonly EvidenceEntry[],
    now: Date,
    write: (moves: readonly HeadMove[], records: readonly EvidenceRecord[]) => Promise<ReadonlySet<string>>,
  ): Promise<{ records: EvidenceRecord[]; written: ReadonlySet<string> }> {
    const byOrg = new Map<string, number[]>();
    entries.forEach((e, i) => {
      const at = byOrg.get(e.organizationId);
      if (at) at.push(i);
      else byOrg.set(e.organizationId, [i]);
    });
    const unknown = [...byOrg.keys()].filter((id) => !this.heads.has(id));
    const read = unknown.length > 0 ? await evidenceStore.heads(this.db.pool, unknown) : new Map<string, ChainHead>();
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
    const written = await write(moves, records).catch((err: unknown) => (isConflict(err) ? new Set<string>() : Promise.reject(err)));
    for (const m of moves) {
      if (written.has(m.organizationId)) this.remember(m.organizationId, m.next);
      else this.heads.delete(m.organizationId);
    }
    return { records, written };
  }

  /** Notes where this process last left an organization's chain. */
  private remember(organizationId: string, head: ChainHead): void {
    if (this.heads.size > 50_000) this.heads.clear();
    this.heads.set(organizationId, head);
  }

  /** One record of the organization, or null. */
  get(organizationId: string, evidenceId: string): Promise<EvidenceRecord | null> {
    return evidenceStore.get(this.db.pool, organizationId, evidenceId);
  }

  /** Records about one subject (an agent, a decision…), oldest first. */
  bySubject(organizationId: string, subjectId: string): Promise<EvidenceRecord[]> {
    return evidenceStore.bySubject(this.db.pool, organizationId, subjectId);
  }

  /** A page of the organization's chain, for export. */
  page(organizationId: string, afterSeq: number, limit: number) {
    return evidenceStore.page(this.db.pool, organizationId, afterSeq, limit);
  }
}
