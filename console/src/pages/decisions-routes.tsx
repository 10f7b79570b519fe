import { lazy, Suspense, type ReactNode } from "react";
import { usePermissions } from "../api/hooks";
import type { PermissionName } from "../api/permissions";
import { Loading } from "../components/api-error";
import { match } from "../router";

/*
 * The decisions pages, each loaded when first opened (see authoring-routes.tsx): the list, a
 * decision with its evidence, and any evidence record of the chain (its neighbours link there).
 */

const Decisions = lazy(() => import("./decisions").then((m) => ({ default: m.DecisionsPage })));
const Decision = lazy(() => import("./decision").then((m) => ({ default: m.DecisionPage })));
const Evidence = lazy(() => import("./evidence").then((m) => ({ default: m.EvidencePage })));

/** Loads the page, and renders it only for keys holding `permission`; says so otherwise. */
function Deferred({ permission, children }: { permission: PermissionName; children: ReactNode }) {
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
  return (
    <Suspense
      fallback={
        <main>
          <Loading what="the page" />
        </main>
      }
    >
      {children}
    </Suspense>
  );
}

/** The page at `path` if it is one of the decisions pages, else null. */
export function decisionsPage(path: string): ReactNode {
  if (path === "/decisions" || path === "/decisions/") return <Deferred permission="DECISION_READ"><Decisions /></Deferred>;
  const decision = match("/decisions/:id", path);
  if (decision) return <Deferred permission="DECISION_READ"><Decision key={decision.id} decisionId={decision.id!} /></Deferred>;
  const evidence = match("/evidence/:id", path);
  if (evidence) return <Deferred permission="EVIDENCE_READ"><Evidence key={evidence.id} evidenceId={evidence.id!} /></Deferred>;
  return null;
}

/** The document title of such a page, or null. */
export function decisionsTitle(path: string): string | null {
  if (path === "/decisions" || path === "/decisions/") return "Decisions";
  if (path.startsWith("/decisions/")) return "Decision";
  if (path.startsWith("/evidence/")) return "Evidence record";
  return null;
}
