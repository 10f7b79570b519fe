import { createClient } from "@connectrpc/connect";
import { createConnectQueryKey, useInfiniteQuery, useMutation, useQuery, useTransport } from "@connectrpc/connect-query";
import { useMutation as useTanStackMutation, useQueryClient } from "@tanstack/react-query";
import { useEffect, useMemo, useState } from "react";
import { AgentService } from "../../../src/gen/mandate/v1/agents_pb.js";
import { DecisionService, DecisionStatus, Outcome, type Decision } from "../../../src/gen/mandate/v1/decisions_pb.js";
import { OrganizationService, SandboxService } from "../../../src/gen/mandate/v1/organizations_pb.js";
import { PrincipalService } from "../../../src/gen/mandate/v1/principals_pb.js";
import { EventService } from "../../../src/gen/mandate/v1alpha/events_pb.js";
import { useCredential, type Credential } from "../session";
import { transportFor } from "./transport";
import { permissionNames, type PermissionName } from "./permissions";

/*
 * One hook per API call, over the generated descriptors: each screen is typed
 * against the proto and shares TanStack Query's cache, keyed by method and input.
 */

/** OrganizationService.GetOrganization: the signed-in key's organization. */
export function useOrganization() {
  const credential = useCredential();
  return useQuery(OrganizationService.method.getOrganization, {}, { enabled: credential?.kind === "key", staleTime: 60_000 });
}

/** OrganizationService.GetCaller: which identity the signed-in key is, and its permissions. */
export function useCaller() {
  const credential = useCredential();
  return useQuery(OrganizationService.method.getCaller, {}, { enabled: credential?.kind === "key", staleTime: Infinity });
}

/** The signed-in key's permissions, as GetCaller states them (data undefined while unknown). */
export function usePermissions() {
  const caller = useCaller();
  const data = useMemo(() => (caller.data ? permissionNames(caller.data.permissions) : undefined), [caller.data]);
  return { data, error: caller.error, isPending: caller.isPending };
}

/**
 * The signed-in key's identity (its API key id, what authors, approvals and audit trails name),
 * as GetCaller states it; undefined until known. Four eyes use it: the console disables what
 * the API would refuse as the same identity's, and says why.
 */
export function useIdentity(): string | undefined {
  return useCaller().data?.identity;
}

/** Whether the signed-in key holds `permission` (false while unknown). */
export function useCan(permission: PermissionName): boolean {
  return usePermissions().data?.has(permission) ?? false;
}

/** SandboxService.CreateSandboxOrganization (no credential). */
export function useCreateSandbox() {
  return useMutation(SandboxService.method.createSandboxOrganization);
}

/** OrganizationService.CreateOrganization (operator key). */
export function useCreateOrganization() {
  return useMutation(OrganizationService.method.createOrganization);
}

/** How often the queue is polled when no event stream is open. */
export const POLL_MS = 3_000;

/** Pending reviews per page of the queue. */
export const QUEUE_PAGE_SIZE = 50;

/** DecisionService.ListDecisions filtered to pending human reviews, page after page: the review queue. */
export function usePendingReviews(options: { live: "stream" | "poll" | "off" }) {
  return useInfiniteQuery(
    DecisionService.method.listDecisions,
    { status: DecisionStatus.PENDING, outcome: Outcome.HUMAN_REVIEW, pageSize: QUEUE_PAGE_SIZE, pageToken: "" },
    {
      pageParamKey: "pageToken",
      getNextPageParam: (last) => last.nextPageToken || undefined,
      // With the stream open, a slow poll still picks up what no queue event reports (a first approval of two).
      refetchInterval: options.live === "poll" ? POLL_MS : options.live === "stream" ? 30_000 : false,
    },
  );
}

/** DecisionService.GetDecision. */
export function useDecision(decisionId: string) {
  return useQuery(DecisionService.method.getDecision, { decisionId });
}

/**
 * DecisionService.ReviewDecision: the answer is the decision as it now stands, written into the
 * cache. A refusal reads the decision again: it was most likely resolved (or approved once) by
 * someone else meanwhile, and the page must show that rather than the form it had.
 */
export function useReviewDecision() {
  const queryClient = useQueryClient();
  const transport = useTransport();
  const decisionKey = (decisionId: string) =>
    createConnectQueryKey({ schema: DecisionService.method.getDecision, input: { decisionId }, transport, cardinality: "finite" });
  const invalidateQueue = () => queryClient.invalidateQueries({ queryKey: createConnectQueryKey({ schema: DecisionService.method.listDecisions, cardinality: undefined }) });
  return useMutation(DecisionService.method.reviewDecision, {
    onSuccess: (decision: Decision) => {
      queryClient.setQueryData(decisionKey(decision.decisionId), decision);
      void invalidateQueue();
    },
    onError: (_err, request) => {
      if (request.decisionId) void queryClient.invalidateQueries({ queryKey: decisionKey(request.decisionId) });
      void invalidateQueue();
    },
  });
}

/** AgentService.GetAgent. */
export function useAgent(agentId: string) {
  return useQuery(AgentService.method.getAgent, { agentId }, { enabled: agentId !== "", staleTime: 60_000 });
}

/** PrincipalService.GetPrincipal. */
export function usePrincipal(principalId: string | undefined) {
  return useQuery(PrincipalService.method.getPrincipal, principalId ? { principalId } : undefined, { enabled: !!principalId, staleTime: 60_000 });
}

/** The events that change the review queue (docs/events.md). */
const QUEUE_EVENTS = ["HumanReviewRequested", "HumanReviewResolved"];

/**
 * EventService.WatchEvents, for keys holding EVENTS_READ: every review requested or resolved
 * refreshes the decision lists. Reports "stream" while the stream is open and "poll" when it
 * cannot be (no permission, or it failed): the queue then polls ListDecisions every POLL_MS.
 * Reconnects after a failure, resuming from the last event seen.
 */
export function useReviewEvents(enabled: boolean): "stream" | "poll" {
  const transport = useTransport();
  const queryClient = useQueryClient();
  const [mode, setMode] = useState<"stream" | "poll">("poll");
  useEffect(() => {
    if (!enabled) {
      setMode("poll");
      return;
    }
    const abort = new AbortController();
    let after = "";
    let retry: ReturnType<typeof setTimeout> | undefined;
    const refresh = () => queryClient.invalidateQueries({ queryKey: createConnectQueryKey({ schema: DecisionService.method.listDecisions, cardinality: undefined }) });
    const open = async () => {
      try {
        const stream = createClient(EventService, transport).watchEvents({ types: QUEUE_EVENTS, after }, { signal: abort.signal });
        for await (const event of stream) {
          // The first item is a heartbeat once the server listens: from then on nothing is missed.
          setMode("stream");
          if (event.eventId) {
            after = event.eventId;
            void refresh();
          }
        }
      } catch {
        if (abort.signal.aborted) return;
      }
      // The stream ended or failed: poll meanwhile, and open it again shortly.
      setMode("poll");
      retry = setTimeout(() => void open(), 5_000);
    };
    void open();
    return () => {
      abort.abort();
      clearTimeout(retry);
    };
  }, [enabled, transport, queryClient]);
  return mode;
}

/**
 * OrganizationService.GetOrganization with a credential not yet signed in: a key is kept for
 * the session only once the API has accepted it.
 */
export function useCheckCredential() {
  return useTanStackMutation({
    mutationFn: async (credential: Credential) => {
      if (credential.kind === "key") return createClient(OrganizationService, transportFor(credential)).getOrganization({});
      // The operator key is checked on its first use: the API has no call that only reads it.
      return null;
    },
  });
}
