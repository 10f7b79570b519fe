import { describe, expect, it } from "vitest";
import { computeEvidenceDigest } from "../../../src/evidence/record.js";
import type { EvidenceRecord } from "../../../src/evidence/record.js";
import { EvidenceKeyring } from "../../../src/evidence/keys.js";
import { verifyEvidenceExport } from "../../../src/evidence/verify.js";
import type { EvidenceExport, EvidenceProblem } from "../../../src/evidence/verify.js";
import { buildChain, copy, createKeyRow, createKeyring } from "./chain-fixture.js";

const keyring = await createKeyring();
const chain = buildChain(keyring, 20);
const exported: EvidenceExport = { records: chain, jwks: keyring.jwks() };

/** The problems of an export whose records are `records`, as [kind, seq] pairs. */
function findings(records: unknown[], jwks = exported.jwks): [string, number | undefined][] {
  return verifyEvidenceExport({ records, jwks }).problems.map((p: EvidenceProblem) => [p.problem, p.seq]);
}

describe("verifyEvidenceExport", () => {
  it("accepts the untouched export, also after a JSON round trip through a file", () => {
    const result = verifyEvidenceExport(JSON.parse(JSON.stringify(exported)));
    expect(result).toEqual({
      ok: true,
      problems: [],
      chains: [{ organization_id: "org_test", record_count: 20, first_seq: 1, last_seq: 20, from_genesis: true, head_digest: chain[19]!.digest }],
    });
  });

  it("catches an edited payload field (digest_mismatch)", () => {
    const records = copy(chain);
    (records[9]!.payload as { amount: number }).amount = 1;
    expect(findings(records)).toEqual([["digest_mismatch", 10]]);
  });

  it("catches an edit whose digest was recomputed (signature_invalid, and the next link breaks)", () => {
    const records = copy(chain);
    records[9]!.payload.reason = "exceeds_approval_limit";
    records[9]!.digest = computeEvidenceDigest(records[9]!);
    expect(findings(records)).toEqual([["signature_invalid", 10], ["chain_broken", 11]]);
  });

  it("catches a deleted middle record (sequence_gap)", () => {
    const records = copy(chain);
    records.splice(9, 1);
    const result = verifyEvidenceExport({ records, jwks: exported.jwks });
    expect(result.problems).toEqual([
      { problem: "sequence_gap", message: "seq 10 is missing", seq: 11, index: 9, organization_id: "org_test", evidence_id: chain[10]!.evidence_id },
    ]);
  });

  it("catches two reordered records, naming just those two (out_of_order)", () => {
    const records = copy(chain);
    [records[5], records[12]] = [records[12]!, records[5]!];
    expect(findings(records)).toEqual([["out_of_order", 13], ["out_of_order", 6]]);

    const adjacent = copy(chain);
    [adjacent[3], adjacent[4]] = [adjacent[4]!, adjacent[3]!];
    expect(findings(adjacent)).toHaveLength(1);
    expect(findings(adjacent)[0]![0]).toBe("out_of_order");
  });

  it("catches a changed signature (signature_invalid)", () => {
    const records = copy(chain);
    const signature = records[4]!.signature;
    records[4]!.signature = (signature[0] === "A" ? "B" : "A") + signature.slice(1);
    expect(findings(records)).toEqual([["signature_invalid", 5]]);
  });

  it("catches a kid changed to an unknown one (unknown_key)", () => {
    const records = copy(chain);
    records[7]!.kid = "not-a-published-kid";
    expect(findings(records)).toEqual([["unknown_key", 8]]);
  });

  it("catches an inserted forgery and an inserted copy (duplicate)", () => {
    const forged = { ...copy(chain[9]!), evidence_id: "evd_forged", payload: { outcome: "ALLOW" } };
    expect(findings([...chain.slice(0, 10), forged, ...chain.slice(10)])).toEqual([["digest_mismatch", 10], ["duplicate", 10]]);

    const result = verifyEvidenceExport({ records: [...chain, chain[3]], jwks: exported.jwks });
    expect(result.problems.map((p) => [p.problem, p.message])).toEqual([["duplicate", "a copy of the record at position 3"]]);
  });

  it("catches a chain rewritten with a forger's key only when given the trusted key set", async () => {
    const forger = await createKeyring();
    const rewritten = buildChain(forger, 20);
    const selfContained = { records: rewritten, jwks: forger.jwks() };
    expect(verifyEvidenceExport(selfContained).ok).toBe(true);

    const result = verifyEvidenceExport(selfContained, { trustedJwks: keyring.jwks() });
    expect(result.problems).toHaveLength(20);
    expect(new Set(result.problems.map((p) => p.problem))).toEqual(new Set(["unknown_key"]));
  });

  it("accepts an export that starts mid-chain and says its first link is unchecked", () => {
    const result = verifyEvidenceExport({ records: chain.slice(5), jwks: exported.jwks });
    expect(result.ok).toBe(true);
    expect(result.chains[0]).toMatchObject({ first_seq: 6, last_seq: 20, from_genesis: false });
  });

  it("cannot see records cut from the end, but reports the head digest to compare", () => {
    const result = verifyEvidenceExport({ records: chain.slice(0, 15), jwks: exported.jwks });
    expect(result.ok).toBe(true);
    expect(result.chains[0]!.head_digest).toBe(chain[14]!.digest);
    expect(result.chains[0]!.head_digest).not.toBe(chain[19]!.digest);
  });

  it("verifies records signed before and after a key rotation", async () => {
    const oldRow = await createKeyRow(true);
    const before = new EvidenceKeyring([oldRow]);
    const first = buildChain(before, 5);
    const after = new EvidenceKeyring([{ ...oldRow, active: false, private_key_pem: null }, await createKeyRow(true)]);
    const second = buildChain(after, 5, { after: first[4] });
    expect(verifyEvidenceExport({ records: [...first, ...second], jwks: after.jwks() }).ok).toBe(true);
  });

  describe("several organizations", () => {
    const other = buildChain(keyring, 6, { organizationId: "org_other" });
    const interleaved = chain.flatMap((record, i) => (other[i] ? [record, other[i]] : [record]));

    it("verifies each organization's chain on its own, interleaving allowed", () => {
      const result = verifyEvidenceExport({ records: interleaved, jwks: exported.jwks });
      expect(result.ok).toBe(true);
      expect(result.chains.map((c) => [c.organization_id, c.record_count])).toEqual([["org_test", 20], ["org_other", 6]]);
    });

    it("reports another organization's records as mixed_organizations when one is expected", () => {
      const result = verifyEvidenceExport({ records: interleaved, jwks: exported.jwks }, { organizationId: "org_test" });
      expect(result.problems).toHaveLength(6);
      expect(result.problems.every((p) => p.problem === "mixed_organizations" && p.organization_id === "org_other")).toBe(true);
      expect(result.chains.map((c) => c.organization_id)).toEqual(["org_test"]);
    });
  });

  describe("malformed input", () => {
    it("reports a malformed record without losing its place in the chain", () => {
      const records: unknown[] = copy(chain);
      (records[2] as Record<string, unknown>).created_at = "yesterday";
      records.splice(5, 0, "not a record");
      const result = verifyEvidenceExport({ records, jwks: exported.jwks });
      expect(result.problems.map((p) => [p.problem, p.index])).toEqual([["malformed", 2], ["malformed", 5]]);
      expect(result.problems[0]!.message).toMatch(/created_at/);
    });

    it("reports a payload that cannot be canonicalized as malformed", () => {
      const records = copy(chain);
      records[1]!.payload.amount = Infinity; // what JSON.parse makes of 1e400
      expect(findings(records)).toEqual([["malformed", 2]]);
    });

    it("reports unusable keys in the key set, and records signed by them as unknown_key", () => {
      const jwks = { keys: [{ ...exported.jwks.keys[0]!, x: "AAAA" }, { kty: "RSA", kid: "rsa", n: "x", e: "AQAB" }, 42] };
      const records = copy(chain.slice(0, 1)) as EvidenceRecord[];
      const result = verifyEvidenceExport({ records, jwks });
      expect(result.problems.map((p) => p.problem)).toEqual(["malformed", "malformed", "unknown_key"]);
      expect(result.problems[0]!.index).toBeUndefined();
    });

    it("accepts an empty export", () => {
      expect(verifyEvidenceExport({ records: [], jwks: exported.jwks })).toEqual({ ok: true, problems: [], chains: [] });
    });
  });
});
