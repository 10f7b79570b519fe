import { lazy, type ReactNode } from "react";
import { Deferred } from "../components/deferred";

/*
 * The agents pages, each loaded when first opened (see authoring-routes.tsx).
 */

const Agents = lazy(() => import("./agents").then((m) => ({ default: m.AgentsPage })));
const Agent = lazy(() => import("./agent").then((m) => ({ default: m.AgentPage })));
const RegisterAgent = lazy(() => import("./register-agent").then((m) => ({ default: m.RegisterAgentPage })));

/** A path segment decoded; a malformed escape is kept as typed (the API then answers not found). */
function decoded(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

/** The page at `path` if it is one of the agents pages, else null. */
export function agentsPage(path: string): ReactNode {
  if (path === "/agents") return <Deferred><Agents /></Deferred>;
  if (path === "/agents/new") return <Deferred><RegisterAgent /></Deferred>;
  const m = /^\/agents\/([^/]+)$/.exec(path);
  if (m) return <Deferred><Agent key={m[1]} agentId={decoded(m[1]!)} /></Deferred>;
  return null;
}

/** The document title of such a page, or null. */
export function agentsTitle(path: string): string | null {
  if (path === "/agents") return "Agents";
  if (path === "/agents/new") return "Register an agent";
  if (path.startsWith("/agents/")) return "Agent";
  return null;
}
