import { lazy, Suspense, type ReactNode } from "react";
import { Loading } from "../components/api-error";

/*
 * The governance and policies pages, each loaded when first opened: the graph layout (dagre) and
 * the syntax highlighter (refractor) stay out of the bundle every other page loads.
 */

const Governance = lazy(() => import("./governance").then((m) => ({ default: m.GovernancePage })));
const GraphVersion = lazy(() => import("./graph-version").then((m) => ({ default: m.GraphVersionPage })));

function Deferred({ children }: { children: ReactNode }) {
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

/** The page at `path` if it is one of governance's or policies', else null. */
export function authoringPage(path: string): ReactNode {
  if (path === "/governance") return <Deferred><Governance /></Deferred>;
  const graph = /^\/governance\/versions\/(\d+)$/.exec(path);
  if (graph) return <Deferred><GraphVersion version={Number(graph[1])} /></Deferred>;
  return null;
}

/** The document title of such a page, or null. */
export function authoringTitle(path: string): string | null {
  if (path === "/governance") return "Governance";
  if (path.startsWith("/governance/versions/")) return "Authority graph version";
  return null;
}
