import { Suspense, type ReactNode } from "react";
import { Loading } from "./api-error";

/** A page loaded when first opened (React.lazy), with a loading line meanwhile. */
export function Deferred({ children }: { children: ReactNode }) {
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
