import { useId, useState, type FormEvent } from "react";
import { useQueryClient } from "@tanstack/react-query";
import { useCheckCredential } from "../api/hooks";
import { ApiError } from "../components/api-error";
import { Link } from "../components/link";
import { navigate } from "../router";
import { setCredential } from "../session";

/** /sign-in: an organization's API key, checked against the API, then kept for this tab only. */
export function SignInPage() {
  const id = useId();
  const [secret, setSecret] = useState("");
  const check = useCheckCredential();
  const queryClient = useQueryClient();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    const credential = { kind: "key" as const, secret: secret.trim() };
    check.mutate(credential, {
      onSuccess: () => {
        queryClient.clear();
        setCredential(credential);
        navigate("/");
      },
    });
  };
  return (
    <main className="narrow" aria-labelledby={`${id}-h`}>
      <h1 id={`${id}-h`}>Sign in</h1>
      {new URLSearchParams(window.location.search).has("expired") && (
        <p className="error" role="alert">
          You were signed out: the API no longer accepts that key (<code>unknown_key</code>: revoked, or never valid).
        </p>
      )}
      <p>Sign in with an API key of your organization. It is kept in this tab's session storage only, and sent to the API as <code>Authorization: Bearer</code>.</p>
      <form onSubmit={submit} className="card">
        <label htmlFor={`${id}-key`}>API key</label>
        <input
          id={`${id}-key`}
          type="password"
          autoComplete="off"
          spellCheck={false}
          required
          value={secret}
          onChange={(e) => setSecret(e.target.value)}
          placeholder="mk_…"
        />
        <button type="submit" disabled={check.isPending || secret.trim() === ""}>
          {check.isPending ? "Signing in…" : "Sign in"}
        </button>
        <ApiError error={check.error} title="Sign-in failed" />
      </form>
      <p>
        No organization yet? <Link to="/sign-up">Create a sandbox organization</Link>. Platform operator? <Link to="/operator">Operator mode</Link>.
      </p>
    </main>
  );
}
