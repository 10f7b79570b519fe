import { TransportProvider } from "@connectrpc/connect-query";
import { QueryCache, QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { failureCode } from "./api/errors";
import { apiTransport } from "./api/transport";
import { App } from "./app";
import { navigate } from "./router";
import { currentCredential, setCredential } from "./session";
import "./styles.css";

/**
 * A key revoked (or an organization's key rotated away) while the tab is open: every call now
 * answers 401 unknown_key, so the tab signs out and says why on the sign-in page.
 */
function signOutOnUnknownKey(err: unknown): void {
  if (failureCode(err) !== "unknown_key" || currentCredential()?.kind !== "key") return;
  setCredential(null);
  queryClient.clear();
  navigate("/sign-in?expired=1");
}

const queryClient: QueryClient = new QueryClient({
  queryCache: new QueryCache({ onError: signOutOnUnknownKey }),
  defaultOptions: {
    // An API refusal (4xx) is an answer to show, not a reason to ask again.
    queries: { retry: false, refetchOnWindowFocus: true },
  },
});

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <TransportProvider transport={apiTransport}>
      <QueryClientProvider client={queryClient}>
        <App />
      </QueryClientProvider>
    </TransportProvider>
  </StrictMode>,
);
