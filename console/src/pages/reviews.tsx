import { useId } from "react";
import { useCan, usePendingReviews, useReviewEvents, POLL_MS } from "../api/hooks";
import { ApiError, Loading } from "../components/api-error";
import { DecisionFacts } from "../components/decision-facts";
import { Link } from "../components/link";

/**
 * /reviews: pending HUMAN_REVIEW decisions, newest first, kept live: by the event stream when
 * the key holds EVENTS_READ (each review requested or resolved refreshes the list), otherwise by
 * polling ListDecisions every few seconds. Older pending reviews load a page at a time.
 */
export function ReviewsPage() {
  const id = useId();
  const canWatch = useCan("EVENTS_READ");
  const live = useReviewEvents(canWatch);
  const queue = usePendingReviews({ live });
  const canReview = useCan("REVIEWER");
  // A decision resolved between two pages' reads could shift one onto both: listed once.
  const seen = new Set<string>();
  const pending = (queue.data?.pages ?? []).flatMap((p) => p.decisions).filter((d) => !seen.has(d.decisionId) && seen.add(d.decisionId));
  return (
    <main aria-labelledby={`${id}-h`}>
      <h1 id={`${id}-h`}>Review queue</h1>
      <p className="muted small" data-testid="live-mode">
        {live === "stream" ? "Live: updated by the event stream." : `Live: refreshed every ${POLL_MS / 1000} seconds.`}
        {!canReview && " This key may read reviews but not decide them (it lacks REVIEWER)."}
      </p>
      {queue.isPending ? (
        <Loading what="the review queue" />
      ) : queue.error ? (
        <ApiError error={queue.error} title="The review queue could not be read" />
      ) : pending.length === 0 ? (
        <p className="empty card">No decision is waiting for a human review.</p>
      ) : (
        <ul className="queue" aria-label="Pending reviews">
          {pending.map((d) => (
            <li key={d.decisionId} className="card" data-decision-id={d.decisionId}>
              <h2 className="h3">
                <Link to={`/reviews/${encodeURIComponent(d.decisionId)}`}>
                  Review <code>{d.decisionId}</code>
                </Link>
              </h2>
              {d.approvals.length > 0 && (
                <p className="badge">
                  {d.approvals.length} of 2 approvals, first by <code>{d.approvals[0]!.resolvedBy}</code>
                </p>
              )}
              <DecisionFacts decision={d} />
            </li>
          ))}
        </ul>
      )}
      {queue.hasNextPage && (
        <button type="button" onClick={() => void queue.fetchNextPage()} disabled={queue.isFetchingNextPage}>
          {queue.isFetchingNextPage ? "Loading…" : "Show older pending reviews"}
        </button>
      )}
    </main>
  );
}
