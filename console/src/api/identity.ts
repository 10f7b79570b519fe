import { useCallback, useSyncExternalStore } from "react";
import { useCredential } from "../session";

/*
 * Which identity (API key id) the signed-in key is. No RPC says so (docs/architecture.md, The
 * console), but some answers do in passing: a governance document this tab uploaded names its
 * author, a version this tab created is authored by it, and an approval the API refused as the
 * author's own is proof too. The console remembers what it learns, per key, in this page's
 * memory (session storage holds the credential and nothing else; a reload learns again), so
 * that it can disable what four eyes forbid (approving one's own version) and say why. Until it
 * knows, the button stays enabled and the API's refusal is shown.
 */

const listeners = new Set<() => void>();

let known: Record<string, string> = {};

/** A short tag of a secret: enough to tell this tab's keys apart, never the secret itself. */
function tagOf(secret: string): string {
  let h = 0;
  for (let i = 0; i < secret.length; i++) h = (Math.imul(h, 31) + secret.charCodeAt(i)) | 0;
  return (h >>> 0).toString(36);
}

/** Records that `secret` authenticates as `identity`. */
export function learnIdentity(secret: string, identity: string): void {
  const tag = tagOf(secret);
  if (!identity || known[tag] === identity) return;
  known = { ...known, [tag]: identity };
  for (const l of listeners) l();
}

/** The signed-in key's identity as far as this tab has learnt it, and a function to teach it. */
export function useIdentity(): { identity: string | undefined; learn: (identity: string) => void } {
  const credential = useCredential();
  const all = useSyncExternalStore(
    (l) => {
      listeners.add(l);
      return () => listeners.delete(l);
    },
    () => known,
  );
  const secret = credential?.kind === "key" ? credential.secret : "";
  const learn = useCallback((identity: string) => {
    if (secret) learnIdentity(secret, identity);
  }, [secret]);
  return { identity: secret ? all[tagOf(secret)] : undefined, learn };
}

/** Versions ("payments@3") this tab created, per key: their author is this key's identity. */
const created = new Set<string>();

/** Notes that the signed-in key (`secret`) created `ref`. */
export function noteCreated(secret: string, ref: string): void {
  created.add(`${tagOf(secret)} ${ref}`);
}

/** Whether the signed-in key (`secret`) created `ref` in this tab. */
export function createdHere(secret: string, ref: string): boolean {
  return created.has(`${tagOf(secret)} ${ref}`);
}
