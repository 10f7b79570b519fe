import { toJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { timestampDate, ValueSchema } from "@bufbuild/protobuf/wkt";
import canonicalize from "canonicalize";
import { Outcome, ReviewResolution, type Decision } from "../../src/gen/mandate/v1/decisions_pb.js";
import type { EvidenceHead, EvidenceRecord } from "../../src/gen/mandate/v1/evidence_pb.js";

/*
 * The check `mandate evidence verify` makes of one record (src/evidence/verify.ts), done in the
 * browser with WebCrypto so that nothing the service says about a record is taken on trust:
 * the record's eight covered members are put back in the form they were sealed in (the /v1
 * names and values, docs/architecture.md "The evidence chain"), their RFC 8785 canonical JSON is
 * hashed with SHA-256 and must give the record's `digest`, and the Ed25519 signature by key
 * `kid` of the service's JWKS must verify over the UTF-8 bytes of that hex digest.
 */

/** The members a record's digest covers, in the form they were sealed in (src/evidence/record.ts). */
export interface SealedMembers {
  evidence_id: string;
  organization_id: string;
  seq: number;
  prev_digest: JsonValue;
  kind: string;
  subject_id: string;
  payload: JsonObject;
  created_at: string;
}

/** The outcome of checking one record: verified, or why not. */
export type SignatureCheck =
  | { ok: true; digest: string; kid: string; canonical: string }
  | { ok: false; reason: string; canonical?: string };

/** A published JWKS (`/.well-known/jwks.json`); nothing in it is assumed well-formed. */
export interface KeySet {
  keys: unknown[];
}

/** A record's prev_digest as JSON: the previous record's digest, or null at seq 1. */
export function prevDigestOf(r: EvidenceRecord): JsonValue {
  return r.prevDigest ? toJson(ValueSchema, r.prevDigest) : null;
}

/** The covered members of `r` as the service sealed them: seq a number, created_at ISO 8601 with milliseconds. */
export function sealedMembers(r: EvidenceRecord): SealedMembers {
  if (r.seq > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error(`seq ${r.seq} is not a chain position`);
  if (!r.createdAt) throw new Error("the record has no created_at");
  return {
    evidence_id: r.evidenceId,
    organization_id: r.organizationId,
    seq: Number(r.seq),
    prev_digest: prevDigestOf(r),
    kind: r.kind,
    subject_id: r.subjectId,
    payload: r.payload ?? {},
    created_at: timestampDate(r.createdAt).toISOString(),
  };
}

/** Lower-case hex SHA-256 of `text`'s UTF-8 bytes, the digest format of evidence. */
async function sha256Hex(text: string): Promise<string> {
  const hash = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));
  return Array.from(hash, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The bytes of unpadded base64url `text`, or null when it is not that. */
function base64UrlBytes(text: string): Uint8Array<ArrayBuffer> | null {
  if (!/^[A-Za-z0-9_-]*$/.test(text) || text.length % 4 === 1) return null;
  const binary = atob(text.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - (text.length % 4)) % 4));
  return Uint8Array.from(binary, (c) => c.charCodeAt(0));
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Verifies `signature` (base64url Ed25519) by key `kid` of `jwks` over the UTF-8 bytes of
 * `signed` (called `what` in a reason): null when it verifies, else why not.
 */
async function verifyEd25519(jwks: KeySet, kid: string, signature: string, signed: string, what: string): Promise<string | null> {
  const jwk = jwks.keys.find((k) => isObject(k) && k.kid === kid);
  if (!isObject(jwk)) return `it names key ${kid || "(none)"}, which the service's JWKS does not hold`;
  if (jwk.kty !== "OKP" || jwk.crv !== "Ed25519" || typeof jwk.x !== "string") return `key ${kid} of the JWKS is not an Ed25519 public key`;
  const bytes = base64UrlBytes(signature);
  if (bytes === null || bytes.length !== 64) return "the signature is not 64 bytes of base64url";
  let key: CryptoKey;
  try {
    // Only the key members: the JWK's alg and use ("EdDSA", "sig") say nothing WebCrypto needs.
    key = await crypto.subtle.importKey("jwk", { kty: "OKP", crv: "Ed25519", x: jwk.x }, { name: "Ed25519" }, false, ["verify"]);
  } catch (error) {
    return `key ${kid} cannot be imported (${(error as Error).message})`;
  }
  const valid = await crypto.subtle.verify({ name: "Ed25519" }, key, bytes, new TextEncoder().encode(signed));
  return valid ? null : `the signature is not key ${kid}'s signature of ${what}`;
}

/**
 * Verifies a signed chain head (ListEvidence's `head`): Ed25519 by key `kid` over the RFC 8785
 * canonical JSON of exactly organization_id, seq, digest and signed_at as /v1 writes them
 * (src/evidence/head.ts). "" when it verifies, else why not.
 */
export async function checkHeadSignature(head: EvidenceHead, jwks: KeySet): Promise<string> {
  if (!head.signedAt) return "the head has no signed_at";
  const covered = {
    organization_id: head.organizationId,
    seq: Number(head.seq),
    digest: head.digest ? toJson(ValueSchema, head.digest) : null,
    signed_at: timestampDate(head.signedAt).toISOString(),
  };
  return (await verifyEd25519(jwks, head.kid, head.signature, canonicalize(covered)!, "the head")) ?? "";
}

/**
 * Recomputes `record`'s digest and verifies its signature against `jwks` (the service's
 * published keys, fetched separately from the record). Never throws: every failure is a reason.
 */
export async function checkEvidenceSignature(record: EvidenceRecord, jwks: KeySet): Promise<SignatureCheck> {
  let canonical: string;
  try {
    const text = canonicalize(sealedMembers(record));
    if (text === undefined) return { ok: false, reason: "the record has no canonical JSON form" };
    canonical = text;
  } catch (error) {
    return { ok: false, reason: `the record cannot be put in canonical form: ${(error as Error).message}` };
  }
  const digest = await sha256Hex(canonical);
  if (digest !== record.digest) {
    return { ok: false, canonical, reason: `the record's content hashes to ${digest}, not to the signed digest ${record.digest || "(none)"}` };
  }
  const refused = await verifyEd25519(jwks, record.kid, record.signature, record.digest, "the digest");
  if (refused) return { ok: false, canonical, reason: refused };
  return { ok: true, digest, kid: record.kid, canonical };
}

/**
 * What the decision as GetDecision shows it and its signed `decision` record disagree on, as
 * field names; empty when they agree. The signature covers only the record, so this is what ties
 * the facts on the page to it.
 */
export function decisionDisagreements(d: Decision, r: EvidenceRecord): string[] {
  const p = r.payload ?? {};
  const same = (a: unknown, b: unknown) => canonicalize(a ?? null) === canonicalize(b ?? null);
  const checks: [string, boolean][] = [
    ["kind", r.kind === "decision"],
    ["decision_id", r.subjectId === d.decisionId && p.decision_id === d.decisionId],
    ["outcome", p.outcome === Outcome[d.outcome]],
    ["reason", p.reason === d.reason],
    ["agent_id", p.agent_id === d.agentId],
    ["intent", same(p.intent, d.intent)],
    ["policy_versions", same(p.policy_versions, d.policyVersions)],
    ["graph_version", (p.graph_version ?? 0) === d.graphVersion],
    ["bundle_digest", (p.bundle_digest ?? "") === d.bundleDigest],
    ["evaluated_at", d.evaluatedAt !== undefined && p.evaluated_at === timestampDate(d.evaluatedAt).toISOString()],
  ];
  return checks.filter(([, ok]) => !ok).map(([name]) => name);
}

/**
 * What a resolved review as GetDecision shows it (its resolution and approvals) and its signed
 * records disagree on, as field names; empty when they agree. `records` are the review's records
 * in chain order: each `decision.approval_recorded`, then the `decision.resolved` that ended it.
 */
export function reviewDisagreements(d: Decision, records: readonly EvidenceRecord[]): string[] {
  const r = d.resolution;
  const resolved = records.find((x) => x.kind === "decision.resolved");
  if (!r || !resolved) return ["resolution"];
  const p = resolved.payload ?? {};
  // The approvals as signed: every approval recorded before, and the resolving one when it approved.
  const signed = records.filter((x) => x.kind === "decision.approval_recorded" || (x === resolved && p.resolution === "approved")).map((x) => [x.payload?.by, x.payload?.reason]);
  const checks: [string, boolean][] = [
    ["decision_id", resolved.subjectId === d.decisionId && p.decision_id === d.decisionId],
    ["resolution", p.resolution === (r.resolution === ReviewResolution.APPROVED ? "approved" : r.resolution === ReviewResolution.REJECTED ? "rejected" : "")],
    ["resolved_by", p.by === r.resolvedBy],
    ["note", p.reason === r.reason],
    ["status", p.status === "RESOLVED"],
    ["approvals", canonicalize(signed) === canonicalize(d.approvals.map((a) => [a.resolvedBy, a.reason]))],
  ];
  return checks.filter(([, ok]) => !ok).map(([name]) => name);
}
