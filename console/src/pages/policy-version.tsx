import { useId, useState, type FormEvent } from "react";
import { Outcome } from "../../../src/gen/mandate/v1/decisions_pb.js";
import { PolicyVersionState, type PolicyVersion } from "../../../src/gen/mandate/v1/policies_pb.js";
import { describeFailure, failureCode } from "../api/errors";
import { useCan, useIdentity } from "../api/hooks";
import { useApprovePolicyVersion, usePolicy, usePublishPolicyVersion, useReplayPolicies, useSubmitPolicyVersion } from "../api/policies";
import { ApiError, Loading } from "../components/api-error";
import { CodeView, type LineNote } from "../components/code-view";
import { Link } from "../components/link";
import { VersionFactItems } from "../components/version-facts";
import { POLICY_STATE } from "./policies";
import { sourceText } from "./policy-editor";
import { ScrollTable } from "../components/scroll-table";
import "../authoring.css";

/** /policies/:key/versions/:version: the rules document and its Rego, the lifecycle, and a replay. */
export function PolicyVersionPage({ policyKey, version }: { policyKey: string; version: number }) {
  const id = useId();
  const policy = usePolicy(policyKey);
  const v = policy.data?.versions.find((x) => x.version === version);
  return (
    <main aria-labelledby={`${id}-h`}>
      <p>
        <Link to={`/policies/${policyKey}`}>← {policyKey}</Link>
      </p>
      <h1 id={`${id}-h`}>
        {policyKey} version {version}
      </h1>
      {policy.isPending ? (
        <Loading what="the policy" />
      ) : policy.error ? (
        <ApiError error={policy.error} title="The policy could not be read" />
      ) : !v ? (
        <p className="card">This policy has no version {version}.</p>
      ) : (
        <VersionView policyKey={policyKey} v={v} activeVersion={policy.data.activeVersion} />
      )}
    </main>
  );
}

function VersionView({ policyKey, v, activeVersion }: { policyKey: string; v: PolicyVersion; activeVersion: number }) {
  const identity = useIdentity();
  const publish = usePublishPolicyVersion();
  const source = sourceText(v.source);
  // Compile errors located in this policy's Rego file (policies/<key>.rego) are shown at their line.
  const compile = publish.error && failureCode(publish.error) === "policy_compile_failed" ? describeFailure(publish.error).fields : [];
  const regoNotes: LineNote[] = compile.filter((f) => f.line > 0 && (f.field === `policies/${policyKey}.rego` || f.field === policyKey)).map((f) => ({ line: f.line, column: f.column || undefined, message: `${f.message} (${f.code})` }));
  return (
    <>
      <section className="card" aria-label="Version">
        <dl className="facts">
          <dt>State</dt>
          <dd>
            <span className={`state state-${POLICY_STATE[v.state]}`} data-testid="policy-state">
              {POLICY_STATE[v.state]}
            </span>
            {activeVersion && activeVersion !== v.version ? <span className="muted"> · v{activeVersion} is active</span> : null}
          </dd>
          <VersionFactItems v={v} approverTestId="policy-approver" />
        </dl>
        <Lifecycle policyKey={policyKey} v={v} identity={identity} publish={publish} />
      </section>
      <section className="card" aria-labelledby="source-h">
        <h2 id="source-h" className="h3">
          {source.language === "rego" ? "Hand-written Rego" : "Rules document"}
        </h2>
        <CodeView code={source.text} language={source.language} label={`The source of ${policyKey} version ${v.version}`} testId="policy-source" />
      </section>
      <section className="card" aria-labelledby="rego-h">
        <h2 id="rego-h" className="h3">
          Generated Rego
        </h2>
        <CodeView code={v.rego} language="rego" label={`The Rego of ${policyKey} version ${v.version}`} notes={regoNotes} testId="policy-rego" />
      </section>
      <p>
        <Link to={`/dry-run?policy=${encodeURIComponent(policyKey)}&version=${v.version}`}>Dry-run an Intent against this version</Link>
      </p>
      <Replay policyKey={policyKey} version={v.version} />
    </>
  );
}

