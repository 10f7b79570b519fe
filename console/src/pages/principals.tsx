import { useId, useState, type FormEvent } from "react";
import { PrincipalKind } from "../../../src/gen/mandate/v1/principals_pb.js";
import { usePrincipalPages } from "../api/agents";
import { describeFailure } from "../api/errors";
import { usePermissions } from "../api/hooks";
import { useCreatePrincipal } from "../api/organization";
import { Field, fieldError } from "../components/agent-fields";
import { ApiError, Loading } from "../components/api-error";
import { Link } from "../components/link";
import { ScrollTable } from "../components/scroll-table";
import { formatTime, isoTime } from "../format";
import "../authoring.css";
import "../agents.css";
import "../organization.css";

/** The kinds a principal may be, in the proto's order, as a reader names them. */
const KINDS: { kind: PrincipalKind; label: string }[] = [
  { kind: PrincipalKind.PERSON, label: "Person" },
  { kind: PrincipalKind.ROLE, label: "Role" },
  { kind: PrincipalKind.ORG_UNIT, label: "Organizational unit" },
  { kind: PrincipalKind.SERVICE, label: "Service" },
];

const kindLabel = (kind: PrincipalKind): string => KINDS.find((k) => k.kind === kind)?.label ?? "unknown";

/** /principals: who agents act for; any key reads them, ORG_ADMIN creates them. */
export function PrincipalsPage() {
  const id = useId();
  const permissions = usePermissions();
  return (
    <main aria-labelledby={`${id}-h`}>
      <h1 id={`${id}-h`}>Principals</h1>
      <p className="muted">
        Principals are the people, roles, organizational units and services under whose authority agents act: every agent acts for one principal.
      </p>
      <p className="card" data-testid="governance-note">
        Governance documents do not create principals: they name them by external ref, and generating an authority graph version refuses a ref no principal
        has (<code>unknown_principal</code>). Create each principal your documents name here first, then <Link to="/governance">upload the documents</Link>.
      </p>
      {permissions.isPending ? null : permissions.data?.has("ORG_ADMIN") ? (
        <CreatePrincipal />
      ) : (
        <p className="muted small" data-testid="no-admin">
          This key lacks ORG_ADMIN: it can read the principals but not create them.
        </p>
      )}
      <PrincipalList />
    </main>
  );
}

function CreatePrincipal() {
  const id = useId();
  const create = useCreatePrincipal();
  const [displayName, setDisplayName] = useState("");
  const [kind, setKind] = useState<PrincipalKind>(PrincipalKind.UNSPECIFIED);
  const [externalRef, setExternalRef] = useState("");
  const fields = create.error ? describeFailure(create.error).fields : undefined;
  const kindError = fieldError(fields, "kind");
  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate(
      // An empty external ref is none (the field is optional; the API refuses an empty one).
      { displayName, kind, externalRef: externalRef.trim() || undefined },
      {
        onSuccess: () => {
          setDisplayName("");
          setKind(PrincipalKind.UNSPECIFIED);
          setExternalRef("");
        },
      },
    );
  };
  return (
    <form className="card" onSubmit={submit} noValidate aria-labelledby={`${id}-h`}>
      <h2 id={`${id}-h`} className="h3">
        Create a principal
      </h2>
      {create.data && (
        <p role="status" className="ok" data-testid="principal-created">
          Created {create.data.displayName} (<code>{create.data.principalId}</code>).
        </p>
      )}
      <Field label="Display name" value={displayName} onChange={setDisplayName} error={fieldError(fields, "display_name")} required />
      <label htmlFor={`${id}-kind`}>Kind</label>
      <select
        id={`${id}-kind`}
        value={kind}
        onChange={(e) => setKind(Number(e.target.value) as PrincipalKind)}
        required
        aria-required="true"
        aria-invalid={!!kindError}
        aria-describedby={kindError ? `${id}-kind-error` : undefined}
      >
        <option value={PrincipalKind.UNSPECIFIED}>Choose a kind</option>
        {KINDS.map((k) => (
          <option key={k.kind} value={k.kind}>
            {k.label}
          </option>
        ))}
      </select>
      {kindError && (
        <p id={`${id}-kind-error`} className="field-error" data-testid="field-error">
          Kind: {kindError.message}.
        </p>
      )}
      <Field
        label="External ref"
        value={externalRef}
        onChange={setExternalRef}
        error={fieldError(fields, "external_ref")}
        help="Optional: your own reference (an HR id, a role name): the governance documents name the principal by it. Unique in the organization; letters, digits and . _ : @ / -"
      />
      <div className="actions">
        <button type="submit" disabled={create.isPending}>
          {create.isPending ? "Creating…" : "Create principal"}
        </button>
      </div>
      <ApiError error={create.error} title="The principal was not created" />
    </form>
  );
}

function PrincipalList() {
  const principals = usePrincipalPages();
  const list = (principals.data?.pages ?? []).flatMap((p) => p.principals);
  return (
    <section className="card" aria-label="Principals">
      {principals.isPending ? (
        <Loading what="the principals" />
      ) : principals.error ? (
        <ApiError error={principals.error} title="The principals could not be read" />
      ) : list.length === 0 ? (
        <p className="empty">No principal yet.</p>
      ) : (
        <ScrollTable label="Principals" testId="principals" className="wide" columns={["Display name", "Kind", "External ref", "Principal id", "Created"]}>
          <tbody>
            {list.map((p) => (
              <tr key={p.principalId} data-principal-id={p.principalId}>
                <th scope="row">{p.displayName}</th>
                <td>{kindLabel(p.kind)}</td>
                <td>{p.externalRef ? <code>{p.externalRef}</code> : "—"}</td>
                <td>
                  <code>{p.principalId}</code>
                </td>
                <td>
                  <time dateTime={isoTime(p.createdAt)}>{formatTime(p.createdAt)}</time>
                </td>
              </tr>
            ))}
          </tbody>
        </ScrollTable>
      )}
      {principals.hasNextPage && (
        <button type="button" className="secondary" onClick={() => void principals.fetchNextPage()} disabled={principals.isFetchingNextPage}>
          {principals.isFetchingNextPage ? "Loading…" : "Show more principals"}
        </button>
      )}
    </section>
  );
}
