import type { KeyObject } from "node:crypto";
import { CanonicalJsonError } from "./canonical.js";
import { describeMalformedHead, evidenceHeadSigningInput } from "./head.js";
import type { EvidenceHead } from "./head.js";
import { importEd25519PublicJwk, verifyEd25519 } from "./keys.js";
import type { EvidencePublicJwk } from "./keys.js";
import { computeEvidenceDigest, describeMalformedRecord, evidenceSigningInput, isHexDigest } from "./record.js";
import type { EvidenceRecord } from "./record.js";

/**
 * An evidence export as the service produces it: records (any order of organizations), the
 * JWKS, and the signed head of the organization's chain as of the last page read (or one head
 * per organization, as an array, for an export that holds several).
 */
export interface EvidenceExport {
  records: EvidenceRecord[];
  jwks: { keys: EvidencePublicJwk[] };
  head: EvidenceHead | EvidenceHead[];
}

/**
 * An export as read from a file: nothing about its records or keys is trusted, and `jwks` may
 * be absent when {@link EvidenceVerifyOptions.trustedJwks} supplies the keys.
 */
export interface UntrustedEvidenceExport {
  records: readonly unknown[];
  jwks?: { keys: readonly unknown[] };
  /** A signed head, or an array of them; absent, every chain is reported `head_missing`. */
  head?: unknown;
}

/** Options for {@link verifyEvidenceExport}. */
export interface EvidenceVerifyOptions {
  /**
   * Keys to check signatures against instead of the export's own `jwks`, normally the
   * service's published /.well-known/jwks.json obtained separately. Without it a forger who
   * rewrites a whole export and adds their own key to it passes: the export's keys prove
   * internal consistency only.
   */
  trustedJwks?: { keys: readonly unknown[] };
  /** The one organization the export is expected to hold; any other is `mixed_organizations`. */
  organizationId?: string;
  /**
   * The export continues that organization's chain, verified before up to `seq`, whose record
   * there had `digest`: the export must start at `seq + 1` and link to `digest`. Without it every
   * chain must start at seq 1, or `prefix_missing`: records deleted from the front of an export
   * are caught as those cut from its end are. Needs `organizationId`.
   */
  after?: { seq: number; digest: string };
}

/** What can be wrong with an export, from one record's integrity to the shape of a chain. */
export type EvidenceProblemKind =
  | "digest_mismatch"
  | "signature_invalid"
  | "unknown_key"
  | "chain_broken"
  | "sequence_gap"
  | "out_of_order"
  | "duplicate"
  | "mixed_organizations"
  | "malformed"
  /** The chain does not start at seq 1 (or right after `after.seq`): records were cut from its front. */
  | "prefix_missing"
  /** The chain has no signed head in the export, so records cut from its end could not be seen. */
  | "head_missing"
  /** The chain ends before its signed head's seq: records were cut from the end. */
  | "truncated"
  /** The chain's last record is past the head's seq, or at it with another digest. */
  | "head_mismatch";

/** One finding; the identifying members are present whenever the record had them readable. */
export interface EvidenceProblem {
  problem: EvidenceProblemKind;
  message: string;
  evidence_id?: string;
  organization_id?: string;
  seq?: number;
  /** Position in `records`; absent for problems with the key set. */
  index?: number;
}

/** One organization's chain as found in the export, for the human summary. */
export interface EvidenceChainSummary {
  organization_id: string;
  record_count: number;
  first_seq: number;
  last_seq: number;
  /** True when the chain starts at seq 1; else it continues from `after` (or `prefix_missing` was reported). */
  from_genesis: boolean;
  /**
   * Digest of the last record (`digest` as stored); with a signed head, it must be the head's
   * digest (else head_mismatch).
   */
  head_digest: string | null;
  /** The export's well-formed signed head of this organization, or null when it has none. */
  head: EvidenceHead | null;
}

/** The verdict: `ok` exactly when `problems` is empty. */
export interface EvidenceVerification {
  ok: boolean;
  /** Key-set problems first, then by position in `records`. */
  problems: EvidenceProblem[];
  chains: EvidenceChainSummary[];
}

