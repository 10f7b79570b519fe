import { useInfiniteQuery, useQuery } from "@connectrpc/connect-query";
import { skipToken, useQuery as useTanStackQuery } from "@tanstack/react-query";
import { CapabilityService } from "../../../src/gen/mandate/v1/capabilities_pb.js";
import { DecisionService, type DecisionStatus, type Outcome } from "../../../src/gen/mandate/v1/decisions_pb.js";
import { EvidenceService, type EvidenceRecord } from "../../../src/gen/mandate/v1/evidence_pb.js";
import type { KeySet } from "../evidence-signature";

/*
 * The decisions and evidence pages' calls (DecisionService, EvidenceService, CapabilityService,
 * and the service's JWKS), one hook per API call.
 */

/** What the decision list asks ListDecisions for; UNSPECIFIED and "" filter nothing. */
export interface DecisionFilter {
  outcome: Outcome;
  status: DecisionStatus;
  agentId: string;
  pageSize: number;
}

/** DecisionService.ListDecisions: one page of the organization's decisions, newest first. */
export function useDecisionPage(filter: DecisionFilter, pageToken: string) {
  return useQuery(DecisionService.method.listDecisions, { ...filter, pageToken }, { placeholderData: (previous) => previous });
}

/** EvidenceService.GetEvidence (EVIDENCE_READ). */
export function useEvidenceRecord(evidenceId: string, enabled = true) {
  return useQuery(EvidenceService.method.getEvidence, { evidenceId }, { enabled: enabled && evidenceId !== "" });
}

/**
 * EvidenceService.ListEvidence for the one record at `seq` of the chain (none past its end),
 * with the signed chain head read in the same snapshot.
 */
export function useEvidenceAt(seq: bigint, enabled: boolean) {
  return useQuery(EvidenceService.method.listEvidence, { afterSeq: seq - 1n, pageSize: 1 }, { enabled: enabled && seq >= 1n });
}

/** CapabilityService.GetCapability (CAPABILITY_ISSUE): its state, never its token. */
export function useCapability(capabilityId: string | undefined, enabled: boolean) {
  return useQuery(CapabilityService.method.getCapability, capabilityId ? { capabilityId } : undefined, { enabled: enabled && !!capabilityId });
}

/**
 * The service's published keys (GET /.well-known/jwks.json, this same origin): what the console
 * checks evidence signatures against, fetched apart from the records they sign.
 */
export function useJwks() {
  return useTanStackQuery({
    queryKey: ["jwks"],
    queryFn: async ({ signal }): Promise<KeySet> => {
      const res = await fetch("/.well-known/jwks.json", { signal, headers: { accept: "application/json" } });
      if (!res.ok) throw new Error(`GET /.well-known/jwks.json answered ${res.status}`);
      const body: unknown = await res.json();
      if (typeof body !== "object" || body === null || !Array.isArray((body as KeySet).keys)) throw new Error("/.well-known/jwks.json holds no \"keys\" array");
      return body as KeySet;
    },
    staleTime: 5 * 60_000,
  });
}

/** Records read per ListEvidence page while looking for a decision's capability. */
export const TRAIL_PAGE = 500;

/**
 * EvidenceService.ListEvidence from just after the decision's own record, a page at a time: the
 * API links a decision to its capability only in the chain (a `capability.issued` record, then
 * `capability.consumed`, whose payload names the decision_id), so the page reads the chain
 * onward, one page unless asked for more.
 */
export function useChainAfter(seq: bigint, enabled: boolean) {
  return useInfiniteQuery(
    EvidenceService.method.listEvidence,
    enabled ? { afterSeq: seq, pageSize: TRAIL_PAGE } : skipToken,
    { pageParamKey: "afterSeq", getNextPageParam: (last) => (last.hasMore && last.records.length > 0 ? last.records[last.records.length - 1]!.seq : undefined) },
  );
}

/** A decision's capability as the chain records read so far tell it. */
export interface CapabilityTrail {
  issued: EvidenceRecord | null;
  consumed: EvidenceRecord | null;
}

/** The `capability.issued` and `capability.consumed` records naming `decisionId` among `records`. */
export function capabilityTrail(decisionId: string, records: readonly EvidenceRecord[]): CapabilityTrail {
  const trail: CapabilityTrail = { issued: null, consumed: null };
  for (const r of records) {
    if (r.payload?.decision_id !== decisionId) continue;
    if (r.kind === "capability.issued") trail.issued = r;
    else if (r.kind === "capability.consumed") trail.consumed = r;
  }
  return trail;
}
