import { describe, expect, it } from "vitest";
import { computeEvidenceDigest } from "../../../src/evidence/record.js";
import type { EvidenceRecord } from "../../../src/evidence/record.js";
import { EvidenceKeyring } from "../../../src/evidence/keys.js";
import { verifyEvidenceExport } from "../../../src/evidence/verify.js";
import type { EvidenceExport, EvidenceProblem } from "../../../src/evidence/verify.js";
import { signEvidenceHead } from "../../../src/evidence/head.js";
import { buildChain, copy, createKeyRow, createKeyring, signHead } from "./chain-fixture.js";

const keyring = await createKeyring();
const chain = buildChain(keyring, 20);
const head = signHead(keyring, chain);
const exported: EvidenceExport = { records: chain, jwks: keyring.jwks(), head };

/** The problems of an export whose records are `records` (with the untouched chain's head), as [kind, seq] pairs. */
function findings(records: unknown[], jwks = exported.jwks): [string, number | undefined][] {
  return verifyEvidenceExport({ records, jwks, head }).problems.map((p: EvidenceProblem) => [p.problem, p.seq]);
}

/** [kind, seq] pairs of a whole export's problems. */
function findings2(exported: { records: unknown[]; jwks: { keys: unknown[] }; head?: unknown }): [string, number | undefined][] {
  return verifyEvidenceExport(exported).problems.map((p: EvidenceProblem) => [p.problem, p.seq]);
}

