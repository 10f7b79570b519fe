import { createConnectQueryKey, useMutation, useQuery } from "@connectrpc/connect-query";
import { useQueryClient } from "@tanstack/react-query";
import { AuthorityGraphService } from "../../../src/gen/mandate/v1/authority_graph_pb.js";
import { PrincipalService } from "../../../src/gen/mandate/v1/principals_pb.js";

/*
 * The governance page's calls (AuthorityGraphService), one hook per API call.
 * Each mutation refreshes what it changes: the document list, the version list, the versions.
 */

const M = AuthorityGraphService.method;

/** Refreshes every cached answer of `AuthorityGraphService` (lists, versions, the active graph). */
function useInvalidateGovernance(): () => Promise<void> {
  const queryClient = useQueryClient();
  return () => queryClient.invalidateQueries({ queryKey: createConnectQueryKey({ schema: AuthorityGraphService, cardinality: undefined }) });
}

/** AuthorityGraphService.ListGovernanceDocuments. */
export function useGovernanceDocuments() {
  return useQuery(M.listGovernanceDocuments, {});
}

/** AuthorityGraphService.UploadGovernanceDocument: refused with 422 and located field errors when it does not parse. */
export function useUploadGovernanceDocument() {
  const invalidate = useInvalidateGovernance();
  return useMutation(M.uploadGovernanceDocument, { onSuccess: invalidate });
}

/** AuthorityGraphService.DeleteGovernanceDocument. */
export function useDeleteGovernanceDocument() {
  const invalidate = useInvalidateGovernance();
  return useMutation(M.deleteGovernanceDocument, { onSuccess: invalidate });
}

/** AuthorityGraphService.GenerateGraphVersion: a draft version and generation's warnings. */
export function useGenerateGraphVersion() {
  const invalidate = useInvalidateGovernance();
  return useMutation(M.generateGraphVersion, { onSuccess: invalidate });
}

/** AuthorityGraphService.ListGraphVersions (newest first, graphs omitted). */
export function useGraphVersions() {
  return useQuery(M.listGraphVersions, {});
}

/** AuthorityGraphService.GetGraphVersion: one version, whatever its state. */
export function useGraphVersion(version: number) {
  return useQuery(M.getGraphVersion, { version }, { enabled: version > 0 });
}

/** AuthorityGraphService.GetAuthorityGraph: the active graph (version 0 when none is). */
export function useActiveGraph() {
  return useQuery(M.getAuthorityGraph, {});
}

/** AuthorityGraphService.ApproveGraphVersion: by a POLICY_APPROVER other than the author. */
export function useApproveGraphVersion() {
  const invalidate = useInvalidateGovernance();
  return useMutation(M.approveGraphVersion, { onSuccess: invalidate });
}

/** AuthorityGraphService.PublishGraphVersion. */
export function usePublishGraphVersion() {
  const invalidate = useInvalidateGovernance();
  return useMutation(M.publishGraphVersion, { onSuccess: invalidate });
}

/** PrincipalService.ListPrincipals (first 500): the graph names principals by external_ref; the picture shows their names. */
export function useGraphPrincipals() {
  return useQuery(PrincipalService.method.listPrincipals, { pageSize: 500 }, { staleTime: 60_000 });
}
