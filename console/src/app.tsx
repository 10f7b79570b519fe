import { useQueryClient } from "@tanstack/react-query";
import { useEffect, useRef, type ReactNode } from "react";
import { useOrganization, usePermissions } from "./api/hooks";
import { Gate } from "./components/gate";
import { Link } from "./components/link";
import { agentsPage, agentsTitle } from "./pages/agents-routes";
import { authoringPage, authoringTitle } from "./pages/authoring-routes";
import { decisionsPage, decisionsTitle } from "./pages/decisions-routes";
import { OperatorPage } from "./pages/operator";
import { organizationPage, organizationTitle } from "./pages/organization-routes";
import { OverviewPage } from "./pages/overview";
import { ReviewPage } from "./pages/review";
import { ReviewsPage } from "./pages/reviews";
import { SignInPage } from "./pages/sign-in";
import { SignUpPage } from "./pages/sign-up";
import { match, navigate, usePath } from "./router";
import { setCredential, useCredential } from "./session";

/** Pages anyone may open, signed in or not. */
const PUBLIC = ["/sign-in", "/sign-up", "/operator"];

/** The shell: a header with the organization and navigation, and one page per route. */
export function App() {
  const path = usePath();
  const credential = useCredential();
  const signedIn = credential?.kind === "key";
  const needsKey = !PUBLIC.includes(path);
  useEffect(() => {
    if (needsKey && !signedIn) navigate(credential?.kind === "operator" ? "/operator" : "/sign-in", { replace: true });
  }, [needsKey, signedIn, credential?.kind]);
  const first = useRef(true);
  useEffect(() => {
    document.title = `${titleOf(path)} · Mandate console`;
    // After a navigation, focus goes to the new page (as a page load would), for keyboards and screen readers.
    if (first.current) first.current = false;
    else document.getElementById("content")?.focus({ preventScroll: true });
  }, [path]);
  return (
    <>
      <a className="skip-link" href="#content">
        Skip to content
      </a>
      <Header />
      <div id="content" tabIndex={-1}>
        {needsKey && !signedIn ? null : <Page path={path} />}
      </div>
    </>
  );
}

function titleOf(path: string): string {
  if (path === "/sign-in") return "Sign in";
  if (path === "/sign-up") return "Sandbox sign-up";
  if (path === "/operator") return "Operator mode";
  const title = authoringTitle(path) ?? agentsTitle(path) ?? decisionsTitle(path) ?? organizationTitle(path);
  if (title) return title;
  if (path.startsWith("/reviews/")) return "Review";
  if (path === "/reviews") return "Review queue";
  return "Organization";
}

function Page({ path }: { path: string }): ReactNode {
  if (path === "/sign-in") return <SignInPage />;
  if (path === "/sign-up") return <SignUpPage />;
  if (path === "/operator") return <OperatorPage />;
  if (path === "/" || path === "") return <OverviewPage />;
  if (path === "/reviews") return <Gate permission="DECISION_READ"><ReviewsPage /></Gate>;
  const page = authoringPage(path) ?? agentsPage(path) ?? decisionsPage(path) ?? organizationPage(path);
  if (page) return page;
  const review = match("/reviews/:id", path);
  if (review) return <Gate permission="DECISION_READ"><ReviewPage decisionId={review.id!} /></Gate>;
  return (
    <main>
      <h1>Not found</h1>
      <p>
        The console has no page at this address. <Link to="/">Go to the organization</Link>.
      </p>
    </main>
  );
}

function Header() {
  const credential = useCredential();
  const queryClient = useQueryClient();
  const org = useOrganization();
  const permissions = usePermissions();
  const signOut = () => {
    setCredential(null);
    queryClient.clear();
    navigate("/sign-in");
  };
  return (
    <header className="top">
      <div className="brand">
        <Link to="/">Mandate</Link>
        {credential?.kind === "key" && org.data && <span className="org-name">{org.data.name}</span>}
        {credential?.kind === "operator" && <span className="org-name">Platform operator</span>}
      </div>
      <nav aria-label="Main">
        <ul>
          {credential?.kind === "key" && (
            <>
              <li>
                <Link to="/">Organization</Link>
              </li>
              <li><Link to="/governance">Governance</Link></li>
              <li><Link to="/policies">Policies</Link></li>
              <li><Link to="/agents">Agents</Link></li>
              <li><Link to="/principals">Principals</Link></li>
              {permissions.data?.has("ORG_ADMIN") && (
                <li>
                  <Link to="/api-keys">API keys</Link>
                </li>
              )}
              {permissions.data?.has("DECISION_READ") && (
                <li>
                  <Link to="/decisions">Decisions</Link>
                </li>
              )}
              {permissions.data?.has("DECISION_READ") && (
                <li>
                  <Link to="/reviews">Review queue</Link>
                </li>
              )}
            </>
          )}
          {credential?.kind === "operator" && (
            <li>
              <Link to="/operator">Organizations</Link>
            </li>
          )}
          {credential ? (
            <li>
              <button type="button" className="link-button" onClick={signOut}>
                Sign out
              </button>
            </li>
          ) : (
            <>
              <li>
                <Link to="/sign-in">Sign in</Link>
              </li>
              <li>
                <Link to="/sign-up">Sandbox sign-up</Link>
              </li>
            </>
          )}
        </ul>
      </nav>
    </header>
  );
}
