// Shared builders for the evidence tests: a real keyring and a real, correctly linked chain.
import { EvidenceKeyring, generateEvidenceKey } from "../../../src/evidence/keys.js";
import type { EvidenceKeyRow } from "../../../src/evidence/keys.js";
import { signEvidenceHead } from "../../../src/evidence/head.js";
import type { EvidenceHead } from "../../../src/evidence/head.js";
import { newEvidenceId, sealRecord } from "../../../src/evidence/record.js";
import type { EvidenceRecord } from "../../../src/evidence/record.js";

/** A key row as storage would hold it. */
export async function createKeyRow(active: boolean): Promise<EvidenceKeyRow> {
  const key = await generateEvidenceKey();
  return { kid: key.kid, private_key_pem: key.privateKeyPem, public_jwk: key.publicJwk, active };
}

/** A keyring with one fresh active key. */
export async function createKeyring(): Promise<EvidenceKeyring> {
  return new EvidenceKeyring([await createKeyRow(true)]);
}

const KINDS = ["decision", "agent.activated", "capability.issued", "capability.consumed"] as const;

/**
 * Seals `count` linked records of one organization, starting at seq 1 unless `after` (the
 * last record of an earlier part of the chain) is given.
 */
export function buildChain(
  keyring: EvidenceKeyring,
  count: number,
  { organizationId = "org_test", after }: { organizationId?: string; after?: EvidenceRecord } = {},
): EvidenceRecord[] {
  const records: EvidenceRecord[] = [];
  let previous = after;
  const start = Date.parse("2026-11-25T21:47:37.120Z");
  for (let i = 0; i < count; i++) {
    const seq = (previous?.seq ?? 0) + 1;
    const record = sealRecord(
      {
        evidence_id: newEvidenceId(),
        organization_id: organizationId,
        seq,
        prev_digest: previous?.digest ?? null,
        kind: KINDS[seq % KINDS.length]!,
        subject_id: `dec_${seq}`,
        payload: {
          outcome: seq % 3 === 0 ? "HUMAN_REVIEW" : "ALLOW",
          reason: "within_delegated_authority",
          amount: 1250.5 * seq,
          intent: { action: "vendor_payment", currency: "EUR", counterparty: "Acme GmbH – Zürich", context: { po: `PO-${seq}` } },
          tags: ["a", "b"],
        },
        created_at: new Date(start + seq * 1000).toISOString(),
      },
      keyring,
    );
    records.push(record);
    previous = record;
  }
  return records;
}

/** The signed head of a chain that ends with the last of `records` (seq 0 when there are none). */
export function signHead(keyring: EvidenceKeyring, records: readonly EvidenceRecord[], organizationId = records[0]?.organization_id ?? "org_test"): EvidenceHead {
  const last = records.filter((r) => r.organization_id === organizationId).at(-1);
  return signEvidenceHead({ organization_id: organizationId, seq: last?.seq ?? 0, digest: last?.digest ?? null, signed_at: "2026-11-25T22:00:00.000Z" }, keyring);
}

/** A deep copy, so each tampering test starts from the untouched chain. */
export function copy<T>(value: T): T {
  return structuredClone(value);
}
