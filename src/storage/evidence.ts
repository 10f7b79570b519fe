import type { EvidenceKeyRow } from "../evidence/keys.js";
import type { EvidenceRecord } from "../evidence/record.js";

/** What a change states in its organization's evidence chain; the ledger adds id, position, link, time and signature. */
export interface EvidenceEntry {
  organizationId: string;
  kind: string;
  subjectId: string;
  payload: Record<string, unknown>;
}

/** Where an organization's chain ends: its last record's seq and digest (0 and null when empty). */
export interface StoredChainHead {
  seq: number;
  digest: string | null;
}

/** A page of an organization's chain and its head as of the same read. */
export interface EvidencePage {
  records: EvidenceRecord[];
  hasMore: boolean;
  head: StoredChainHead;
}

/**
 * The evidence chain as stored, and the keys that sign it. Records are appended only through
 * the Ledger (storage/ledger.ts) and the stores whose changes they state; this reads them.
 */
export interface EvidenceStore {
  /** Every signing key, oldest first; only the active one has its private half. */
  keys(): Promise<EvidenceKeyRow[]>;
  /** Makes `key` the only active key; earlier keys keep their public half (old records keep verifying) and lose their private one. */
  activateKey(key: { kid: string; private_key_pem: string; public_jwk: object }): Promise<void>;
  /** One record of the organization, or null. */
  get(organizationId: string, evidenceId: string): Promise<EvidenceRecord | null>;
  /** Records about one subject (an agent, a decision…), oldest first. */
  bySubject(organizationId: string, subjectId: string): Promise<EvidenceRecord[]>;
  /**
   * Up to `limit` records of the chain after position `afterSeq`, in order, whether more follow,
   * and the chain's head (its last record's seq and digest; 0 and null when empty) read in the
   * same snapshot: when `hasMore` is false, the last record returned (if any) is the head.
   */
  page(organizationId: string, afterSeq: number, limit: number): Promise<EvidencePage>;
}
