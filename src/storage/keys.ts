/** A row wanted by its id within one organization (reads batched across organizations take many). */
export interface OrganizationKey {
  organizationId: string;
  id: string;
}
