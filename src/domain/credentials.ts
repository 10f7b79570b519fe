import { timingSafeEqual } from "node:crypto";
import type { LiveApiKey, OrganizationStore } from "../storage/organizations.js";
import { BatchedReads } from "./batched-reads.js";
import { PERMISSIONS, type OrgCaller } from "../base/caller.js";
import { MandateError, organizationSuspended } from "../base/errors.js";
import { hashSecret } from "./organizations.js";

const ALL = new Set(PERMISSIONS);

/** `row` if it still admits its holder: 401 `unknown_key` when unknown or revoked, 403 `organization_suspended`. */
function admitted(row: LiveApiKey | null): LiveApiKey {
  if (!row) throw new MandateError("unknown_key", "The API key is unknown or revoked.");
  if (row.organization_state !== "active") throw organizationSuspended();
  return row;
}

/** Turns bearer secrets and the operator key into callers. */
export class Credentials {
  /** Concurrent requests' key lookups share one query; nothing is cached, so a revoked key fails at once. */
  private readonly liveKeys: BatchedReads<Buffer, LiveApiKey | null>;

  constructor(
    private readonly organizations: OrganizationStore,
    private readonly operatorKey: string | undefined,
  ) {
    this.liveKeys = new BatchedReads((hashes) => organizations.liveKeys(hashes));
  }

  /**
   * A live API key's caller; 401 `unknown_key` for unknown or revoked keys, 403
   * `organization_suspended` while the platform operator has its organization suspended (the
   * operator key still acts for it: operatorFor).
   */
  async bearer(secret: string, clientAddress: string): Promise<OrgCaller> {
    const row = admitted(await this.liveKeys.get(hashSecret(secret)));
    return {
      kind: "key",
      organizationId: row.organization_id,
      identity: row.key_id,
      permissions: new Set(row.permissions),
      clientAddress,
    };
  }

  /**
   * Throws what authenticating `caller` would throw now (401 `unknown_key`, 403
   * `organization_suspended`): a request that lasts (an event stream) asks before each thing it
   * sends, so a key revoked, or an organization suspended, since it began sends nothing more. The
   * operator acts for suspended organizations too, so it is never refused here.
   */
  async recheck(caller: OrgCaller): Promise<void> {
    if (caller.kind !== "key") return;
    admitted(await this.organizations.liveKey(caller.organizationId, caller.identity));
  }

  /** Whether `presented` is the operator key. Always false when MANDATE_OPERATOR_KEY is unset. */
  isOperatorKey(presented: string): boolean {
    if (!this.operatorKey) return false;
    const a = hashSecret(presented);
    const b = hashSecret(this.operatorKey);
    return timingSafeEqual(a, b);
  }

  /** The operator acting for a named organization; 404 when it does not exist. */
  async operatorFor(organizationId: string, clientAddress: string): Promise<OrgCaller> {
    const org = await this.organizations.get(organizationId);
    if (!org) throw new MandateError("not_found", "Organization not found.");
    return { kind: "operator", organizationId, identity: "operator", permissions: ALL, clientAddress };
  }
}
