import { createConnectQueryKey, useInfiniteQuery, useMutation, useQuery, useTransport } from "@connectrpc/connect-query";
import type { DescMethodUnary } from "@bufbuild/protobuf";
import { useQueryClient } from "@tanstack/react-query";
import { AgentService, type Agent, type TransitionAgentRequestSchema, type AgentSchema } from "../../../src/gen/mandate/v1/agents_pb.js";
import { PrincipalService } from "../../../src/gen/mandate/v1/principals_pb.js";

/*
 * The agents pages' calls (AgentService, and PrincipalService for the principal picker), one hook
 * per API call. A call that changes an agent writes the agent it answers into
 * GetAgent's cache and refreshes the list and the agent's audit trail.
 */

const M = AgentService.method;

/** Agents per ListAgents page (the API allows 1..500). */
export const AGENTS_PAGE_SIZE = 100;

/** A lifecycle call (ActivateAgent, SuspendAgent, …): TransitionAgentRequest in, the agent out. */
export type TransitionMethod = DescMethodUnary<typeof TransitionAgentRequestSchema, typeof AgentSchema>;

/** After a change: the agent as it now stands into GetAgent's cache; the list and audit trail read again. */
function useAgentChanged(): (agent: Agent) => Promise<void> {
  const queryClient = useQueryClient();
  const transport = useTransport();
  return async (agent) => {
    queryClient.setQueryData(createConnectQueryKey({ schema: M.getAgent, input: { agentId: agent.agentId }, transport, cardinality: "finite" }), agent);
    await Promise.all([
      queryClient.invalidateQueries({ queryKey: createConnectQueryKey({ schema: M.listAgents, cardinality: undefined }) }),
      queryClient.invalidateQueries({ queryKey: createConnectQueryKey({ schema: M.listAgentAuditRecords, cardinality: undefined }) }),
    ]);
  };
}

/**
 * AgentService.ListAgents, page after page (oldest first). The API filters nothing: the list
 * page filters by state and searches over the pages read.
 */
export function useAgentPages() {
  return useInfiniteQuery(
    M.listAgents,
    { pageSize: AGENTS_PAGE_SIZE, pageToken: "" },
    { pageParamKey: "pageToken", getNextPageParam: (last) => last.nextPageToken || undefined },
  );
}

/** AgentService.GetAgent, kept fresh on the agent's own page (heartbeats change it). */
export function useAgentDetail(agentId: string) {
  return useQuery(M.getAgent, { agentId }, { refetchInterval: 30_000 });
}

/** AgentService.ListAgentAuditRecords (EVIDENCE_READ): the agent's signed records, oldest first. */
export function useAgentAuditRecords(agentId: string, enabled: boolean) {
  return useQuery(M.listAgentAuditRecords, { agentId }, { enabled });
}

/** AgentService.RegisterAgent: the agent, in state registered; field errors for a malformed key. */
export function useRegisterAgent() {
  const changed = useAgentChanged();
  return useMutation(M.registerAgent, { onSuccess: changed });
}

/**
 * One lifecycle call; 409 invalid_transition when the agent's state no longer allows it (the
 * agent is then read again). The outcome is told to `on`, not to `mutate`'s callbacks: the
 * button that called is gone once the agent's new state renders, and those die with it.
 */
export function useTransitionAgent(method: TransitionMethod, on: { done: (agent: Agent) => void; refused: (error: unknown) => void }) {
  const changed = useAgentChanged();
  const queryClient = useQueryClient();
  return useMutation(method, {
    onSuccess: (agent) => {
      on.done(agent);
      return changed(agent);
    },
    onError: (error) => {
      on.refused(error);
      return queryClient.invalidateQueries({ queryKey: createConnectQueryKey({ schema: M.getAgent, cardinality: undefined }) });
    },
  });
}

/** AgentService.RotateAgentKey: a new certificate; the old one stops verifying at once. */
export function useRotateAgentKey() {
  const changed = useAgentChanged();
  return useMutation(M.rotateAgentKey, { onSuccess: changed });
}

/** AgentService.UpdateAgent: the ownership labels (never the acting principal). */
export function useUpdateAgent() {
  const changed = useAgentChanged();
  return useMutation(M.updateAgent, { onSuccess: changed });
}

/** PrincipalService.ListPrincipals, page after page: who an agent may act for. */
export function usePrincipalPages() {
  return useInfiniteQuery(
    PrincipalService.method.listPrincipals,
    { pageSize: 500, pageToken: "" },
    { pageParamKey: "pageToken", getNextPageParam: (last) => last.nextPageToken || undefined, staleTime: 60_000 },
  );
}
