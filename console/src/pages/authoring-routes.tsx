import { lazy, type ReactNode } from "react";
import { Deferred } from "../components/deferred";

/*
 * The governance and policies pages, each loaded when first opened: the graph layout (dagre) and
 * the syntax highlighter (refractor) stay out of the bundle every other page loads.
 */

const Governance = lazy(() => import("./governance").then((m) => ({ default: m.GovernancePage })));
const GraphVersion = lazy(() => import("./graph-version").then((m) => ({ default: m.GraphVersionPage })));
const Policies = lazy(() => import("./policies").then((m) => ({ default: m.PoliciesPage })));
const Policy = lazy(() => import("./policy").then((m) => ({ default: m.PolicyPage })));
const PolicyVersion = lazy(() => import("./policy-version").then((m) => ({ default: m.PolicyVersionPage })));
const NewPolicy = lazy(() => import("./policy-editor").then((m) => ({ default: m.NewPolicyPage })));
const NewPolicyVersion = lazy(() => import("./policy-editor").then((m) => ({ default: m.NewPolicyVersionPage })));
const DryRun = lazy(() => import("./dry-run").then((m) => ({ default: m.DryRunPage })));

/** A policy key in a path ([a-z][a-z0-9_-]{0,62}, policies.proto). */
const KEY = "([a-z][a-z0-9_-]{0,62})";

/** The page at `path` if it is one of governance's or policies', else null. */
export function authoringPage(path: string): ReactNode {
  if (path === "/governance") return <Deferred><Governance /></Deferred>;
  const graph = /^\/governance\/versions\/(\d+)$/.exec(path);
  if (graph) return <Deferred><GraphVersion version={Number(graph[1])} /></Deferred>;
  if (path === "/policies") return <Deferred><Policies /></Deferred>;
  if (path === "/new-policy") return <Deferred><NewPolicy /></Deferred>;
  if (path === "/dry-run") return <Deferred><DryRun /></Deferred>;
  let m = new RegExp(`^/policies/${KEY}$`).exec(path);
  if (m) return <Deferred><Policy key={m[1]} policyKey={m[1]!} /></Deferred>;
  m = new RegExp(`^/policies/${KEY}/versions/new$`).exec(path);
  if (m) return <Deferred><NewPolicyVersion key={m[1]} policyKey={m[1]!} /></Deferred>;
  m = new RegExp(`^/policies/${KEY}/versions/(\\d+)$`).exec(path);
  if (m) return <Deferred><PolicyVersion key={path} policyKey={m[1]!} version={Number(m[2])} /></Deferred>;
  return null;
}

/** The document title of such a page, or null. */
export function authoringTitle(path: string): string | null {
  if (path === "/governance") return "Governance";
  if (path.startsWith("/governance/versions/")) return "Authority graph version";
  if (path === "/policies") return "Policies";
  if (path === "/new-policy") return "New policy";
  if (path === "/dry-run") return "Dry run";
  if (/^\/policies\/[^/]+\/versions\/new$/.test(path)) return "New policy version";
  if (/^\/policies\/[^/]+\/versions\/\d+$/.test(path)) return "Policy version";
  if (path.startsWith("/policies/")) return "Policy";
  return null;
}
