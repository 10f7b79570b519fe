import { createConnectQueryKey, useMutation, useQuery } from "@connectrpc/connect-query";
import { useQueryClient } from "@tanstack/react-query";
import { AgentService } from "../../../src/gen/mandate/v1/agents_pb.js";
import { PolicyService } from "../../../src/gen/mandate/v1/policies_pb.js";

/*
 * The policies pages' calls (PolicyService), one hook per API call. Each
 * lifecycle mutation refreshes the policy lists and policies it changes.
 */

const M = PolicyService.method;

/** Refreshes every cached ListPolicies and GetPolicy answer. */
function useInvalidatePolicies(): () => Promise<void> {
  const queryClient = useQueryClient();
  return async () => {
    await Promise.all([
      queryClient.invalidateQueries({ queryKey: createConnectQueryKey({ schema: M.listPolicies, cardinality: undefined }) }),
      queryClient.invalidateQueries({ queryKey: createConnectQueryKey({ schema: M.getPolicy, cardinality: undefined }) }),
    ]);
  };
}

/** PolicyService.ListPolicies. */
export function usePolicies() {
  return useQuery(M.listPolicies, {});
}

/** PolicyService.GetPolicy: every version with its source, Rego, author and approver. */
export function usePolicy(policyKey: string) {
  return useQuery(M.getPolicy, { policyKey }, { enabled: policyKey !== "" });
}

/** PolicyService.CreatePolicy: refused with located field errors (422) when the document does not compile. */
export function useCreatePolicy() {
  const invalidate = useInvalidatePolicies();
  return useMutation(M.createPolicy, { onSuccess: invalidate });
}

/** PolicyService.CreatePolicyVersion: a new draft. */
export function useCreatePolicyVersion() {
  const invalidate = useInvalidatePolicies();
  return useMutation(M.createPolicyVersion, { onSuccess: invalidate });
}

/** PolicyService.SubmitPolicyVersion: draft → in_review. */
export function useSubmitPolicyVersion() {
  const invalidate = useInvalidatePolicies();
  return useMutation(M.submitPolicyVersion, { onSuccess: invalidate });
}

/** PolicyService.ApprovePolicyVersion: in_review → approved, by a POLICY_APPROVER other than the author. */
export function useApprovePolicyVersion() {
  const invalidate = useInvalidatePolicies();
  return useMutation(M.approvePolicyVersion, { onSuccess: invalidate });
}

/** PolicyService.PublishPolicyVersion: approved → active; compile errors come back located. */
export function usePublishPolicyVersion() {
  const invalidate = useInvalidatePolicies();
  return useMutation(M.publishPolicyVersion, { onSuccess: invalidate });
}

/** PolicyService.EvaluatePolicy: a dry run, nothing recorded. */
export function useEvaluatePolicy() {
  return useMutation(M.evaluatePolicy);
}

/** PolicyService.ReplayPolicies: the recorded Intents evaluated again, and the decisions that would flip. */
export function useReplayPolicies() {
  return useMutation(M.replayPolicies);
}

/** PolicyService.RollbackPolicy: four eyes (the first call requests, another approver's applies). */
export function useRollbackPolicy() {
  const invalidate = useInvalidatePolicies();
  return useMutation(M.rollbackPolicy, { onSuccess: invalidate });
}

/** PolicyService.DisablePolicy: four eyes, as rollback. */
export function useDisablePolicy() {
  const invalidate = useInvalidatePolicies();
  return useMutation(M.disablePolicy, { onSuccess: invalidate });
}

/** AgentService.ListAgents (first 500): the agents a dry run's Intent may name. */
export function useDryRunAgents() {
  return useQuery(AgentService.method.listAgents, { pageSize: 500 });
}
