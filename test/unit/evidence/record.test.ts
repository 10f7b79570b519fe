import { describe, expect, it } from "vitest";
import { CanonicalJsonError, canonicalJson, sha256Hex } from "../../../src/evidence/canonical.js";
import {
  computeEvidenceDigest,
  describeMalformedRecord,
  evidenceSigningInput,
  newEvidenceId,
  sealRecord,
} from "../../../src/evidence/record.js";
import type { UnsealedEvidenceRecord } from "../../../src/evidence/record.js";
import { createKeyring } from "./chain-fixture.js";

const keyring = await createKeyring();

function unsealed(overrides: Partial<UnsealedEvidenceRecord> = {}): UnsealedEvidenceRecord {
  return {
    evidence_id: "evd_0123456789abcdefghjkmnpqrs",
    organization_id: "org_1",
    seq: 2,
    prev_digest: "a".repeat(64),
    kind: "decision",
    subject_id: "dec_1",
    payload: { outcome: "ALLOW", reason: "within_delegated_authority", amount: 12.5 },
    created_at: "2026-11-25T21:47:37.120Z",
    ...overrides,
  };
}

describe("newEvidenceId", () => {
  it("is evd_ and 26 lower-case Crockford base32 characters, fresh each time", () => {
    const ids = new Set(Array.from({ length: 1000 }, newEvidenceId));
    expect(ids.size).toBe(1000);
    for (const id of ids) expect(id).toMatch(/^evd_[0-9a-hjkmnp-tv-z]{26}$/);
  });
});

describe("sealRecord", () => {
  it("digests the canonical JSON of exactly the unsealed members and signs the digest's hex text", () => {
    const input = unsealed();
    const record = sealRecord(input, keyring);

    const { digest, kid, signature, ...covered } = record;
    expect(covered).toEqual(input);
    expect(digest).toBe(sha256Hex(canonicalJson(input)));
    expect(digest).toBe(computeEvidenceDigest(record));
    expect(kid).toBe(keyring.activeKid);
    expect(Buffer.from(evidenceSigningInput(digest)).toString("latin1")).toBe(digest);
    expect(keyring.verify(kid, new TextEncoder().encode(digest), signature)).toBe(true);
    expect(describeMalformedRecord(record, "sealed")).toBeNull();
  });

  it("gives a different digest for any change to a covered member, and the same one for any member order", () => {
    const base = computeEvidenceDigest(unsealed());
    expect(computeEvidenceDigest(unsealed({ payload: { amount: 12.5, reason: "within_delegated_authority", outcome: "ALLOW" } }))).toBe(base);
    expect(computeEvidenceDigest(unsealed({ payload: { outcome: "ALLOW", reason: "within_delegated_authority", amount: 12.51 } }))).not.toBe(base);
    expect(computeEvidenceDigest(unsealed({ seq: 3 }))).not.toBe(base);
    expect(computeEvidenceDigest(unsealed({ created_at: "2026-11-25T21:47:37.121Z" }))).not.toBe(base);
  });

  it.each<[string, Partial<UnsealedEvidenceRecord> | Record<string, unknown>, RegExp]>([
    ["a prev_digest at seq 1", { seq: 1 }, /prev_digest must be null at seq 1/],
    ["no prev_digest after seq 1", { prev_digest: null }, /prev_digest must be a lower-case hex/],
    ["an upper-case prev_digest", { prev_digest: "A".repeat(64) }, /prev_digest/],
    ["a fractional seq", { seq: 2.5 }, /seq must be an integer/],
    ["seq 0", { seq: 0, prev_digest: null }, /seq must be an integer/],
    ["a string seq (as pg returns bigint)", { seq: "2" }, /seq must be an integer/],
    ["an empty subject", { subject_id: "" }, /subject_id/],
    ["a free-text kind", { kind: "Agent Activated" }, /kind/],
    ["a payload array", { payload: [] }, /payload must be a JSON object/],
    ["microsecond created_at", { created_at: "2026-11-25T21:47:37.120123Z" }, /created_at/],
    ["offset created_at", { created_at: "2026-11-25T22:47:37.120+01:00" }, /created_at/],
    ["impossible date", { created_at: "2026-02-30T00:00:00.000Z" }, /created_at/],
    ["a member outside the digest", { decision_id: "dec_1" }, /unexpected member "decision_id"/],
    ["a sealed record", { digest: "b".repeat(64) }, /unexpected member "digest"/],
  ])("refuses %s", (_name, overrides, message) => {
    expect(() => sealRecord(unsealed(overrides as Partial<UnsealedEvidenceRecord>), keyring)).toThrow(message);
  });

  it("refuses a payload that is not plain JSON data, naming the path", () => {
    expect(() => sealRecord(unsealed({ payload: { at: new Date(0) } }), keyring)).toThrow(CanonicalJsonError);
    expect(() => sealRecord(unsealed({ payload: { nested: { gone: undefined } } }), keyring)).toThrow(/\$\.payload\.nested\.gone/);
  });

  // Its cost is a figure for `npm run bench` and docs/performance.md, not an assertion here.
  it("seals a realistic decision record without touching its input, identically every time, verifiably with its own keyring only", () => {
    const input = unsealed({
      payload: {
        outcome: "HUMAN_REVIEW",
        reason: "requires_dual_approval",
        status: "PENDING",
        intent: {
          agent_id: "agt_01hzy", action: "vendor_payment", amount: 48000, currency: "EUR", counterparty: "Acme GmbH",
          context: { po: "PO-7781", cost_center: "CC-12" }, requested_at: "2026-11-25T21:47:36.000Z", nonce: "3b1f0c9e-3d1b-4a8e-9f7e-0c6f2d7a9b11",
        },
        policy_versions: { starter: 1, payments: 4 },
      },
    });
    const snapshot = structuredClone(input);
    const deepFreeze = (v: unknown): void => {
      if (typeof v === "object" && v !== null) {
        Object.freeze(v);
        for (const x of Object.values(v)) deepFreeze(x);
      }
    };
    deepFreeze(input);

    const first = sealRecord(input, keyring);
    const second = sealRecord(input, keyring);
    expect(input).toEqual(snapshot);
    // Ed25519 signatures are deterministic and the digest depends only on content: sealing twice is one record.
    expect(second).toEqual(first);
    expect(first.digest).toMatch(/^[0-9a-f]{64}$/);
    expect(Buffer.from(first.signature, "base64url")).toHaveLength(64);
    expect(keyring.verify(first.kid, evidenceSigningInput(first.digest), first.signature)).toBe(true);
    // A one-unit change deep in the Intent is another digest, and the old signature does not cover it.
    const changed = computeEvidenceDigest({ ...input, payload: { ...input.payload, intent: { ...(input.payload.intent as object), amount: 48001 } } });
    expect(changed).not.toBe(first.digest);
    expect(keyring.verify(first.kid, evidenceSigningInput(changed), first.signature)).toBe(false);
  });
});