/** What a chain check needs of a record; `undefined` digests are unreadable and skip link checks. */
interface Link {
  index: number;
  evidence_id: string | undefined;
  seq: number;
  digest: string | undefined;
  prev_digest: string | null | undefined;
}

/** A usable public key, or why the kid cannot verify anything. */
type KeyEntry = { key: KeyObject } | { unusable: string };

/**
 * Verifies an evidence export offline, with no access to the service.
 *
 * Every record is checked on its own (well-formed, digest recomputed from its members, Ed25519
 * signature by a key of the key set) and then in its organization's chain: records are
 * grouped by organization_id, so an export may hold several organizations (each a chain of its
 * own, interleaving allowed) unless `options.organizationId` pins one. Within a chain the
 * sequence numbers must run without gaps or repeats from the first record's seq, each
 * prev_digest must equal the previous record's digest, and the export must list them in seq
 * order (the records reported out_of_order are the fewest that would have to move).
 *
 * This detects an edited record (digest_mismatch, or signature_invalid if the digest was
 * recomputed, plus chain_broken after it), a deleted one (sequence_gap), an inserted or copied
 * one (duplicate, or a broken link or signature), reordered ones (out_of_order) and one signed
 * by a key outside the key set (unknown_key).
 *
 * Each chain must end at its organization's signed head (`exported.head`: one head, or an array
 * of heads): the head's signature must verify with a key of the key set (else unknown_key or
 * signature_invalid), and the chain's last record must be at the head's seq with the head's
 * digest. Records cut from the end are `truncated`; records past the head, or another last
 * record, `head_mismatch`; a chain without a head `head_missing`, so a truncation can never
 * pass silently. It cannot check the link of a chain that starts mid-way: see
 * {@link EvidenceChainSummary}.
 *
 * Which keys to trust is the caller's decision: `options.trustedJwks`, else the export's own
 * `jwks`, which proves internal consistency only (a forger who re-signs every record and the
 * head replaces it too). `mandate evidence verify` never runs on unpinned export keys.
 */
export function verifyEvidenceExport(
  exported: UntrustedEvidenceExport,
  options: EvidenceVerifyOptions = {},
): EvidenceVerification {
  if (options.after && options.organizationId === undefined) throw new TypeError("verifyEvidenceExport: `after` needs `organizationId`");
  const problems: EvidenceProblem[] = [];
  const keys = importKeySet(options.trustedJwks ?? exported.jwks ?? { keys: [] }, problems);
  const heads = checkHeads(exported.head, keys, options.organizationId, problems);
  // Per organization: its links in export order, and the same links by seq to spot repeats.
  const chains = new Map<string, { links: Link[]; bySeq: Map<number, Link> }>();
  const ids = new Map<string, number>();

  exported.records.forEach((value, index) => {
    const r = (typeof value === "object" && value !== null ? value : {}) as Record<string, unknown>;
    const organization = typeof r.organization_id === "string" && r.organization_id !== "" ? r.organization_id : undefined;
    const link: Link = {
      index,
      evidence_id: typeof r.evidence_id === "string" ? r.evidence_id : undefined,
      seq: Number.isSafeInteger(r.seq) && (r.seq as number) >= 1 ? (r.seq as number) : 0,
      digest: isHexDigest(r.digest) ? r.digest : undefined,
      prev_digest: r.prev_digest === null || isHexDigest(r.prev_digest) ? r.prev_digest : undefined,
    };
    const report = (problem: EvidenceProblemKind, message: string): void => {
      problems.push({ problem, message, ...identify(link, organization) });
    };

    if (options.organizationId !== undefined && organization !== undefined && organization !== options.organizationId) {
      report("mixed_organizations", `belongs to ${organization}, not to ${options.organizationId}`);
      return;
    }
    const malformed = describeMalformedRecord(value, "sealed");
    if (malformed) report("malformed", malformed);
    else checkIntegrity(value as EvidenceRecord, keys, report);

    // A record whose place in a chain is unreadable cannot take part in the chain checks.
    if (organization === undefined || link.seq === 0) return;
    const chain = chains.get(organization) ?? { links: [], bySeq: new Map<number, Link>() };
    chains.set(organization, chain);
    const sameSeq = chain.bySeq.get(link.seq);
    const sameId = link.evidence_id === undefined ? undefined : ids.get(link.evidence_id);
    if (sameSeq) {
      report("duplicate", link.digest !== undefined && sameSeq.digest === link.digest
        ? `a copy of the record at position ${sameSeq.index}`
        : `seq ${link.seq} is also claimed by a different record at position ${sameSeq.index}`);
      return;
    }
    if (sameId !== undefined) {
      report("duplicate", `evidence_id ${link.evidence_id} is also used by the record at position ${sameId}`);
      return;
    }
    chain.bySeq.set(link.seq, link);
    chain.links.push(link);
    if (link.evidence_id !== undefined) ids.set(link.evidence_id, index);
  });

  const summaries = [...chains].map(([organization, { links }]) => checkChain(organization, links, heads.get(organization) ?? null, organization === options.organizationId ? options.after : undefined, problems),
  );
  // A head whose organization has no record here: the export lost every record up to it.
  for (const [organization, head] of heads) {
    if (!chains.has(organization) && head.seq > 0) {
      problems.push({ problem: "truncated", message: `the export holds no record but the signed head is at seq ${head.seq}`, organization_id: organization, seq: head.seq });
    }
  }
  // Stable sort: within one position, integrity findings stay ahead of chain findings.
  problems.sort((a, b) => (a.index ?? -1) - (b.index ?? -1));
  return { ok: problems.length === 0, problems, chains: summaries };
}

