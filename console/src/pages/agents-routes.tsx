import type { ReactNode } from "react";

/*
 * The agents pages, each loaded when first opened (see authoring-routes.tsx).
 */

/** The page at `path` if it is one of the agents pages, else null. */
export function agentsPage(_path: string): ReactNode {
  return null;
}

/** The document title of such a page, or null. */
export function agentsTitle(_path: string): string | null {
  return null;
}
