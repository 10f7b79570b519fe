import { useId } from "react";
import { OrganizationState } from "../../../src/gen/mandate/v1/organizations_pb.js";
import { useOrganization, usePermissions } from "../api/hooks";
import { PERMISSION_MEANINGS, PERMISSION_NAMES } from "../api/permissions";
import { ApiError, Loading } from "../components/api-error";
import { Link } from "../components/link";
import { formatTime } from "../format";

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
      {permissions.error ? (
        <ApiError error={permissions.error} />
      ) : !permissions.data ? (
        <Loading what="permissions" />
      ) : (
        <ul className="permissions" aria-label="Permissions">
          {PERMISSION_NAMES.map((p) => {
            const held = permissions.data?.has(p) ?? false;
            return (
              <li key={p} className={held ? "held" : "not-held"} data-permission={p} data-held={held}>
                <span aria-hidden="true">{held ? "✓" : "–"}</span> <code>{p}</code> <span className="muted">{PERMISSION_MEANINGS[p]}</span>
                <span className="visually-hidden">{held ? " (held)" : " (not held)"}</span>
              </li>
            );
          })}
        </ul>
      )}
      {permissions.data && (
        <>
          <h2>Keys and principals</h2>
          {permissions.data.has("ORG_ADMIN") ? (
            <p>
              <Link to="/api-keys">Manage the API keys</Link>: create a key with the permissions a caller needs (its secret is shown once), or revoke one.
            </p>
          ) : (
            <p className="muted" data-testid="no-org-admin">
              Managing API keys needs the <code>ORG_ADMIN</code> permission, which this key lacks.
            </p>
          )}
          <p>
            <Link to="/principals">Principals</Link>: the people, roles, units and services agents act for, which the governance documents name.
          </p>
        </>
      )}
      {permissions.data?.has("DECISION_READ") && (
        <p>
          <Link to="/reviews">Go to the review queue</Link>
        </p>
      )}
    </main>
  );
}