/** Recomputes the digest and checks the signature of one well-formed record. */
function checkIntegrity(
  record: EvidenceRecord,
  keys: ReadonlyMap<string, KeyEntry>,
  report: (problem: EvidenceProblemKind, message: string) => void,
): void {
  let digest: string;
  try {
    digest = computeEvidenceDigest(record);
  } catch (error) {
    if (!(error instanceof CanonicalJsonError)) throw error;
    report("malformed", error.message);
    return;
  }
  if (digest !== record.digest) {
    report("digest_mismatch", `content hashes to ${digest}, the record says ${record.digest}`);
  }
  const entry = keys.get(record.kid);
  if (entry === undefined) {
    report("unknown_key", `signed with kid ${record.kid}, which is not in the key set`);
  } else if ("unusable" in entry) {
    report("unknown_key", `signed with kid ${record.kid}, which cannot verify: ${entry.unusable}`);
  } else if (!verifyEd25519(entry.key, evidenceSigningInput(record.digest), record.signature)) {
    report("signature_invalid", `the signature is not kid ${record.kid}'s signature of the digest`);
  }
}

/**
 * Reads the export's heads (one, or an array), checks each one's form and signature, and
 * returns the well-formed ones by organization (a head of an unexpected organization is
 * reported and dropped). A head whose signature fails is still returned: its claims are then
 * checked too, so one problem does not hide another.
 */
function checkHeads(
  value: unknown,
  keys: ReadonlyMap<string, KeyEntry>,
  expectedOrganization: string | undefined,
  problems: EvidenceProblem[],
): Map<string, EvidenceHead> {
  const heads = new Map<string, EvidenceHead>();
  if (value === undefined || value === null) return heads;
  const list = Array.isArray(value) ? value : [value];
  list.forEach((candidate, i) => {
    const label = Array.isArray(value) ? `head[${i}]` : "the head";
    const malformed = describeMalformedHead(candidate);
    if (malformed) {
      problems.push({ problem: "malformed", message: `${label}: ${malformed}` });
      return;
    }
    const head = candidate as EvidenceHead;
    const about = { organization_id: head.organization_id, seq: head.seq };
    if (expectedOrganization !== undefined && head.organization_id !== expectedOrganization) {
      problems.push({ problem: "mixed_organizations", message: `${label} belongs to ${head.organization_id}, not to ${expectedOrganization}`, ...about });
      return;
    }
    if (heads.has(head.organization_id)) {
      problems.push({ problem: "duplicate", message: `${label} is a second head of ${head.organization_id}`, ...about });
      return;
    }
    const entry = keys.get(head.kid);
    if (entry === undefined) {
      problems.push({ problem: "unknown_key", message: `${label} is signed with kid ${head.kid}, which is not in the key set`, ...about });
    } else if ("unusable" in entry) {
      problems.push({ problem: "unknown_key", message: `${label} is signed with kid ${head.kid}, which cannot verify: ${entry.unusable}`, ...about });
    } else if (!verifyEd25519(entry.key, evidenceHeadSigningInput(head), head.signature)) {
      problems.push({ problem: "signature_invalid", message: `${label}'s signature is not kid ${head.kid}'s signature of its members`, ...about });
    }
    heads.set(head.organization_id, head);
  });
  return heads;
}

