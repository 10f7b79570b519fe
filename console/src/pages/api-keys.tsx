import { useId, useState, type FormEvent } from "react";
import { Permission, type ApiKey } from "../../../src/gen/mandate/v1/organizations_pb.js";
import { describeFailure } from "../api/errors";
import { useApiKeys, useCreateApiKey, useRevokeApiKey } from "../api/organization";
import { PERMISSION_MEANINGS, PERMISSION_NAMES, type PermissionName } from "../api/permissions";
import { useCan, useIdentity } from "../api/hooks";
import { Field, fieldError } from "../components/agent-fields";
import { ApiError, Loading } from "../components/api-error";
import { ConfirmButton } from "../components/confirm-button";
import { FocusedStatus } from "../components/focused-status";
import { Link } from "../components/link";
import { ScrollTable } from "../components/scroll-table";
import { OneTimeSecret } from "../components/secret";
import { formatTime, isoTime } from "../format";
import "../authoring.css";
import "../agents.css";
import "../organization.css";

/** A permission's wire name from its proto number. */
const nameOf = (p: Permission): string => Permission[p] ?? String(p);

/** /api-keys (ORG_ADMIN, see app.tsx): the organization's keys; create one (its secret shown once) or revoke one. */
export function ApiKeysPage() {
  const id = useId();
  return (
    <main aria-labelledby={`${id}-h`}>
      <p>
        <Link to="/">← Organization</Link>
      </p>
      <h1 id={`${id}-h`}>API keys</h1>
      <p className="muted">
        Every caller of the API, this console included, authenticates with a key of the organization. A key holds only the permissions it was created with; its
        secret is shown once, when it is created, and is stored as a hash. A revoked key is refused at once, for good.
      </p>
      <CreateKey />
      <KeyList />
    </main>
  );
}

function CreateKey() {
  const id = useId();
  const create = useCreateApiKey();
  const [name, setName] = useState("");
  const [chosen, setChosen] = useState<Set<PermissionName>>(new Set());
  const fields = create.error ? describeFailure(create.error).fields : undefined;
  const permissionsError = fields?.find((f) => f.field === "permissions" || f.field.startsWith("permissions["));
  const toggle = (p: PermissionName, on: boolean) =>
    setChosen((s) => {
      const next = new Set(s);
      if (on) next.add(p);
      else next.delete(p);
      return next;
    });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate(
      { name, permissions: PERMISSION_NAMES.filter((p) => chosen.has(p)).map((p) => Permission[p]) },
      {
        onSuccess: () => {
          setName("");
          setChosen(new Set());
        },
      },
    );
  };
  const created = create.data;
  return (
    <section className="card" aria-labelledby={`${id}-h`}>
      <h2 id={`${id}-h`} className="h3">
        Create a key
      </h2>
      {created && (
        <div className="created-key" data-testid="created-key">
          <p role="status" className="ok">
            Created key {created.name} (<code data-testid="created-key-id">{created.keyId}</code>) with {created.permissions.map(nameOf).join(", ")}.
          </p>
          <OneTimeSecret label="New key's secret" value={created.apiKey} />
          <button type="button" className="secondary" onClick={() => create.reset()}>
            Done: hide the secret
          </button>
        </div>
      )}
      <form onSubmit={submit} noValidate aria-label="Create a key">
        <Field label="Name" value={name} onChange={setName} error={fieldError(fields, "name")} help="Who or what uses it, e.g. “payments service” (1..200 characters)." required />
        <fieldset className="plain" aria-describedby={permissionsError ? `${id}-perm-error` : undefined}>
          <legend>Permissions (at least one)</legend>
          <ul className="permission-choices">
            {PERMISSION_NAMES.map((p) => (
              <li key={p}>
                <input
                  id={`${id}-${p}`}
                  type="checkbox"
                  checked={chosen.has(p)}
                  onChange={(e) => toggle(p, e.target.checked)}
                  aria-describedby={`${id}-${p}-m`}
                  aria-invalid={!!permissionsError}
                />{" "}
                <label htmlFor={`${id}-${p}`}>
                  <code>{p}</code>
                </label>{" "}
                <span id={`${id}-${p}-m`} className="muted small">
                  {PERMISSION_MEANINGS[p]}
                </span>
              </li>
            ))}
          </ul>
          {permissionsError && (
            <p id={`${id}-perm-error`} className="field-error" data-testid="field-error">
              Permissions: {permissionsError.message}.
            </p>
          )}
        </fieldset>
        <div className="actions">
          <button type="submit" disabled={create.isPending}>
            {create.isPending ? "Creating…" : "Create key"}
          </button>
        </div>
        <ApiError error={create.error} title="The key was not created" />
      </form>
    </section>
  );
}

function KeyList() {
  const id = useId();
  const keys = useApiKeys(useCan("ORG_ADMIN"));
  const revoke = useRevokeApiKey();
  const identity = useIdentity();
  const [done, setDone] = useState("");
  const run = (k: ApiKey) =>
    revoke.mutate(
      { keyId: k.keyId },
      {
        onSuccess: () => setDone(`Revoked key ${k.name}: the API refuses it from now on.`),
        onError: () => setDone(""),
      },
    );
  return (
    <section className="card" aria-labelledby={`${id}-h`}>
      <h2 id={`${id}-h`} className="h3">
        The organization's keys
      </h2>
      <FocusedStatus text={done} testId="revoke-done" />
      <ApiError error={revoke.error} title="The key was not revoked" />
      {keys.isPending ? (
        <Loading what="the keys" />
      ) : keys.error ? (
        <ApiError error={keys.error} title="The keys could not be read" />
      ) : (
        <ScrollTable label="Keys" testId="api-keys" className="wide" wrapClassName="keys-wrap" columns={["Name", "Key id", "Permissions", "Created", "State", <span className="visually-hidden">Action</span>]}>
          <tbody>
            {keys.data.apiKeys.map((k) => (
              <tr key={k.keyId} data-key-id={k.keyId}>
                <th scope="row">
                  {k.name}
                  {k.keyId === identity && <span className="muted small"> (this key)</span>}
                </th>
                <td className="nowrap">
                  <code>{k.keyId}</code>
                </td>
                <td data-testid="key-permissions">
                  {k.permissions.map((p) => (
                    <code key={p} className="permission-tag">
                      {nameOf(p)}
                    </code>
                  ))}
                </td>
                <td>
                  <time dateTime={isoTime(k.createdAt)}>{formatTime(k.createdAt)}</time>
                </td>
                <td data-testid="key-state">
                  {k.revokedAt ? (
                    <>
                      <span className="state agent-state-revoked">revoked</span>{" "}
                      <time className="muted small" dateTime={isoTime(k.revokedAt)}>
                        {formatTime(k.revokedAt)}
                      </time>
                    </>
                  ) : (
                    <span className="state agent-state-active">active</span>
                  )}
                </td>
                <td>
                  {!k.revokedAt && (
                    <ConfirmButton
                      label={
                        <>
                          Revoke<span className="visually-hidden"> {k.name}</span>
                        </>
                      }
                      title={`Revoke key ${k.name}?`}
                      description="Revoking is immediate and permanent: every call with this key is refused (401 unknown_key) from now on, and it cannot be restored. Whoever uses it needs a new key."
                      confirmLabel="Revoke key"
                      onConfirm={() => run(k)}
                      disabled={revoke.isPending}
                    >
                      {k.keyId === identity && <p className="small">This is the key this console is signed in with: you will be signed out.</p>}
                    </ConfirmButton>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </ScrollTable>
      )}
    </section>
  );
}
