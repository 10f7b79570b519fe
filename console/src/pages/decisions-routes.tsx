import type { ReactNode } from "react";

/*
 * The decisions pages, each loaded when first opened (see authoring-routes.tsx).
 */

/** The page at `path` if it is one of the decisions pages, else null. */
export function decisionsPage(_path: string): ReactNode {
  return null;
}

/** The document title of such a page, or null. */
export function decisionsTitle(_path: string): string | null {
  return null;
}
