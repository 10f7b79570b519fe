import { canonicalJson } from "./canonical.js";
import type { EvidenceKeyring } from "./keys.js";
import { isHexDigest } from "./record.js";

/**
 * Where an organization's evidence chain ended when the service answered: the signed head that
 * `GET /v1/evidence` returns with every page and an export carries, so that records cut from
 * the end of an export are detected (docs/architecture.md, The evidence chain).
 */
export interface UnsignedEvidenceHead {
  organization_id: string;
  /** seq of the chain's last record; 0 for an empty chain. */
  seq: number;
  /** digest of the record at `seq`; null exactly when `seq` is 0. */
  digest: string | null;
  /** When the head was read and signed: ISO 8601 UTC with three fractional digits. */
  signed_at: string;
}

/** A signed chain head, as served and exported. */
export interface EvidenceHead extends UnsignedEvidenceHead {
  /** RFC 7638 thumbprint of the evidence key that signed, as in the JWKS. */
  kid: string;
  /** base64url Ed25519 signature by key `kid` over {@link evidenceHeadSigningInput}. */
  signature: string;
}

const HEAD_MEMBERS = ["organization_id", "seq", "digest", "signed_at"] as const satisfies readonly (keyof UnsignedEvidenceHead)[];
const SIGNED_HEAD_MEMBERS = new Set<string>([...HEAD_MEMBERS, "kid", "signature"]);
const UTC_MILLIS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/**
 * The exact bytes a head signature covers: the UTF-8 bytes of the RFC 8785 canonical JSON of
 * the object made of exactly `organization_id`, `seq`, `digest` and `signed_at`, i.e.
 * `{"digest":…,"organization_id":…,"seq":…,"signed_at":…}`. It starts with `{`, so it can
 * never be the signing input of a record (64 hex characters) or of a capability token (a JWS
 * `base64url.base64url`), which the same key signs.
 */
export function evidenceHeadSigningInput(head: UnsignedEvidenceHead): Uint8Array {
  const covered: Record<string, unknown> = {};
  for (const member of HEAD_MEMBERS) covered[member] = head[member];
  return Buffer.from(canonicalJson(covered), "utf8");
}

/** Signs a head with the keyring's active key; throws a TypeError for a malformed one. */
export function signEvidenceHead(head: UnsignedEvidenceHead, keyring: EvidenceKeyring): EvidenceHead {
  const problem = describeMalformedHead(head, "unsigned");
  if (problem) throw new TypeError(`cannot sign evidence head: ${problem}`);
  const { kid, signature } = keyring.sign(evidenceHeadSigningInput(head));
  return { organization_id: head.organization_id, seq: head.seq, digest: head.digest, signed_at: head.signed_at, kid, signature };
}

/** Why `value` is not a well-formed head in the given form, or null when it is. */
export function describeMalformedHead(value: unknown, form: "signed" | "unsigned" = "signed"): string | null {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return "not a JSON object";
  const h = value as Record<string, unknown>;
  const allowed = form === "signed" ? SIGNED_HEAD_MEMBERS : new Set<string>(HEAD_MEMBERS);
  const extra = Object.keys(h).find((member) => !allowed.has(member));
  if (extra !== undefined) return `unexpected member ${JSON.stringify(extra)}`;
  if (typeof h.organization_id !== "string" || h.organization_id === "") return "organization_id must be a non-empty string";
  if (typeof h.seq !== "number" || !Number.isSafeInteger(h.seq) || h.seq < 0) return "seq must be an integer >= 0";
  if (h.seq === 0 && h.digest !== null) return "digest must be null at seq 0";
  if (h.seq > 0 && !isHexDigest(h.digest)) return "digest must be a lower-case hex SHA-256 after seq 0";
  if (typeof h.signed_at !== "string" || !UTC_MILLIS.test(h.signed_at) || new Date(Date.parse(h.signed_at)).toISOString() !== h.signed_at) {
    return "signed_at must be ISO 8601 UTC with three fractional digits";
  }
  if (form === "signed") {
    if (typeof h.kid !== "string" || h.kid === "") return "kid must be a non-empty string";
    if (typeof h.signature !== "string") return "signature must be a string";
  }
  return null;
}
