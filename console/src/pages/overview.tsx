import { useId } from "react";
import { OrganizationState } from "../../../src/gen/mandate/v1/organizations_pb.js";
import { useOrganization, usePermissions } from "../api/hooks";
import { PERMISSION_NAMES } from "../api/permissions";
import { ApiError, Loading } from "../components/api-error";
import { Link } from "../components/link";
import { formatTime } from "../format";

/** What each permission lets this console do, in words. */
const MEANING: Record<(typeof PERMISSION_NAMES)[number], string> = {
  ORG_ADMIN: "manage API keys, principals, integrations and webhooks",
  AGENT_ADMIN: "register agents and change their lifecycle",
  POLICY_AUTHOR: "upload governance, author policies and graphs",
  POLICY_APPROVER: "approve and publish policies and graphs",
  REVIEWER: "approve or reject human reviews",
  CAPABILITY_ISSUE: "issue capabilities",
  CAPABILITY_VERIFY: "verify and consume capabilities",
  DECISION_READ: "read decisions and the review queue",
  EVIDENCE_READ: "read evidence and audit records",
  EVENTS_READ: "watch the live event stream",
};

/** /: the signed-in key's organization and what the key may do. */
export function OverviewPage() {
  const id = useId();
  const org = useOrganization();
  const permissions = usePermissions();
  return (
    <main aria-labelledby={`${id}-h`}>
      <h1 id={`${id}-h`}>Organization</h1>
      {org.isPending ? (
        <Loading what="the organization" />
      ) : org.error ? (
        <ApiError error={org.error} />
      ) : (
        <dl className="card facts">
          <dt>Name</dt>
          <dd data-testid="organization-name">{org.data.name}</dd>
          <dt>Organization id</dt>
          <dd>
            <code data-testid="organization-id">{org.data.organizationId}</code>
          </dd>
          <dt>Kind</dt>
          <dd>{org.data.sandbox ? "Sandbox" : "Organization"}</dd>
          <dt>State</dt>
          <dd>{org.data.state === OrganizationState.SUSPENDED ? "Suspended" : "Active"}</dd>
          <dt>Created</dt>
          <dd>{formatTime(org.data.createdAt)}</dd>
        </dl>
      )}
      <h2>This key's permissions</h2>
      <p className="muted">
        The API has no call that lists a key's own permissions; the console derives them by asking the API, once per permission, for something that permission guards.
      </p>
      {permissions.isPending ? (
        <Loading what="permissions" />
      ) : permissions.error ? (
        <ApiError error={permissions.error} />
      ) : (
        <ul className="permissions" aria-label="Permissions">
          {PERMISSION_NAMES.map((p) => {
            const held = permissions.data.has(p);
            return (
              <li key={p} className={held ? "held" : "not-held"} data-permission={p} data-held={held}>
                <span aria-hidden="true">{held ? "✓" : "–"}</span> <code>{p}</code> <span className="muted">{MEANING[p]}</span>
                <span className="visually-hidden">{held ? " (held)" : " (not held)"}</span>
              </li>
            );
          })}
        </ul>
      )}
      {permissions.data?.has("DECISION_READ") && (
        <p>
          <Link to="/reviews">Go to the review queue</Link>
        </p>
      )}
    </main>
  );
}