/** Checks one organization's links (export order, no repeats) against its head, and summarises the chain. */
function checkChain(
  organization: string,
  links: readonly Link[],
  head: EvidenceHead | null,
  after: EvidenceVerifyOptions["after"],
  problems: EvidenceProblem[],
): EvidenceChainSummary {
  const report = (link: Link, problem: EvidenceProblemKind, message: string): void => {
    problems.push({ problem, message, ...identify(link, organization) });
  };

  const inPlace = longestIncreasingRun(links.map((link) => link.seq));
  const maxBefore: number[] = [];
  const minAfter: number[] = [];
  links.forEach((link, i) => (maxBefore[i] = Math.max(maxBefore[i - 1] ?? 0, link.seq)));
  for (let i = links.length - 1; i >= 0; i--) minAfter[i] = Math.min(minAfter[i + 1] ?? Infinity, links[i]!.seq);
  links.forEach((link, i) => {
    if (inPlace.has(i)) return;
    const earlier = maxBefore[i - 1] ?? 0;
    report(link, "out_of_order", earlier > link.seq
      ? `seq ${link.seq} comes after seq ${earlier} in the export`
      : `seq ${link.seq} comes before seq ${minAfter[i + 1]} in the export`);
  });

  const sorted = [...links].sort((a, b) => a.seq - b.seq);
  for (let i = 1; i < sorted.length; i++) {
    const previous = sorted[i - 1]!;
    const link = sorted[i]!;
    if (link.seq !== previous.seq + 1) {
      const missing = link.seq - previous.seq - 1;
      report(link, "sequence_gap", missing === 1
        ? `seq ${previous.seq + 1} is missing`
        : `seq ${previous.seq + 1} to ${link.seq - 1} (${missing} records) are missing`);
    } else if (previous.digest !== undefined && link.prev_digest !== undefined && link.prev_digest !== previous.digest) {
      report(link, "chain_broken", `prev_digest ${link.prev_digest} is not the digest of seq ${previous.seq} (${previous.digest})`);
    }
  }

  const first = sorted[0]!;
  const last = sorted[sorted.length - 1]!;
  const start = (after?.seq ?? 0) + 1;
  if (first.seq > start) {
    const missing = first.seq - start;
    problems.push({
      problem: "prefix_missing",
      message: `the chain starts at seq ${first.seq}: ${missing === 1 ? `seq ${start} is missing` : `seq ${start} to ${first.seq - 1} (${missing} records) are missing`}${after ? "" : " (an export that continues one verified before needs the seq and digest it continues from)"}`,
      ...identify(first, organization),
    });
  } else if (after && first.seq < start) {
    problems.push({ problem: "prefix_missing", message: `the chain starts at seq ${first.seq}, not after seq ${after.seq} as given`, ...identify(first, organization) });
  } else if (after && first.prev_digest !== undefined && first.prev_digest !== after.digest) {
    report(first, "chain_broken", `prev_digest ${first.prev_digest} is not the digest given for seq ${after.seq} (${after.digest})`);
  }
  if (head === null) {
    problems.push({
      problem: "head_missing",
      message: "the export carries no signed head of this organization's chain, so records cut from its end would go unnoticed",
      organization_id: organization,
    });
  } else if (last.seq < head.seq) {
    const missing = head.seq - last.seq;
    problems.push({
      problem: "truncated",
      message: `the export ends at seq ${last.seq} but the signed head is at seq ${head.seq}: ${missing === 1 ? `seq ${head.seq} is missing` : `seq ${last.seq + 1} to ${head.seq} (${missing} records) are missing`}`,
      organization_id: organization,
      seq: head.seq,
    });
  } else if (last.seq > head.seq) {
    problems.push({
      problem: "head_mismatch",
      message: `the export goes on to seq ${last.seq} but the signed head is at seq ${head.seq}`,
      organization_id: organization,
      seq: head.seq,
    });
  } else if (last.digest !== head.digest) {
    problems.push({
      problem: "head_mismatch",
      message: `the record at seq ${head.seq} has digest ${last.digest ?? "(unreadable)"}, the signed head says ${head.digest}`,
      ...identify(last, organization),
    });
  }
  return {
    organization_id: organization,
    record_count: links.length,
    first_seq: first.seq,
    last_seq: last.seq,
    from_genesis: first.seq === 1,
    head_digest: last.digest ?? null,
    head,
  };
}

