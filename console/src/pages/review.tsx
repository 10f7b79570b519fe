import { useId, useState, type FormEvent, type ReactNode } from "react";
import { DecisionStatus, Outcome, ReviewResolution, type Decision, type Resolution } from "../../../src/gen/mandate/v1/decisions_pb.js";
import { useCan, useDecision, useIdentity, useReviewDecision } from "../api/hooks";
import { ApiError, Loading } from "../components/api-error";
import { DecisionFacts } from "../components/decision-facts";
import { Link } from "../components/link";
import { formatTime, intentText, isoTime } from "../format";

/** How many approvals a review needs: two for requires_dual_approval (src/domain/decisions.ts). */
function approvalsNeeded(d: Decision): number {
  return d.reason === "requires_dual_approval" ? 2 : 1;
}

/** /reviews/:id: one decision, its attempted Intent, approvals so far, and the reviewer's form or the resolution. */
export function ReviewPage({ decisionId }: { decisionId: string }) {
  return <DecisionShell decisionId={decisionId} back={<Link to="/reviews">← Review queue</Link>} view={DecisionView} />;
}

/** A decision's page: a link back, the decision's id as its heading, and `view` of the decision once GetDecision answers. */
export function DecisionShell({ decisionId, back, view: View }: { decisionId: string; back: ReactNode; view: (props: { decision: Decision }) => ReactNode }) {
  const id = useId();
  const decision = useDecision(decisionId);
  return (
    <main aria-labelledby={`${id}-h`}>
      <p>{back}</p>
      <h1 id={`${id}-h`}>
        Decision <code>{decisionId}</code>
      </h1>
      {decision.isPending ? (
        <Loading what="the decision" />
      ) : decision.error ? (
        <ApiError error={decision.error} title="The decision could not be read" />
      ) : (
        <View decision={decision.data} />
      )}
    </main>
  );
}

function DecisionView({ decision: d }: { decision: Decision }) {
  const resolved = d.status === DecisionStatus.RESOLVED;
  const needed = approvalsNeeded(d);
  // Held here, not in the form: a review refused because someone else resolved it meanwhile
  // re-reads the decision, the form goes, and the refusal must still say why.
  const review = useReviewDecision();
  return (
    <>
      <section className="card" aria-label="Decision">
        <p>
          Outcome <strong data-testid="outcome">{Outcome[d.outcome]}</strong>
          {d.outcome === Outcome.HUMAN_REVIEW && (
            <>
              , status{" "}
              <strong data-testid="status" className={resolved ? "status-resolved" : "status-pending"}>
                {resolved ? "RESOLVED" : "PENDING"}
              </strong>
            </>
          )}
          {needed === 2 && !resolved && <span className="muted"> · needs two approvals by different reviewers</span>}
        </p>
        <DecisionFacts decision={d} />
      </section>
      {d.approvals.length > 0 && !resolved && (
        <section className="card" aria-label="Approvals so far">
          <h2 className="h3">
            Approvals so far ({d.approvals.length} of {needed})
          </h2>
          <ul>
            {d.approvals.map((a, i) => (
              <li key={i} data-testid="approval">
                {i === 0 ? "Approved first by" : "Approved by"} <code>{a.resolvedBy}</code> at <time dateTime={isoTime(a.resolvedAt)}>{formatTime(a.resolvedAt)}</time>: “{a.reason}”
              </li>
            ))}
          </ul>
          <p className="muted small">The same reviewer cannot approve twice: the second approval must come from another key.</p>
        </section>
      )}
      {resolved && d.resolution ? (
        <>
          <ApiError error={review.error} title="The review was refused" />
          <ResolutionCard decision={d} resolution={d.resolution} />
          <p className="card">
            <Link to={`/decisions/${encodeURIComponent(d.decisionId)}`}>Decision and evidence record</Link>
            <span className="muted"> · its signed evidence, checked in your browser</span>
          </p>
        </>
      ) : d.status === DecisionStatus.PENDING ? (
        <ReviewForm decision={d} review={review} />
      ) : (
        <p className="card muted">An {Outcome[d.outcome]} decision is final the moment it is returned: there is nothing to review.</p>
      )}
      <section className="card" aria-label="Attempted Intent">
        <h2 className="h3">Attempted Intent</h2>
        <pre className="intent" tabIndex={0} aria-label="The Intent as recorded">
          {intentText(d.intent)}
        </pre>
      </section>
    </>
  );
}

