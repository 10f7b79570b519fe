import { randomBase32 } from "../base/random.js";
import { canonicalJson, sha256Hex } from "./canonical.js";
import type { EvidenceKeyring, EvidenceSignature } from "./keys.js";

/** An evidence record before sealing: exactly the members its digest covers. */
export interface UnsealedEvidenceRecord {
  /** See {@link newEvidenceId}. */
  evidence_id: string;
  organization_id: string;
  /** Position in the organization's chain: 1, 2, 3, … with no gaps. */
  seq: number;
  /** `digest` of the same organization's record `seq - 1`; null exactly when `seq` is 1. */
  prev_digest: string | null;
  /** What happened, dotted lower-case words: `decision`, `agent.activated`, `capability.issued`. */
  kind: string;
  /** Id of the thing the record is about (decision_id, agent_id, …). */
  subject_id: string;
  payload: Record<string, unknown>;
  /** ISO 8601 UTC with exactly three fractional digits, as `Date#toISOString` writes it. */
  created_at: string;
}

/** A sealed evidence record, as stored, served and exported. */
export interface EvidenceRecord extends UnsealedEvidenceRecord {
  /** See {@link computeEvidenceDigest}. */
  digest: string;
  kid: string;
  /** base64url Ed25519 signature by key `kid` over {@link evidenceSigningInput}(digest). */
  signature: string;
}

/** The members covered by the digest; a record with any other member is malformed. */
const UNSEALED_MEMBERS = [
  "evidence_id",
  "organization_id",
  "seq",
  "prev_digest",
  "kind",
  "subject_id",
  "payload",
  "created_at",
] as const satisfies readonly (keyof UnsealedEvidenceRecord)[];
const UNSEALED_MEMBER_SET = new Set<string>(UNSEALED_MEMBERS);
const SEALED_MEMBER_SET = new Set<string>([...UNSEALED_MEMBERS, "digest", "kid", "signature"]);

const HEX_DIGEST = /^[0-9a-f]{64}$/;
const KIND = /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$/;
const UTC_MILLIS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/**
 * A new evidence id: `evd_` followed by 26 lower-case Crockford base32 characters, each from 5
 * fresh random bits (130 bits in all). Random rather than time-ordered: order lives in `seq`.
 */
export function newEvidenceId(): string {
  return `evd_${randomBase32(26)}`;
}

/**
 * The record's digest: lower-case hex SHA-256 of the RFC 8785 canonical JSON of the object made
 * of exactly the {@link UnsealedEvidenceRecord} members (`digest`, `kid` and `signature` are
 * left out, so a record can be re-signed after a key rotation without changing its digest or
 * breaking the chain that links to it).
 */
export function computeEvidenceDigest(record: UnsealedEvidenceRecord): string {
  const covered: Record<string, unknown> = {};
  for (const member of UNSEALED_MEMBERS) covered[member] = record[member];
  return sha256Hex(canonicalJson(covered));
}

/** The exact bytes an evidence signature covers: the UTF-8 (here ASCII) bytes of the 64-character hex digest. */
export function evidenceSigningInput(digest: string): Uint8Array {
  return Buffer.from(digest, "utf8");
}

/**
 * Seals a record: computes its digest ({@link computeEvidenceDigest}) and signs
 * {@link evidenceSigningInput}(digest) with the keyring's active Ed25519 key.
 *
 * Throws a TypeError for a record {@link describeMalformedRecord} rejects (extra members
 * included) and a CanonicalJsonError for a payload that is not plain JSON data, so nothing the
 * offline verifier would call malformed is ever signed. Linking (`seq`, `prev_digest`) is the
 * caller's job: storage assigns them under the organization's chain lock.
 */
export function sealRecord(unsealed: UnsealedEvidenceRecord, keyring: EvidenceKeyring): EvidenceRecord {
  const digest = digestForSealing(unsealed);
  return sealed(unsealed, digest, keyring.sign(evidenceSigningInput(digest)));
}

/** Groups up to this size are signed on the event loop (see sealChain). */
const INLINE_SIGNATURES = 4;

/**
 * Seals records that follow one another in a chain, as {@link sealRecord} does: `link(i,
 * prevDigest)` builds record i from the digest of record i - 1 (null for the first). Digests
 * are computed here in order; the signatures of a large group are made on libuv's thread
 * pool, in parallel, so it costs the event loop little more than its hashing.
 */
