import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EvidenceLog } from "../../src/domain/evidence-log.js";
import { generateEvidenceKey } from "../../src/evidence/keys.js";
import type { EvidenceRecord } from "../../src/evidence/record.js";
import { verifyEvidenceExport } from "../../src/evidence/verify.js";
import type { EvidenceStore } from "../../src/storage/evidence.js";
import { type Database } from "../../src/storage/postgres/database.js";
import { EvidenceChain } from "../../src/storage/postgres/evidence-chain.js";
import { newOrganizations, storeDatabase } from "../support/stores.js";

/*
 * The EvidenceStore contract (src/storage/evidence.ts) on real Postgres: keys oldest first with
 * only the active one holding its private half, a key activation that leaves exactly one active
 * key and old records verifying, reads scoped to their organization (get, bySubject oldest first),
 * and pages in chain order, bounded, telling whether more follow, with the head read in the same
 * snapshot as the records, also while another writer appends. Records are appended through the
 * evidence chain the Ledger and stores use; no service runs on this database meanwhile.
 */

let db: Database;
let store: EvidenceStore;
let log: EvidenceLog;
let chain: EvidenceChain;
const orgs: string[] = [];

beforeAll(async () => {
  // The service also makes the first evidence key.
  const made = await storeDatabase("evidence_store", (svc) => newOrganizations(svc, 5));
  ({ db, evidence: store, log, chain } = made);
  orgs.push(...made.fixtures);
});

afterAll(async () => {
  await db?.close();
});

/** Appends one record per subject to the organization's chain, in one transaction. */
function append(organizationId: string, subjects: string[], kind = "test.record"): Promise<EvidenceRecord[]> {
  return db.transaction((tx) => chain.append(tx, subjects.map((subjectId, i) => ({ organizationId, kind, subjectId, payload: { i, subjectId } }))));
}

/** The whole chain of the organization through `page`, `limit` records at a time. */
async function wholeChain(organizationId: string, limit: number): Promise<EvidenceRecord[]> {
  const records: EvidenceRecord[] = [];
  for (let after = 0; ; ) {
    const page = await store.page(organizationId, after, limit);
    expect(page.records.length).toBeLessThanOrEqual(limit);
    records.push(...page.records);
    if (!page.hasMore) return records;
    after = page.records[page.records.length - 1]!.seq;
  }
}

