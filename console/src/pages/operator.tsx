import { useId, useState, type FormEvent } from "react";
import { useQueryClient } from "@tanstack/react-query";
import { useCreateOrganization } from "../api/hooks";
import { ApiError } from "../components/api-error";
import { Link } from "../components/link";
import { OneTimeSecret } from "../components/secret";
import { navigate } from "../router";
import { setCredential, useCredential } from "../session";

/**
 * /operator: the platform operator (X-Service-Operator-Key) creates organizations, each with its
 * first admin key (onboarding step 1). The operator key is kept in this tab's session like an
 * API key; the API checks it on the first call (it has no call that only checks it).
 */
export function OperatorPage() {
  const id = useId();
  const credential = useCredential();
  const queryClient = useQueryClient();
  const [operatorKey, setOperatorKey] = useState("");
  const [name, setName] = useState("");
  const create = useCreateOrganization();

  if (credential?.kind !== "operator") {
    const signIn = (e: FormEvent) => {
      e.preventDefault();
      queryClient.clear();
      setCredential({ kind: "operator", secret: operatorKey.trim() });
    };
    return (
      <main className="narrow" aria-labelledby={`${id}-h`}>
        <h1 id={`${id}-h`}>Operator mode</h1>
        <p>The platform operator key creates organizations. It is kept in this tab's session storage only.</p>
        <form onSubmit={signIn} className="card">
          <label htmlFor={`${id}-op`}>Operator key</label>
          <input id={`${id}-op`} type="password" autoComplete="off" spellCheck={false} required value={operatorKey} onChange={(e) => setOperatorKey(e.target.value)} />
          <button type="submit" disabled={operatorKey.trim() === ""}>
            Use operator key
          </button>
        </form>
        <p>
          <Link to="/sign-in">Sign in with an API key instead</Link>
        </p>
      </main>
    );
  }

  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate({ name: name.trim() });
  };
  const created = create.data;
  return (
    <main aria-labelledby={`${id}-h`}>
      <h1 id={`${id}-h`}>Create an organization</h1>
      <form onSubmit={submit} className="card narrow-card" noValidate>
        <label htmlFor={`${id}-name`}>Organization name</label>
        <input id={`${id}-name`} type="text" required maxLength={200} value={name} onChange={(e) => setName(e.target.value)} />
        <button type="submit" disabled={create.isPending}>
          {create.isPending ? "Creating…" : "Create organization"}
        </button>
        <ApiError error={create.error} title="The organization was not created" />
      </form>
      {created && (
        <section className="card narrow-card" aria-label="Created organization">
          <h2>{created.organization?.name}</h2>
          <p>
            Organization <code data-testid="organization-id">{created.organizationId}</code> was created. Its first key holds every permission (ORG_ADMIN included): hand it to
            the organization's administrator.
          </p>
          <OneTimeSecret label="First admin key" value={created.apiKey} />
          <button
            type="button"
            onClick={() => {
              queryClient.clear();
              setCredential({ kind: "key", secret: created.apiKey });
              navigate("/");
            }}
          >
            Sign in as this organization
          </button>
        </section>
      )}
    </main>
  );
}