describe("verifyEvidenceExport", () => {
  it("accepts the untouched export, also after a JSON round trip through a file", () => {
    const result = verifyEvidenceExport(JSON.parse(JSON.stringify(exported)));
    expect(result).toEqual({
      ok: true,
      problems: [],
      chains: [{ organization_id: "org_test", record_count: 20, first_seq: 1, last_seq: 20, from_genesis: true, head_digest: chain[19]!.digest, head }],
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
    const result = verifyEvidenceExport({ records, jwks: exported.jwks, head });
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

    const result = verifyEvidenceExport({ records: [...chain, chain[3]], jwks: exported.jwks, head });
    expect(result.problems.map((p) => [p.problem, p.message])).toEqual([["duplicate", "a copy of the record at position 3"]]);
  });

  it("catches a chain and head fully re-signed with a forger's key only when given the trusted key set", async () => {
    const forger = await createKeyring();
    const rewritten = buildChain(forger, 20);
    const selfContained = { records: rewritten, jwks: forger.jwks(), head: signHead(forger, rewritten) };
    expect(verifyEvidenceExport(selfContained).ok).toBe(true);

    const result = verifyEvidenceExport(selfContained, { trustedJwks: keyring.jwks() });
    expect(result.ok).toBe(false);
    // Every record, and the head (first: it has no position), signed by a key outside the trusted set.
    expect(result.problems).toHaveLength(21);
    expect(new Set(result.problems.map((p) => p.problem))).toEqual(new Set(["unknown_key"]));
    expect(result.problems[0]!.message).toMatch(/^the head /);
  });

  it("catches records cut from the front (prefix_missing), one or many", () => {
    expect(findings(chain.slice(5))).toEqual([["prefix_missing", 6]]);
    expect(findings(chain.slice(1))).toEqual([["prefix_missing", 2]]);
    expect(verifyEvidenceExport({ records: chain.slice(5), jwks: exported.jwks, head }).problems[0]!.message).toMatch(/seq 1 to 5 \(5 records\) are missing/);
  });

  it("accepts an export that continues one verified before (after: the seq and digest it links to), and nothing else", () => {
    const organizationId = "org_test";
    const continues = (after: { seq: number; digest: string }) => verifyEvidenceExport({ records: chain.slice(5), jwks: exported.jwks, head }, { organizationId, after });
    const result = continues({ seq: 5, digest: chain[4]!.digest });
    expect(result.ok).toBe(true);
    expect(result.chains[0]).toMatchObject({ first_seq: 6, last_seq: 20, from_genesis: false });
    expect(continues({ seq: 5, digest: chain[3]!.digest }).problems.map((p) => [p.problem, p.seq])).toEqual([["chain_broken", 6]]);
    expect(continues({ seq: 4, digest: chain[3]!.digest }).problems.map((p) => [p.problem, p.seq])).toEqual([["prefix_missing", 6]]);
    expect(continues({ seq: 6, digest: chain[5]!.digest }).problems.map((p) => [p.problem, p.seq])).toEqual([["prefix_missing", 6]]);
    expect(() => verifyEvidenceExport(exported, { after: { seq: 5, digest: chain[4]!.digest } })).toThrow(/needs `organizationId`/);
  });

  describe("the signed head", () => {
    it("catches records cut from the end (truncated)", () => {
      const result = verifyEvidenceExport({ records: chain.slice(0, 15), jwks: exported.jwks, head });
      expect(result.ok).toBe(false);
      expect(result.problems).toEqual([
        { problem: "truncated", message: "the export ends at seq 15 but the signed head is at seq 20: seq 16 to 20 (5 records) are missing", organization_id: "org_test", seq: 20 },
      ]);
      expect(result.chains[0]!.head_digest).toBe(chain[14]!.digest);
    });

    it("catches the last record cut, and every record cut", () => {
      expect(findings(chain.slice(0, 19))).toEqual([["truncated", 20]]);
      expect(findings([])).toEqual([["truncated", 20]]);
    });

    it("reports an export without a head (head_missing), so truncation never passes silently", () => {
      const result = verifyEvidenceExport({ records: chain.slice(0, 15), jwks: exported.jwks });
      expect(result.ok).toBe(false);
      expect(result.problems.map((p) => [p.problem, p.organization_id])).toEqual([["head_missing", "org_test"]]);
      expect(result.chains[0]!.head).toBeNull();
    });

    it("catches a last record that is not the head's (head_mismatch)", async () => {
      const elsewhere = buildChain(keyring, 20);
      expect(verifyEvidenceExport({ records: chain, jwks: exported.jwks, head: signHead(keyring, elsewhere, "org_test") }).problems.map((p) => p.problem)).toEqual(["head_mismatch"]);
      // Records past the head: the head was signed before they existed, or it is not this chain's.
      const early = signHead(keyring, chain.slice(0, 12));
      expect(verifyEvidenceExport({ records: chain, jwks: exported.jwks, head: early }).problems.map((p) => [p.problem, p.seq])).toEqual([["head_mismatch", 12]]);
    });

    it("checks the head's signature and key", async () => {
      const edited = { ...head, seq: 15, digest: chain[14]!.digest };
      expect(findings2({ records: chain.slice(0, 15), jwks: exported.jwks, head: edited })).toEqual([["signature_invalid", 15]]);

      const forger = await createKeyring();
      const foreign = signHead(forger, chain.slice(0, 15));
      const result = verifyEvidenceExport({ records: chain.slice(0, 15), jwks: exported.jwks, head: foreign });
      expect(result.problems.map((p) => p.problem)).toEqual(["unknown_key"]);
      expect(result.problems[0]!.message).toContain(forger.activeKid);
    });

    it("reports a malformed head, and a head of another organization", () => {
      expect(findings2({ records: chain, jwks: exported.jwks, head: { ...head, seq: "20" } }).map(([p]) => p)).toEqual(["malformed", "head_missing"]);
      const other = signEvidenceHead({ organization_id: "org_other", seq: 0, digest: null, signed_at: head.signed_at }, keyring);
      const result = verifyEvidenceExport({ records: chain, jwks: exported.jwks, head: other }, { organizationId: "org_test" });
      expect(result.problems.map((p) => [p.problem, p.organization_id])).toEqual([["mixed_organizations", "org_other"], ["head_missing", "org_test"]]);
    });

    it("accepts one head per organization as an array", () => {
      const other = buildChain(keyring, 3, { organizationId: "org_other" });
      const heads = [head, signHead(keyring, other)];
      expect(verifyEvidenceExport({ records: [...chain, ...other], jwks: exported.jwks, head: heads }).ok).toBe(true);
      expect(verifyEvidenceExport({ records: [...chain, ...other.slice(0, 2)], jwks: exported.jwks, head: heads }).problems.map((p) => p.problem)).toEqual(["truncated"]);
    });
  });

  it("verifies records signed before and after a key rotation", async () => {
    const oldRow = await createKeyRow(true);
    const before = new EvidenceKeyring([oldRow]);
    const first = buildChain(before, 5);
    const after = new EvidenceKeyring([{ ...oldRow, active: false, private_key_pem: null }, await createKeyRow(true)]);
    const second = buildChain(after, 5, { after: first[4] });
    expect(verifyEvidenceExport({ records: [...first, ...second], jwks: after.jwks(), head: signHead(after, second) }).ok).toBe(true);
  });

  describe("several organizations", () => {
    const other = buildChain(keyring, 6, { organizationId: "org_other" });
    const interleaved = chain.flatMap((record, i) => (other[i] ? [record, other[i]] : [record]));

    it("verifies each organization's chain on its own, interleaving allowed", () => {
      const result = verifyEvidenceExport({ records: interleaved, jwks: exported.jwks, head: [head, signHead(keyring, other)] });
      expect(result.ok).toBe(true);
      expect(result.chains.map((c) => [c.organization_id, c.record_count])).toEqual([["org_test", 20], ["org_other", 6]]);
    });

    it("reports an organization without a head (head_missing)", () => {
      const result = verifyEvidenceExport({ records: interleaved, jwks: exported.jwks, head });
      expect(result.problems.map((p) => [p.problem, p.organization_id])).toEqual([["head_missing", "org_other"]]);
    });

    it("reports another organization's records as mixed_organizations when one is expected", () => {
      const result = verifyEvidenceExport({ records: interleaved, jwks: exported.jwks, head }, { organizationId: "org_test" });
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
      const result = verifyEvidenceExport({ records, jwks: exported.jwks, head });
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
      const result = verifyEvidenceExport({ records, jwks, head: signHead(keyring, records) });
      // The key set's two findings, the head (signed by the unusable key), then the record.
      expect(result.problems.map((p) => p.problem)).toEqual(["malformed", "malformed", "unknown_key", "unknown_key"]);
      expect(result.problems[0]!.index).toBeUndefined();
    });

    it("accepts an empty export whose head is at seq 0", () => {
      const empty = signHead(keyring, []);
      expect(verifyEvidenceExport({ records: [], jwks: exported.jwks, head: empty })).toEqual({ ok: true, problems: [], chains: [] });
    });
  });
});