describe("PostgresEvidenceStore", () => {
  it("reads one record of its organization by id, null for an unknown id or another organization's", async () => {
    const [written] = await append(orgs[0]!, ["subject-a"]);
    const read = await store.get(orgs[0]!, written!.evidence_id);
    expect(read).toEqual(written);
    expect(read).toMatchObject({ organization_id: orgs[0], kind: "test.record", subject_id: "subject-a", payload: { i: 0, subjectId: "subject-a" } });
    expect(await store.get(orgs[1]!, written!.evidence_id)).toBeNull();
    expect(await store.get(orgs[0]!, "evd_unknown")).toBeNull();
  });

  it("reads the records about one subject oldest first, only the organization's", async () => {
    const subject = "agent-subject";
    const first = await append(orgs[0]!, [subject, "other", subject]);
    const second = await append(orgs[0]!, [subject]);
    await append(orgs[1]!, [subject]);
    const about = await store.bySubject(orgs[0]!, subject);
    expect(about.map((r) => r.evidence_id)).toEqual([first[0]!, first[2]!, second[0]!].map((r) => r.evidence_id));
    expect(about.map((r) => r.seq)).toEqual([...about.map((r) => r.seq)].sort((a, b) => a - b));
    expect(await store.bySubject(orgs[0]!, "nobody")).toEqual([]);
  });

  it("pages an empty chain as no records, no more, head 0 and null", async () => {
    expect(await store.page(orgs[4]!, 0, 10)).toEqual({ records: [], hasMore: false, head: { seq: 0, digest: null } });
  });

  it("pages a chain in order, at most `limit` at a time, after `afterSeq`, with hasMore, and the head as the last record when nothing more follows", async () => {
    const org = orgs[2]!;
    const written = await append(org, Array.from({ length: 7 }, (_, i) => `s${i}`));
    const all = await store.page(org, 0, 100);
    expect(all.hasMore).toBe(false);
    expect(all.records).toEqual(written);
    expect(all.head).toEqual({ seq: written[6]!.seq, digest: written[6]!.digest });
    const firstThree = await store.page(org, 0, 3);
    expect(firstThree.records.map((r) => r.seq)).toEqual([1, 2, 3]);
    expect(firstThree.hasMore).toBe(true);
    expect(firstThree.head).toEqual(all.head);
    // Exactly at the end: no more.
    expect((await store.page(org, 4, 3)).hasMore).toBe(false);
    expect((await store.page(org, 4, 3)).records.map((r) => r.seq)).toEqual([5, 6, 7]);
    expect(await store.page(org, 7, 3)).toEqual({ records: [], hasMore: false, head: all.head });
    expect((await wholeChain(org, 2)).map((r) => r.evidence_id)).toEqual(written.map((r) => r.evidence_id));
    // Another organization's chain is not this one's.
    expect((await store.page(orgs[3]!, 0, 100)).records.every((r) => r.organization_id === orgs[3])).toBe(true);
  });

  it("reads a page and the head in one snapshot while another writer appends: a last page always ends at the head it reports", async () => {
    const org = orgs[3]!;
    let appending = true;
    const writer = (async () => {
      for (let i = 0; i < 30; i++) await append(org, [`w${i}a`, `w${i}b`]);
      appending = false;
    })();
    let checked = 0;
    let after = 0;
    while (appending || checked === 0) {
      const page = await store.page(org, after, 3);
      const last = page.records[page.records.length - 1];
      if (!page.hasMore && last) expect(page.head).toEqual({ seq: last.seq, digest: last.digest });
      if (last) expect(page.head.seq).toBeGreaterThanOrEqual(last.seq);
      // Appends come two at a time, so a consistent head is always even.
      expect(page.head.seq % 2).toBe(0);
      if (last) after = last.seq;
      checked++;
    }
    await writer;
    const records = await wholeChain(org, 7);
    expect(records.map((r) => r.seq)).toEqual(records.map((_, i) => i + 1));
    expect(records).toHaveLength(60);
  });

  it("lists the keys oldest first, only the active one with its private half; activating a key makes it the only active one and old records keep verifying", async () => {
    const before = await store.keys();
    expect(before.filter((k) => k.active)).toHaveLength(1);
    expect(before.filter((k) => !k.active).every((k) => !k.private_key_pem)).toBe(true);
    expect(before.find((k) => k.active)!.private_key_pem).toMatch(/BEGIN PRIVATE KEY/);

    const org = orgs[1]!;
    await append(org, ["signed-by-the-old-key"]);
    const next = await generateEvidenceKey();
    await store.activateKey({ kid: next.kid, private_key_pem: next.privateKeyPem, public_jwk: next.publicJwk });
    const after = await store.keys();
    expect(after.map((k) => k.kid)).toEqual([...before.map((k) => k.kid), next.kid]);
    expect(after.map((k) => k.active)).toEqual([...before.map(() => false), true]);
    expect(after.slice(0, -1).every((k) => !k.private_key_pem && typeof k.public_jwk.x === "string")).toBe(true);
    expect(after[after.length - 1]).toMatchObject({ kid: next.kid, private_key_pem: next.privateKeyPem, public_jwk: next.publicJwk });

    // Records signed before keep verifying with the published (public) keys, beside ones signed after.
    const signer = new EvidenceChain(db, () => log.keys);
    await log.rotateKey();
    await db.transaction((tx) => signer.append(tx, [{ organizationId: org, kind: "test.record", subjectId: "signed-by-the-new-key", payload: {} }]));
    const records = await wholeChain(org, 100);
    expect(new Set(records.map((r) => r.kid)).size).toBe(2);
    const verification = verifyEvidenceExport({ records, jwks: (await log.jwks()) as never }, { organizationId: org });
    expect(verification.problems.filter((p) => p.problem !== ("head_missing" as string))).toEqual([]);
  });
});