export async function sealChain(count: number, link: (i: number, prevDigest: string | null) => UnsealedEvidenceRecord, keyring: EvidenceKeyring, firstPrev: string | null): Promise<EvidenceRecord[]> {
  const unsealed: UnsealedEvidenceRecord[] = [];
  const digests: string[] = [];
  let prev = firstPrev;
  for (let i = 0; i < count; i++) {
    const record = link(i, prev);
    prev = digestForSealing(record);
    unsealed.push(record);
    digests.push(prev);
  }
  // A few signatures cost less on the event loop than a round trip through the thread pool,
  // which queues behind request verifications; a large group goes there in parallel
  // (docs/performance.md, CPU per request).
  const signatures =
    count <= INLINE_SIGNATURES
      ? digests.map((d) => keyring.sign(evidenceSigningInput(d)))
      : await Promise.all(digests.map((d) => keyring.signOffLoop(evidenceSigningInput(d))));
  return unsealed.map((r, i) => sealed(r, digests[i]!, signatures[i]!));
}

function digestForSealing(unsealed: UnsealedEvidenceRecord): string {
  const problem = describeMalformedRecord(unsealed, "unsealed");
  if (problem) throw new TypeError(`cannot seal evidence record: ${problem}`);
  return computeEvidenceDigest(unsealed);
}

function sealed(unsealed: UnsealedEvidenceRecord, digest: string, { kid, signature }: EvidenceSignature): EvidenceRecord {
  // Spelled out rather than spread: one fixed shape and member order, and measurably cheaper.
  const { evidence_id, organization_id, seq, prev_digest, kind, subject_id, payload, created_at } = unsealed;
  return { evidence_id, organization_id, seq, prev_digest, kind, subject_id, payload, created_at, digest, kid, signature };
}

/**
 * Why `value` is not a well-formed evidence record in the given form, or null when it is.
 * Checks members and their formats only; whether the payload canonicalizes shows when the
 * digest is computed, and digest, signature and chain are the verifier's to check.
 */
export function describeMalformedRecord(value: unknown, form: "sealed" | "unsealed"): string | null {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return "not a JSON object";
  const r = value as Record<string, unknown>;
  const allowed = form === "sealed" ? SEALED_MEMBER_SET : UNSEALED_MEMBER_SET;
  const extra = Object.keys(r).find((member) => !allowed.has(member));
  if (extra !== undefined) return `unexpected member ${JSON.stringify(extra)}`;
  for (const member of ["evidence_id", "organization_id", "subject_id"] as const) {
    if (typeof r[member] !== "string" || r[member] === "") return `${member} must be a non-empty string`;
  }
  if (typeof r.seq !== "number" || !Number.isSafeInteger(r.seq) || r.seq < 1) return "seq must be an integer >= 1";
  if (r.seq === 1 && r.prev_digest !== null) return "prev_digest must be null at seq 1";
  if (r.seq > 1 && !isHexDigest(r.prev_digest)) return "prev_digest must be a lower-case hex SHA-256 after seq 1";
  if (typeof r.kind !== "string" || !KIND.test(r.kind)) return "kind must be dotted lower-case words such as agent.activated";
  if (typeof r.payload !== "object" || r.payload === null || Array.isArray(r.payload)) return "payload must be a JSON object";
  // The round trip rejects impossible dates (2026-02-30) that the pattern lets through.
  if (typeof r.created_at !== "string" || !UTC_MILLIS.test(r.created_at) || !isRoundTripDate(r.created_at)) {
    return "created_at must be ISO 8601 UTC with three fractional digits";
  }
  if (form === "sealed") {
    if (!isHexDigest(r.digest)) return "digest must be a lower-case hex SHA-256";
    if (typeof r.kid !== "string" || r.kid === "") return "kid must be a non-empty string";
    if (typeof r.signature !== "string") return "signature must be a string";
  }
  return null;
}

/** True for a lower-case hex SHA-256 digest, the form of `digest` and `prev_digest`. */
export function isHexDigest(value: unknown): value is string {
  return typeof value === "string" && HEX_DIGEST.test(value);
}

function isRoundTripDate(text: string): boolean {
  const time = Date.parse(text);
  return !Number.isNaN(time) && new Date(time).toISOString() === text;
}
