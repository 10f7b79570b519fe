import type { ReactNode } from "react";
import { usePermissions } from "../api/hooks";
import type { PermissionName } from "../api/permissions";

/** Renders a page only for keys holding `permission`; says so otherwise. */
export function Gate({ permission, children }: { permission: PermissionName; children: ReactNode }) {
  const permissions = usePermissions();
  if (permissions.isPending) return null;
  if (permissions.data && !permissions.data.has(permission)) {
    return (
      <main>
        <h1>Not available to this key</h1>
        <p>
          This page needs the <code>{permission}</code> permission, which this key does not hold.
        </p>
      </main>
    );
  }
  return children;
}
