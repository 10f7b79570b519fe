import { lazy, type ReactNode } from "react";
import { Deferred } from "../components/deferred";
import { Gate } from "../components/gate";

/*
 * The organization's API keys and principals pages, each loaded when first opened (see
 * authoring-routes.tsx).
 */

const ApiKeys = lazy(() => import("./api-keys").then((m) => ({ default: m.ApiKeysPage })));
const Principals = lazy(() => import("./principals").then((m) => ({ default: m.PrincipalsPage })));

/** The page at `path` if it is one of these, else null. */
export function organizationPage(path: string): ReactNode {
  if (path === "/api-keys") return <Gate permission="ORG_ADMIN"><Deferred><ApiKeys /></Deferred></Gate>;
  if (path === "/principals") return <Deferred><Principals /></Deferred>;
  return null;
}

/** The document title of such a page, or null. */
export function organizationTitle(path: string): string | null {
  if (path === "/api-keys") return "API keys";
  if (path === "/principals") return "Principals";
  return null;
}
