import { useSyncExternalStore } from "react";

/** The console lives under /console; routes are paths below it, one per page. */
export const BASE = "/console";

const listeners = new Set<() => void>();
window.addEventListener("popstate", () => listeners.forEach((l) => l()));

/** The path below /console ("/", "/reviews", "/reviews/dec_…"), re-rendering on navigation. */
export function usePath(): string {
  return useSyncExternalStore(
    (l) => {
      listeners.add(l);
      return () => listeners.delete(l);
    },
    () => window.location.pathname.slice(BASE.length) || "/",
  );
}

/** Goes to a console path without reloading the page. */
export function navigate(to: string, options: { replace?: boolean } = {}): void {
  const url = BASE + to;
  if (url === window.location.pathname) return;
  if (options.replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  listeners.forEach((l) => l());
  window.scrollTo(0, 0);
}

/** Matches `pattern` ("/reviews/:id") against `path`; the named segments, or null. */
export function match(pattern: string, path: string): Record<string, string> | null {
  const p = pattern.split("/");
  const s = path.replace(/\/$/, "").split("/");
  if (p.length !== s.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < p.length; i++) {
    if (p[i]!.startsWith(":")) params[p[i]!.slice(1)] = decodeURIComponent(s[i]!);
    else if (p[i] !== s[i]) return null;
  }
  return params;
}
