import { createClient } from "@connectrpc/connect";
import { useQuery, useTransport } from "@connectrpc/connect-query";
import { useQuery as useTanStackQuery } from "@tanstack/react-query";
import { CapabilityService } from "../../../src/gen/mandate/v1/capabilities_pb.js";
import { DecisionService, type DecisionStatus, type Outcome } from "../../../src/gen/mandate/v1/decisions_pb.js";
import { EvidenceService, type EvidenceRecord } from "../../../src/gen/mandate/v1/evidence_pb.js";
import type { KeySet } from "../evidence-signature";

/*
 * The decisions and evidence pages' calls (DecisionService, EvidenceService, CapabilityService,
 * and the service's JWKS), one hook per API call (CONVENTIONS.md 15).
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

/** Records read per ListEvidence call while looking for a decision's capability. */
const SCAN_PAGE = 1_000;
/** How far past the decision the chain is read for its capability (pages of SCAN_PAGE). */
export const SCAN_PAGES = 5;

/** A decision's capability as its evidence records tell it. */
export interface CapabilityTrail {
  issued: EvidenceRecord | null;
  consumed: EvidenceRecord | null;
  /** Whether the chain was read to its end (else only SCAN_PAGES pages past the decision). */
  complete: boolean;
}

/**
 * EvidenceService.ListEvidence read forward from the decision's own record: the API links a
 * decision to its capability only in the chain (a `capability.issued` record, then
 * `capability.consumed`, whose payload names the decision_id), so the pages after it are
 * searched, at most SCAN_PAGES of them.
 */
export function useCapabilityTrail(decisionId: string, fromSeq: bigint | undefined, enabled: boolean) {
  const transport = useTransport();
  return useTanStackQuery({
    queryKey: ["capability-trail", decisionId, String(fromSeq)],
    enabled: enabled && fromSeq !== undefined,
    queryFn: async ({ signal }): Promise<CapabilityTrail> => {
      const client = createClient(EvidenceService, transport);
      const trail: CapabilityTrail = { issued: null, consumed: null, complete: false };
      let after = fromSeq!;
      for (let i = 0; i < SCAN_PAGES; i++) {
        const page = await client.listEvidence({ afterSeq: after, pageSize: SCAN_PAGE }, { signal });
        for (const r of page.records) {
          if (r.payload?.decision_id !== decisionId) continue;
          if (r.kind === "capability.issued") trail.issued = r;
          else if (r.kind === "capability.consumed") trail.consumed = r;
        }
        if (trail.consumed || !page.hasMore || page.records.length === 0) {
          trail.complete = trail.consumed !== null || !page.hasMore;
          return trail;
        }
        after = page.records[page.records.length - 1]!.seq;
      }
      return trail;
    },
    staleTime: 30_000,
  });
}
