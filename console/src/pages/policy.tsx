import { useId, useState } from "react";
import { PolicyChangeKind, PolicyChangeState, type PolicyChange } from "../../../src/gen/mandate/v1/policies_pb.js";
import { useCan } from "../api/hooks";
import { useDisablePolicy, usePolicy, useRollbackPolicy } from "../api/policies";
import { ApiError, Loading } from "../components/api-error";
import { Link } from "../components/link";
import { VersionsTable } from "../components/version-facts";
import { formatTime, isoTime } from "../format";
import { POLICY_STATE } from "./policies";
import { ConfirmButton } from "../components/confirm-button";
import "../authoring.css";
import "../agents.css";

/**
 * The last rollback or disable this tab asked for, per policy. The API has no call that lists
 * pending changes (a request records nothing), so the console shows what its own calls answered.
 */
const lastChanges = new Map<string, PolicyChange>();

/** /policies/:key: the policy's versions, and rollback or disable (four eyes). */
export function PolicyPage({ policyKey }: { policyKey: string }) {
  const id = useId();
  const policy = usePolicy(policyKey);
  const canAuthor = useCan("POLICY_AUTHOR");
  return (
    <main aria-labelledby={`${id}-h`}>
      <p>
        <Link to="/policies">← Policies</Link>
      </p>
      <h1 id={`${id}-h`}>Policy {policyKey}</h1>
      {policy.isPending ? (
        <Loading what="the policy" />
      ) : policy.error ? (
        <ApiError error={policy.error} title="The policy could not be read" />
      ) : (
        <>
          <section className="card" aria-label="Policy">
            <dl className="facts">
              <dt>Description</dt>
              <dd>{policy.data.description || "—"}</dd>
              <dt>Active version</dt>
              <dd data-testid="active-version">{policy.data.activeVersion ? `v${policy.data.activeVersion}` : "none"}</dd>
            </dl>
            {canAuthor && (
              <p className="actions">
                <Link to={`/policies/${policyKey}/versions/new`} className="button-link">
                  New version
                </Link>
              </p>
            )}
          </section>
          <section className="card" aria-labelledby={`${id}-v`}>
            <h2 id={`${id}-v`} className="h3">
              Versions
            </h2>
            <VersionsTable
              label="Versions"
              testId="policy-versions"
              rows={[...policy.data.versions]
                .sort((a, b) => b.version - a.version)
                .map((v) => ({ ...v, state: POLICY_STATE[v.state], href: `/policies/${policyKey}/versions/${v.version}` }))}
            />
          </section>
          {(policy.data.activeVersion > 0 || lastChanges.has(policyKey)) && <Changes policyKey={policyKey} active={policy.data.activeVersion > 0} />}
        </>
      )}
    </main>
  );
}

/** Rollback and disable: the first call requests, a call of the same kind by another POLICY_APPROVER applies. */
function Changes({ policyKey, active }: { policyKey: string; active: boolean }) {
  const id = useId();
  const canAuthor = useCan("POLICY_AUTHOR");
  const canApprove = useCan("POLICY_APPROVER");
  const rollback = useRollbackPolicy();
  const disable = useDisablePolicy();
  const [note, setNote] = useState("");
  const [change, setChange] = useState<PolicyChange | undefined>(lastChanges.get(policyKey));
  if (!canAuthor && !canApprove) return null;
  const done = (c: PolicyChange) => {
    lastChanges.set(policyKey, c);
    setChange(c);
    setNote("");
  };
  const busy = rollback.isPending || disable.isPending;
  return (
    <section className="card" aria-labelledby={`${id}-h`}>
      <h2 id={`${id}-h`} className="h3">
        Roll back or disable
      </h2>
      <p className="muted small">
        Four eyes: the first request waits (pending approval); the same request by another identity holding POLICY_APPROVER applies it. Roll back re-activates
        the version the active one replaced; disable leaves the policy out of the bundle.
      </p>
      {active ? (
        <>
          <label htmlFor={`${id}-note`}>Note (recorded in the evidence)</label>
          <input id={`${id}-note`} value={note} onChange={(e) => setNote(e.target.value)} />
          <div className="actions">
            <ConfirmButton
              label="Roll back"
              title={`Roll back ${policyKey}?`}
              description="The version the active one replaced becomes active again: the next Intents are decided by it. The first request waits for another approver; the second applies it at once."
              confirmLabel="Roll back"
              disabled={busy}
              onConfirm={() => rollback.mutate({ policyKey, note }, { onSuccess: done })}
            />
            <ConfirmButton
              label="Disable"
              title={`Disable ${policyKey}?`}
              description="The policy leaves the bundle: the actions it covered go to human review as unrecognized until a version is published again. The first request waits for another approver; the second applies it at once."
              confirmLabel="Disable"
              disabled={busy}
              onConfirm={() => disable.mutate({ policyKey, note }, { onSuccess: done })}
            />
          </div>
        </>
      ) : (
        <p className="muted small">No version is active: there is nothing to roll back or disable.</p>
      )}
      <ApiError error={rollback.error} title="Rollback was refused" />
      <ApiError error={disable.error} title="Disabling was refused" />
      {change && <ChangeState change={change} />}
    </section>
  );
}

function ChangeState({ change: c }: { change: PolicyChange }) {
  const kind = c.kind === PolicyChangeKind.ROLLBACK ? "Rollback" : "Disable";
  const pending = c.state === PolicyChangeState.PENDING_APPROVAL;
  return (
    <div className={pending ? "card pending-change" : "card resolution"} role="status" data-testid="policy-change">
      <p>
        <strong>
          {kind} {pending ? "pending approval" : "applied"}
        </strong>{" "}
        — from v{c.fromVersion}
        {c.kind === PolicyChangeKind.ROLLBACK ? ` to v${c.toVersion}` : ""}, requested by <code>{c.requestedBy}</code> at{" "}
        <time dateTime={isoTime(c.requestedAt)}>{formatTime(c.requestedAt)}</time>
        {pending ? (
          ". Another identity holding POLICY_APPROVER must make the same request to apply it."
        ) : (
          <>
            , approved by <code>{c.approvedBy}</code>.
          </>
        )}
      </p>
    </div>
  );
}
