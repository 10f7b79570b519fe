import { useId } from "react";
import { PolicyVersionState, type Policy } from "../../../src/gen/mandate/v1/policies_pb.js";
import { useCan } from "../api/hooks";
import { usePolicies } from "../api/policies";
import { ApiError, Loading } from "../components/api-error";
import { Link } from "../components/link";
import { ScrollTable } from "../components/scroll-table";
import "../authoring.css";

/** A version state's wire name ("in_review"), as the API documents it. */
export const POLICY_STATE: Record<PolicyVersionState, string> = {
  [PolicyVersionState.UNSPECIFIED]: "unknown",
  [PolicyVersionState.DRAFT]: "draft",
  [PolicyVersionState.IN_REVIEW]: "in_review",
  [PolicyVersionState.APPROVED]: "approved",
  [PolicyVersionState.ACTIVE]: "active",
  [PolicyVersionState.SUPERSEDED]: "superseded",
  [PolicyVersionState.DISABLED]: "disabled",
};

/** The policy's newest version, or undefined. */
export function latestVersion(p: Policy) {
  return p.versions.reduce<Policy["versions"][number] | undefined>((a, v) => (!a || v.version > a.version ? v : a), undefined);
}

/** /policies: every policy with its active version and its newest version's state. */
export function PoliciesPage() {
  const id = useId();
  const policies = usePolicies();
  const canAuthor = useCan("POLICY_AUTHOR");
  return (
    <main aria-labelledby={`${id}-h`}>
      <h1 id={`${id}-h`}>Policies</h1>
      <p className="muted">
        Runtime policies decide each Intent. A version goes draft → in review → approved (by another identity) → active; publishing compiles the
        organization&apos;s bundle.
      </p>
      {canAuthor && (
        <p className="actions">
          <Link to="/new-policy" className="button-link">
            New policy
          </Link>
          <Link to="/dry-run" className="button-link secondary">
            Dry-run an Intent
          </Link>
        </p>
      )}
      <section className="card" aria-label="Policies">
        {policies.isPending ? (
          <Loading what="the policies" />
        ) : policies.error ? (
          <ApiError error={policies.error} title="The policies could not be read" />
        ) : policies.data.policies.length === 0 ? (
          <p className="empty">No policy yet.</p>
        ) : (
          <ScrollTable label="Policies" testId="policies" columns={["Policy", "Description", "Active version", "Newest version"]}>
            <tbody>
              {policies.data.policies.map((p) => {
                const latest = latestVersion(p);
                return (
                  <tr key={p.policyKey} data-policy={p.policyKey}>
                    <th scope="row">
                      <Link to={`/policies/${p.policyKey}`}>{p.policyKey}</Link>
                    </th>
                    <td>{p.description || "—"}</td>
                    <td data-testid="active-version">{p.activeVersion ? `v${p.activeVersion}` : "none"}</td>
                    <td>
                      {latest ? (
                        <>
                          v{latest.version} <span className={`state state-${POLICY_STATE[latest.state]}`}>{POLICY_STATE[latest.state]}</span>
                        </>
                      ) : (
                        "—"
                      )}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </ScrollTable>
        )}
      </section>
    </main>
  );
}