function Lifecycle({ policyKey, v, identity, publish }: {
  policyKey: string;
  v: PolicyVersion;
  identity: string | undefined;
  publish: ReturnType<typeof usePublishPolicyVersion>;
}) {
  const canAuthor = useCan("POLICY_AUTHOR");
  const canApprove = useCan("POLICY_APPROVER");
  const submit = useSubmitPolicyVersion();
  const approve = useApprovePolicyVersion();
  const ref = { policyKey, version: v.version };
  const own = identity !== undefined && identity === v.author;
  return (
    <div className="lifecycle">
      {v.state === PolicyVersionState.DRAFT &&
        (canAuthor ? (
          <div className="actions">
            <button type="button" disabled={submit.isPending} onClick={() => submit.mutate(ref)}>
              Submit for review
            </button>
          </div>
        ) : (
          <p className="muted small">Submitting needs POLICY_AUTHOR, which this key lacks.</p>
        ))}
      {v.state === PolicyVersionState.IN_REVIEW &&
        (canApprove ? (
          <>
            <div className="actions">
              <button
                type="button"
                disabled={approve.isPending || own}
                aria-describedby={own ? "policy-own" : undefined}
                onClick={() => approve.mutate(ref)}
              >
                Approve
              </button>
            </div>
            {own && (
              <p id="policy-own" className="muted small" data-testid="approve-reason">
                You cannot approve this version: this key authored it, and four eyes require another identity holding POLICY_APPROVER.
              </p>
            )}
          </>
        ) : (
          <p className="muted small">Waiting for a POLICY_APPROVER other than its author; this key lacks POLICY_APPROVER.</p>
        ))}
      {v.state === PolicyVersionState.APPROVED &&
        (canApprove ? (
          <div className="actions">
            <button type="button" disabled={publish.isPending} onClick={() => publish.mutate(ref)}>
              Publish
            </button>
          </div>
        ) : (
          <p className="muted small">Publishing needs POLICY_APPROVER, which this key lacks.</p>
        ))}
      {v.state === PolicyVersionState.ACTIVE && <p className="ok">Active: Intents for its actions are decided by this version.</p>}
      <ApiError error={submit.error} title="Submitting was refused" />
      <ApiError error={approve.error} title="Approval was refused" />
      <ApiError error={publish.error} title="Publishing was refused (the previously active version stays active)" />
      {publish.isSuccess && <p role="status">Published: version {v.version} is active.</p>}
    </div>
  );
}

const OUTCOME = (o: Outcome) => Outcome[o] ?? "UNSPECIFIED";

/** Replays this version against the organization's latest recorded Intents and lists the decisions that would change. */
function Replay({ policyKey, version }: { policyKey: string; version: number }) {
  const id = useId();
  const canAuthor = useCan("POLICY_AUTHOR");
  const canApprove = useCan("POLICY_APPROVER");
  const canReplay = canAuthor || canApprove;
  const replay = useReplayPolicies();
  const [limit, setLimit] = useState("1000");
  if (!canReplay) return null;
  const run = (e: FormEvent) => {
    e.preventDefault();
    replay.mutate({ policyVersions: { [policyKey]: version }, limit: Number(limit) || 0 });
  };
  const r = replay.data;
  return (
    <form className="card" aria-labelledby={`${id}-h`} onSubmit={run} noValidate>
      <h2 id={`${id}-h`} className="h3">
        Replay against recorded Intents
      </h2>
      <p className="muted small">Evaluates the latest recorded Intents with this version in place of the active one, each at its recorded time. Nothing is recorded.</p>
      <label htmlFor={`${id}-limit`}>How many of the latest Intents (1 to 10,000)</label>
      <input id={`${id}-limit`} type="number" min={1} max={10000} value={limit} onChange={(e) => setLimit(e.target.value)} />
      <div className="actions">
        <button type="submit" disabled={replay.isPending}>
          Replay
        </button>
      </div>
      <ApiError error={replay.error} title="The replay was refused" />
      {r && (
        <div role="status" data-testid="replay-result">
          <p>
            <strong>{r.evaluated}</strong> Intents evaluated: <strong>{r.unchanged}</strong> unchanged, <strong data-testid="flip-count">{r.flipped.length}</strong> would
            change.
          </p>
          {r.flipsByOutcome.length > 0 && (
            <ul aria-label="Flips by outcome">
              {r.flipsByOutcome.map((f, i) => (
                <li key={i}>
                  <span className={`outcome-${OUTCOME(f.oldOutcome)}`}>{OUTCOME(f.oldOutcome)}</span> → <span className={`outcome-${OUTCOME(f.newOutcome)}`}>{OUTCOME(f.newOutcome)}</span>: {f.count}
                </li>
              ))}
            </ul>
          )}
          {r.flipped.length > 0 && (
            <ScrollTable label="Flipped decisions" testId="flips" caption="Decisions that would change, newest first" columns={["Decision", "Recorded", "Replayed"]}>
              <tbody>
                {r.flipped.map((f) => (
                  <tr key={f.decisionId} data-decision-id={f.decisionId}>
                    <th scope="row">
                      <code>{f.decisionId}</code>
                    </th>
                    <td>
                      <span className={`outcome-${OUTCOME(f.old?.outcome ?? Outcome.UNSPECIFIED)}`}>{OUTCOME(f.old?.outcome ?? Outcome.UNSPECIFIED)}</span> <code>{f.old?.reason}</code>
                    </td>
                    <td>
                      <span className={`outcome-${OUTCOME(f.new?.outcome ?? Outcome.UNSPECIFIED)}`}>{OUTCOME(f.new?.outcome ?? Outcome.UNSPECIFIED)}</span> <code>{f.new?.reason}</code>
                    </td>
                  </tr>
                ))}
              </tbody>
            </ScrollTable>
          )}
          <p className="muted small">
            Evaluated: {Object.entries(r.policyVersions).map(([k, n]) => `${k} v${n}`).join(", ")}
            {r.graphVersion ? `, authority graph v${r.graphVersion}` : ""}; bundle <code>{r.bundleDigest.slice(0, 16)}…</code>
          </p>
        </div>
      )}
    </form>
  );
}
