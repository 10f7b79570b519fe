import { useSyncExternalStore } from "react";

/**
 * Who the console acts as: an organization's API key, or the platform operator key. Kept in
 * sessionStorage (gone when the tab closes, never in a URL, never in localStorage) and sent by
 * the transport as the header the API expects (src/transport/authenticate.ts).
 */
export type Credential = { kind: "key"; secret: string } | { kind: "operator"; secret: string };

const STORAGE_KEY = "mandate.console.credential";
const listeners = new Set<() => void>();

function read(): Credential | null {
  try {
    const raw = sessionStorage.getItem(STORAGE_KEY);
    if (!raw) return null;
    const parsed = JSON.parse(raw) as Credential;
    return (parsed.kind === "key" || parsed.kind === "operator") && typeof parsed.secret === "string" ? parsed : null;
  } catch {
    return null;
  }
}

let current = read();

/** The credential of this tab, or null when signed out. */
export function currentCredential(): Credential | null {
  return current;
}

/** Signs in (a credential) or out (null) for this tab. */
export function setCredential(credential: Credential | null): void {
  current = credential;
  if (credential) sessionStorage.setItem(STORAGE_KEY, JSON.stringify(credential));
  else sessionStorage.removeItem(STORAGE_KEY);
  for (const l of listeners) l();
}

/** The current credential, re-rendering on sign-in and sign-out. */
export function useCredential(): Credential | null {
  return useSyncExternalStore(
    (l) => {
      listeners.add(l);
      return () => listeners.delete(l);
    },
    () => current,
  );
}

/** The HTTP headers a credential travels as. */
export function credentialHeaders(credential: Credential | null): Record<string, string> {
  if (!credential) return {};
  return credential.kind === "key" ? { authorization: `Bearer ${credential.secret}` } : { "x-service-operator-key": credential.secret };
}
