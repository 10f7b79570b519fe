import { useId, useState, type FormEvent } from "react";
import { useQueryClient } from "@tanstack/react-query";
import { useCreateSandbox } from "../api/hooks";
import { ApiError } from "../components/api-error";
import { Link } from "../components/link";
import { OneTimeSecret } from "../components/secret";
import { navigate } from "../router";
import { setCredential } from "../session";

/** /sign-up: a self-service sandbox organization (no credential needed); its key is shown once. */
export function SignUpPage() {
  const id = useId();
  const [email, setEmail] = useState("");
  const create = useCreateSandbox();
  const queryClient = useQueryClient();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate({ email: email.trim() });
  };
  const sandbox = create.data;
  const useKey = () => {
    if (!sandbox) return;
    queryClient.clear();
    setCredential({ kind: "key", secret: sandbox.apiKey });
    navigate("/");
  };
  return (
    <main className="narrow" aria-labelledby={`${id}-h`}>
      <h1 id={`${id}-h`}>Create a sandbox organization</h1>
      {!sandbox ? (
        <>
          <p>An isolated organization on the same backend and authority path, with a key holding every permission and one starter policy.</p>
          <form onSubmit={submit} className="card" noValidate>
            <label htmlFor={`${id}-email`}>Email</label>
            <input id={`${id}-email`} type="email" autoComplete="email" required value={email} onChange={(e) => setEmail(e.target.value)} />
            <button type="submit" disabled={create.isPending}>
              {create.isPending ? "Creating…" : "Create sandbox"}
            </button>
            <ApiError error={create.error} title="The sandbox was not created" />
          </form>
        </>
      ) : (
        <section className="card" aria-label="Your sandbox organization">
          <p>
            Organization <code data-testid="organization-id">{sandbox.organizationId}</code> is ready, with the starter policy{" "}
            <code>{sandbox.starterPolicyKey}</code>.
          </p>
          <OneTimeSecret label="API key" value={sandbox.apiKey} />
          <button type="button" onClick={useKey}>
            Continue with this key
          </button>
        </section>
      )}
      <p>
        Have a key? <Link to="/sign-in">Sign in</Link>.
      </p>
    </main>
  );
}
