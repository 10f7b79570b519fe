import { createConnectQueryKey, useMutation, useQuery } from "@connectrpc/connect-query";
import type { DescMessage, DescMethodUnary } from "@bufbuild/protobuf";
import { useQueryClient } from "@tanstack/react-query";
import { OrganizationService } from "../../../src/gen/mandate/v1/organizations_pb.js";
import { PrincipalService } from "../../../src/gen/mandate/v1/principals_pb.js";

/*
 * The API keys and principals pages' calls (OrganizationService's key calls, PrincipalService),
 * one hook per API call. ListPrincipals is usePrincipalPages (agents.ts),
 * shared with the agent form's principal picker. Each mutation refreshes the list it changes.
 */

const M = OrganizationService.method;

/** Refreshes every cached answer of `schema` (a method's lists, whatever their input). */
function useRefresh<I extends DescMessage, O extends DescMessage>(schema: DescMethodUnary<I, O>): () => Promise<void> {
  const queryClient = useQueryClient();
  return () => queryClient.invalidateQueries({ queryKey: createConnectQueryKey({ schema, cardinality: undefined }) });
}

/** OrganizationService.ListApiKeys (ORG_ADMIN): every key, revoked ones too, never a secret. */
export function useApiKeys(enabled: boolean) {
  return useQuery(M.listApiKeys, {}, { enabled });
}

/** OrganizationService.CreateApiKey: the secret is in this answer only. */
export function useCreateApiKey() {
  const refresh = useRefresh(M.listApiKeys);
  return useMutation(M.createApiKey, { onSuccess: refresh });
}

/** OrganizationService.RevokeApiKey: the key answers 401 from then on. */
export function useRevokeApiKey() {
  const refresh = useRefresh(M.listApiKeys);
  return useMutation(M.revokeApiKey, { onSuccess: refresh });
}

/** PrincipalService.CreatePrincipal (ORG_ADMIN); 409 for an external ref already taken. */
export function useCreatePrincipal() {
  const refresh = useRefresh(PrincipalService.method.listPrincipals);
  return useMutation(PrincipalService.method.createPrincipal, { onSuccess: refresh });
}
