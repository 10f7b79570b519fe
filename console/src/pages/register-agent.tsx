import { useId, useState, type FormEvent } from "react";
import { useRegisterAgent, usePrincipalPages } from "../api/agents";
import { describeFailure } from "../api/errors";
import { usePermissions } from "../api/hooks";
import { ApiError, Loading } from "../components/api-error";
import { Link } from "../components/link";
import { Field, fieldError, LabelFields, PublicKeyField, wirePublicKey } from "../components/agent-fields";
import { navigate } from "../router";
import "../authoring.css";
import "../agents.css";

/** /agents/new: registers an agent from a pasted public key (AGENT_ADMIN); it starts registered, with no authority. */
export function RegisterAgentPage() {
  const id = useId();
  const permissions = usePermissions();
  return (
    <main aria-labelledby={`${id}-h`}>
      <p>
        <Link to="/agents">← Agents</Link>
      </p>
      <h1 id={`${id}-h`}>Register an agent</h1>
      {permissions.isPending ? (
        <Loading what="this key's permissions" />
      ) : permissions.data?.has("AGENT_ADMIN") ? (
        <RegisterForm />
      ) : (
        <p className="card muted">This key lacks AGENT_ADMIN: it cannot register agents.</p>
      )}
    </main>
  );
}

function RegisterForm() {
  const id = useId();
  const register = useRegisterAgent();
  const principals = usePrincipalPages();
  const [name, setName] = useState("");
  const [principalId, setPrincipalId] = useState("");
  const [publicKey, setPublicKey] = useState("");
  const [labels, setLabels] = useState({ owner: "", businessUnit: "", environment: "" });
  const fields = register.error ? describeFailure(register.error).fields : undefined;
  const principalError = fieldError(fields, "acting_for_principal_id");
  const list = (principals.data?.pages ?? []).flatMap((p) => p.principals);
  const submit = (e: FormEvent) => {
    e.preventDefault();
    register.mutate(
      {
        name,
        actingForPrincipalId: principalId,
        publicKey: wirePublicKey(publicKey),
        // A label left empty claims nothing (a repeated registration need not repeat it).
        owner: labels.owner || undefined,
        businessUnit: labels.businessUnit || undefined,
        environment: labels.environment || undefined,
      },
      { onSuccess: (agent) => navigate(`/agents/${encodeURIComponent(agent.agentId)}`) },
    );
  };
  return (
    <form className="card" onSubmit={submit} noValidate aria-label="Register an agent">
      <p className="muted small">
        The agent keeps its private key; paste only its public key. Registering the same key again with the same fields answers the same agent.
      </p>
      <Field label="Name" value={name} onChange={setName} error={fieldError(fields, "name")} required />
      <label htmlFor={`${id}-principal`}>Acts for (principal)</label>
      {principals.isPending ? (
        <Loading what="the principals" />
      ) : principals.error ? (
        <ApiError error={principals.error} title="The principals could not be read" />
      ) : (
        <>
          <select
            id={`${id}-principal`}
            value={principalId}
            onChange={(e) => setPrincipalId(e.target.value)}
            required
            aria-required="true"
            aria-invalid={!!principalError}
            aria-describedby={`${id}-principal-help`}
          >
            <option value="">Choose a principal</option>
            {list.map((p) => (
              <option key={p.principalId} value={p.principalId}>
                {p.displayName} ({p.externalRef || p.principalId})
              </option>
            ))}
          </select>
          <p id={`${id}-principal-help`} className={principalError ? "field-error" : "muted small help"} data-testid={principalError ? "field-error" : undefined}>
            {principalError
              ? `Acts for ${principalError.message}.`
              : list.length === 0
                ? <>This organization has no principal yet: <Link to="/principals">create one</Link> before registering an agent.</>
                : "The agent's actions are evaluated under this principal's authority. It never changes."}
          </p>
          {principals.hasNextPage && (
            <button type="button" className="secondary small-button" onClick={() => void principals.fetchNextPage()} disabled={principals.isFetchingNextPage}>
              Load more principals
            </button>
          )}
        </>
      )}
      <PublicKeyField label="Public key" value={publicKey} onChange={setPublicKey} error={fieldError(fields, "public_key")} />
      <fieldset className="plain">
        <legend>Responsibility labels (optional)</legend>
        <LabelFields values={labels} onChange={setLabels} fields={fields} />
      </fieldset>
      <div className="actions">
        <button type="submit" disabled={register.isPending}>
          {register.isPending ? "Registering…" : "Register agent"}
        </button>
      </div>
      <ApiError error={register.error} title="Registration was refused" />
    </form>
  );
}
