/** The limits the rules enforce (docs/architecture.md, Limits); configured in src/config.ts. */
export interface Limits {
  intentBodyBytes: number;
  requestBodyBytes: number;
  requestedAtSkewSeconds: number;
  sandboxPerAddressPerHour: number;
  sandboxPerEmailPerDay: number;
  sandboxMaxOrgs: number;
}