/** How a resolved review ended: the resolution, who gave it and when, the note, and a dual review's approvals. */
export function ResolutionCard({ decision: d, resolution }: { decision: Decision; resolution: Resolution }) {
  return (
    <section className="card resolution" aria-label="Resolution" data-testid="resolution">
      <h2 className="h3">Resolution</h2>
      <dl className="facts">
        <dt>Resolution</dt>
        <dd data-testid="resolution-value">{resolution.resolution === ReviewResolution.APPROVED ? "approved" : "rejected"}</dd>
        <dt>Resolved by</dt>
        <dd>
          <code data-testid="resolved-by">{resolution.resolvedBy}</code>
        </dd>
        <dt>Resolved at</dt>
        <dd>
          <time dateTime={isoTime(resolution.resolvedAt)}>{formatTime(resolution.resolvedAt)}</time>
        </dd>
        <dt>Note</dt>
        <dd>{resolution.reason}</dd>
        {d.approvals.length > 1 && (
          <>
            <dt>Approvals</dt>
            <dd>{d.approvals.map((a) => a.resolvedBy).join(", ")}</dd>
          </>
        )}
      </dl>
      <p className="muted small">The outcome keeps reading HUMAN_REVIEW: a resolution never rewrites it.</p>
    </section>
  );
}

/** Approve or reject with a note (required by the API, 1..2000 characters); refusals shown as the API gives them. */
function ReviewForm({ decision: d, review }: { decision: Decision; review: ReturnType<typeof useReviewDecision> }) {
  const id = useId();
  const canReview = useCan("REVIEWER");
  const identity = useIdentity();
  // Four eyes: a second approval must come from another reviewer (the API refuses it otherwise).
  const approvedAlready = identity !== undefined && d.approvals.some((a) => a.resolvedBy === identity);
  const [note, setNote] = useState("");
  const [missingNote, setMissingNote] = useState(false);
  if (!canReview) return <p className="card muted">This key lacks REVIEWER: it cannot approve or reject.</p>;
  const decide = (resolution: ReviewResolution) => (e: FormEvent) => {
    e.preventDefault();
    if (note.trim() === "") {
      setMissingNote(true);
      return;
    }
    setMissingNote(false);
    review.mutate({ decisionId: d.decisionId, resolution, reason: note.trim() }, { onSuccess: () => setNote("") });
  };
  return (
    <form className="card" aria-label="Review" onSubmit={decide(ReviewResolution.APPROVED)} noValidate>
      <h2 className="h3">Decide</h2>
      <label htmlFor={`${id}-note`}>Note (required)</label>
      <textarea
        id={`${id}-note`}
        rows={3}
        maxLength={2000}
        required
        aria-required="true"
        aria-invalid={missingNote}
        aria-describedby={missingNote ? `${id}-note-err` : undefined}
        value={note}
        onChange={(e) => setNote(e.target.value)}
      />
      {missingNote && (
        <p id={`${id}-note-err`} className="field-error" role="alert">
          Write a note: the API records it with the resolution.
        </p>
      )}
      <div className="actions">
        <button type="submit" disabled={review.isPending || approvedAlready} aria-describedby={approvedAlready ? `${id}-own` : undefined}>
          Approve
        </button>
        <button type="button" className="danger" disabled={review.isPending} onClick={decide(ReviewResolution.REJECTED)}>
          Reject
        </button>
      </div>
      {approvedAlready ? (
        <p id={`${id}-own`} role="status" data-testid="approve-reason">
          Your approval is recorded; a second reviewer, with another key, must approve.
        </p>
      ) : (
        review.isSuccess && review.data.status === DecisionStatus.PENDING && <p role="status">Your approval is recorded; a second reviewer must approve.</p>
      )}
      <ApiError error={review.error} title="The review was refused" />
    </form>
  );
}
