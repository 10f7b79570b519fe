import { lazy, type ReactNode } from "react";
import type { PermissionName } from "../api/permissions";
import { Deferred } from "../components/deferred";
import { Gate } from "../components/gate";
import { match } from "../router";

/*
 * The decisions pages, each loaded when first opened (see authoring-routes.tsx): the list, a
 * decision with its evidence, and any evidence record of the chain (its neighbours link there).
 */

const Decisions = lazy(() => import("./decisions").then((m) => ({ default: m.DecisionsPage })));
const Decision = lazy(() => import("./decision").then((m) => ({ default: m.DecisionPage })));
const Evidence = lazy(() => import("./evidence").then((m) => ({ default: m.EvidencePage })));

/** A page for keys holding `permission`, loaded when first opened. */
function Guarded({ permission, children }: { permission: PermissionName; children: ReactNode }) {
  return (
    <Gate permission={permission}>
      <Deferred>{children}</Deferred>
    </Gate>
  );
}

/** The page at `path` if it is one of the decisions pages, else null. */
export function decisionsPage(path: string): ReactNode {
  if (path === "/decisions" || path === "/decisions/") return <Guarded permission="DECISION_READ"><Decisions /></Guarded>;
  const decision = match("/decisions/:id", path);
  if (decision) return <Guarded permission="DECISION_READ"><Decision key={decision.id} decisionId={decision.id!} /></Guarded>;
  const evidence = match("/evidence/:id", path);
  if (evidence) return <Guarded permission="EVIDENCE_READ"><Evidence key={evidence.id} evidenceId={evidence.id!} /></Guarded>;
  return null;
}

/** The document title of such a page, or null. */
export function decisionsTitle(path: string): string | null {
  if (path === "/decisions" || path === "/decisions/") return "Decisions";
  if (path.startsWith("/decisions/")) return "Decision";
  if (path.startsWith("/evidence/")) return "Evidence record";
  return null;
}
