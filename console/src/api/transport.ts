import type { Interceptor, Transport } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { credentialHeaders, currentCredential, type Credential } from "../session";

/**
 * The API is this same origin's Connect protocol (JSON), so no CORS is involved; the credential
 * travels as the header authenticate.ts reads (Authorization: Bearer, or X-Service-Operator-Key).
 */
function withCredential(get: () => Credential | null): Interceptor {
  return (next) => (req) => {
    for (const [name, value] of Object.entries(credentialHeaders(get()))) req.header.set(name, value);
    return next(req);
  };
}

/** The transport every page uses: it sends the signed-in credential of this tab. */
export const apiTransport: Transport = createConnectTransport({
  baseUrl: window.location.origin,
  interceptors: [withCredential(currentCredential)],
});

/** A transport bound to one credential, for checking a key before signing in with it. */
export function transportFor(credential: Credential | null): Transport {
  return createConnectTransport({ baseUrl: window.location.origin, interceptors: [withCredential(() => credential)] });
}
