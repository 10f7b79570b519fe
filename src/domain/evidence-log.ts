import type { KeyObject } from "node:crypto";
import { signEvidenceHead } from "../evidence/head.js";
import type { EvidenceHead } from "../evidence/head.js";
import { generateEvidenceKey, importEd25519PublicJwk, EvidenceKeyring } from "../evidence/keys.js";
import type { EvidenceRecord } from "../evidence/record.js";
import type { EvidenceStore } from "../storage/evidence.js";

/**
 * The signed, hash-chained evidence log as callers read it, and the keys that sign it. Records
 * are written by the storage of the changes they state (storage/ledger.ts), so a change and its
 * evidence commit together or not at all.
 */
export class EvidenceLog {
  private readonly publicKeys = new Map<string, KeyObject>();

  private constructor(
    private readonly store: EvidenceStore,
    private keyring: EvidenceKeyring,
  ) {}

  /** Loads the keyring, creating the first key if none exists (call under the migration lock). */
  static async open(store: EvidenceStore): Promise<EvidenceLog> {
    let rows = await store.keys();
    if (rows.length === 0) {
      const key = await generateEvidenceKey();
      await store.activateKey({ kid: key.kid, private_key_pem: key.privateKeyPem, public_jwk: key.publicJwk });
      rows = await store.keys();
    }
    return new EvidenceLog(store, new EvidenceKeyring(rows));
  }

  /** The active signing keyring (also signs capability tokens, so one JWKS verifies both). */
  get keys(): EvidenceKeyring {
    return this.keyring;
  }

  /** Rotates the signing key; old public keys stay published so old records keep verifying. */
  async rotateKey(): Promise<string> {
    const key = await generateEvidenceKey();
    await this.store.activateKey({ kid: key.kid, private_key_pem: key.privateKeyPem, public_jwk: key.publicJwk });
    this.keyring = new EvidenceKeyring(await this.store.keys());
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
      const rows = await this.store.keys();
      if (rows.some((r) => r.kid === kid)) this.keyring = new EvidenceKeyring(rows);
      jwk = this.keyring.jwks().keys.find((k) => k.kid === kid);
    }
    if (!jwk) return null;
    const key = importEd25519PublicJwk(jwk);
    this.publicKeys.set(kid, key);
    return key;
  }

  /** The published JWKS, read from the store so keys rotated by another replica appear. */
  async jwks(): Promise<{ keys: object[] }> {
    const rows = await this.store.keys();
    return new EvidenceKeyring(rows.map((r) => ({ ...r, private_key_pem: r.active ? r.private_key_pem : null }))).jwks();
  }

  /** One record of the organization, or null. */
  get(organizationId: string, evidenceId: string): Promise<EvidenceRecord | null> {
    return this.store.get(organizationId, evidenceId);
  }

  /** Records about one subject (an agent, a decision…), oldest first. */
  bySubject(organizationId: string, subjectId: string): Promise<EvidenceRecord[]> {
    return this.store.bySubject(organizationId, subjectId);
  }

  /**
   * A page of the organization's chain, for export, with the chain's head as of the same read,
   * signed with the active key (src/evidence/head.ts): an export carries the head of its last
   * page, so records cut from its end fail verification.
   */
  async page(organizationId: string, afterSeq: number, limit: number): Promise<{ records: EvidenceRecord[]; hasMore: boolean; head: EvidenceHead }> {
    const { records, hasMore, head } = await this.store.page(organizationId, afterSeq, limit);
    const signed = signEvidenceHead({ organization_id: organizationId, seq: head.seq, digest: head.digest, signed_at: new Date().toISOString() }, this.keyring);
    return { records, hasMore, head: signed };
  }
}