/** Indexes of one longest strictly increasing subsequence of `values` (patience sorting, O(n log n)). */
function longestIncreasingRun(values: readonly number[]): Set<number> {
  const tails: number[] = []; // tails[k]: index ending the smallest-valued increasing run of length k + 1
  const previous: number[] = [];
  values.forEach((value, i) => {
    let low = 0;
    let high = tails.length;
    while (low < high) {
      const mid = (low + high) >> 1;
      if (values[tails[mid]!]! < value) low = mid + 1;
      else high = mid;
    }
    previous[i] = low > 0 ? tails[low - 1]! : -1;
    tails[low] = i;
  });
  const run = new Set<number>();
  for (let i = tails[tails.length - 1] ?? -1; i !== -1; i = previous[i]!) run.add(i);
  return run;
}

/** Reads a JWKS into kid → key, reporting (as malformed) entries that claim to be Ed25519 but are not usable. */
function importKeySet(jwks: { keys: readonly unknown[] }, problems: EvidenceProblem[]): Map<string, KeyEntry> {
  const keys = new Map<string, KeyEntry>();
  const malformed = (message: string): void => void problems.push({ problem: "malformed", message: `key set: ${message}` });
  jwks.keys.forEach((value, i) => {
    if (typeof value !== "object" || value === null) return malformed(`keys[${i}] is not an object`);
    const jwk = value as Record<string, unknown>;
    if (typeof jwk.kid !== "string" || jwk.kid === "") return malformed(`keys[${i}] has no kid`);
    let entry: KeyEntry;
    if (jwk.kty !== "OKP" || jwk.crv !== "Ed25519") {
      // Other keys may share a published JWKS; they only matter if a record names them.
      entry = { unusable: `it is a ${String(jwk.kty)}/${String(jwk.crv)} key, not Ed25519` };
    } else {
      try {
        entry = { key: importEd25519PublicJwk(jwk) };
      } catch (error) {
        malformed(`key ${jwk.kid}: ${(error as Error).message}`);
        entry = { unusable: (error as Error).message };
      }
    }
    const existing = keys.get(jwk.kid);
    if (existing === undefined) keys.set(jwk.kid, entry);
    else if (!("key" in existing && "key" in entry && existing.key.equals(entry.key))) {
      malformed(`kid ${jwk.kid} names two different keys`);
      keys.set(jwk.kid, { unusable: "the key set names two different keys with this kid" });
    }
  });
  return keys;
}

function identify(link: Link, organization: string | undefined): Omit<EvidenceProblem, "problem" | "message"> {
  return {
    index: link.index,
    ...(link.evidence_id !== undefined && { evidence_id: link.evidence_id }),
    ...(organization !== undefined && { organization_id: organization }),
    ...(link.seq !== 0 && { seq: link.seq }),
  };
}
