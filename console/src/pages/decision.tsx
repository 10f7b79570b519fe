import { useCallback, useId, useMemo } from "react";
import { CapabilityState, type Capability } from "../../../src/gen/mandate/v1/capabilities_pb.js";
import { DecisionStatus, Outcome, ReconciliationStatus, ReviewResolution, type Decision } from "../../../src/gen/mandate/v1/decisions_pb.js";
import type { EvidenceRecord } from "../../../src/gen/mandate/v1/evidence_pb.js";
import { TRAIL_PAGE, capabilityTrail, useCapability, useChainAfter, useEvidenceRecord, useJwks } from "../api/decisions";
import { useCan } from "../api/hooks";
import { ApiError, Loading } from "../components/api-error";
import { DecisionFacts } from "../components/decision-facts";
import { EvidenceRecordView, evidencePath, useCheck } from "../components/evidence-record";
import { Link } from "../components/link";
import { checkEvidenceSignature, decisionDisagreements, reviewDisagreements, type KeySet } from "../evidence-signature";
import { formatTime, intentText, isoTime } from "../format";
import { DecisionShell, ResolutionCard } from "./review";
import { statusText } from "./decisions";
import "../authoring.css";
import "../decisions.css";

/** A capability state's wire name (capabilities.proto). */
const CAPABILITY_STATE: Record<CapabilityState, string> = {
  [CapabilityState.UNSPECIFIED]: "unknown",
  [CapabilityState.ISSUED]: "issued",
  [CapabilityState.CONSUMED]: "consumed",
  [CapabilityState.EXPIRED]: "expired",
};

/** Whether a decision may carry a capability: an ALLOW, or a review resolved approved. */
function mayHaveCapability(d: Decision): boolean {
  if (d.outcome === Outcome.ALLOW) return true;
  return d.outcome === Outcome.HUMAN_REVIEW && d.status === DecisionStatus.RESOLVED && d.resolution?.resolution === ReviewResolution.APPROVED;
}

/** /decisions/:id: the decision, its signed evidence record checked in the browser, its capability and reconciliation. */
export function DecisionPage({ decisionId }: { decisionId: string }) {
  return <DecisionShell decisionId={decisionId} back={<Link to="/decisions">← Decisions</Link>} view={DecisionDetail} />;
}

function DecisionDetail({ decision: d }: { decision: Decision }) {
  const id = useId();
  const canReadEvidence = useCan("EVIDENCE_READ");
  const evidence = useEvidenceRecord(d.evidenceId, canReadEvidence);
  return (
    <>
      <section className="card" aria-labelledby={`${id}-d`}>
        <h2 id={`${id}-d`} className="h3">
          Outcome
        </h2>
        <p>
          <span className={`outcome outcome-${Outcome[d.outcome]}`} data-testid="outcome">
            {Outcome[d.outcome]}
          </span>{" "}
          <span className="muted">status</span> <strong data-testid="status">{statusText(d.outcome, d.status)}</strong>
          {d.outcome === Outcome.HUMAN_REVIEW && d.status === DecisionStatus.PENDING && (
            <>
              {" · "}
              <Link to={`/reviews/${encodeURIComponent(d.decisionId)}`}>Review it</Link>
            </>
          )}
        </p>
        <DecisionFacts decision={d} />
        {d.bundleDigest && (
          <p className="muted small">
            Policy bundle <code>{d.bundleDigest}</code>
          </p>
        )}
      </section>
      {d.resolution && <ResolutionCard decision={d} resolution={d.resolution} />}
      {d.resolution && evidence.data && <ResolutionRecords decision={d} record={evidence.data} />}
      <section className="card" aria-labelledby={`${id}-i`}>
        <h2 id={`${id}-i`} className="h3">
          Intent
        </h2>
        <pre className="intent" tabIndex={0} aria-label="The Intent as recorded">
          {intentText(d.intent)}
        </pre>
      </section>
      {!canReadEvidence ? (
        <p className="card muted">This key lacks EVIDENCE_READ: it cannot read the decision&apos;s evidence record or look up its capability.</p>
      ) : evidence.isPending ? (
        <Loading what="the evidence record" />
      ) : evidence.error ? (
        <ApiError error={evidence.error} title="The evidence record could not be read" />
      ) : (
        <>
          <CapabilityCard decision={d} record={evidence.data} />
          <ReconciliationCard decision={d} />
          <EvidenceRecordView record={evidence.data}>
            <RecordMatch decision={d} record={evidence.data} />
          </EvidenceRecordView>
        </>
      )}
      {!evidence.data && <ReconciliationCard decision={d} />}
    </>
  );
}

/** Whether the signed record says what the page shows of the decision (GetDecision's answer is not signed). */
function RecordMatch({ decision, record }: { decision: Decision; record: EvidenceRecord }) {
  const differ = decisionDisagreements(decision, record);
  return differ.length === 0 ? (
    <p className="link-ok" data-testid="record-match">
      ✓ The record is this decision&apos;s: its id, outcome, reason, agent, Intent, policy versions and time are the ones shown above.
    </p>
  ) : (
    <p className="link-bad" data-testid="record-match">
      ✗ The record differs from the decision shown above in: {differ.join(", ")}.
    </p>
  );
}

/** Every record of the chain read so far after the decision's own, in order. */
function chainRecords(chain: ReturnType<typeof useChainAfter>): EvidenceRecord[] {
  return (chain.data?.pages ?? []).flatMap((p) => p.records);
}

/**
 * A resolved review's own signed records (each approval, then the resolution), found in the chain
 * after the decision's record, their signatures checked here and compared with the resolution the
 * page shows: GetDecision's answer is not signed, and the decision's record predates the review.
 */
function ResolutionRecords({ decision: d, record }: { decision: Decision; record: EvidenceRecord }) {
  const chain = useChainAfter(record.seq, true);
  const records = useMemo(
    () => chainRecords(chain).filter((r) => r.kind.startsWith("decision.") && r.subjectId === d.decisionId),
    [chain.data, d.decisionId],
  );
  const resolved = records.find((r) => r.kind === "decision.resolved");
  const jwks = useJwks();
  const checkAll = useCallback((rs: EvidenceRecord[], keys: KeySet) => Promise.all(rs.map((r) => checkEvidenceSignature(r, keys))), []);
  const signatures = useCheck(resolved ? records : undefined, jwks.data, checkAll);
  let text: string;
  let tone = "";
  if (chain.error) text = "The review's records could not be read.";
  else if (jwks.error) text = "The review's records were not checked: the service's keys could not be read.";
  else if (!resolved) {
    const read = chainRecords(chain).length;
    text = chain.isPending || chain.isFetchingNextPage ? "Looking for the review's signed records…" : `The resolution's record is not among the ${read} records read after the decision.`;
  }
  else if (!signatures) text = "Checking the review's signed records…";
  else {
    const invalid = signatures.filter((s) => !s.ok).length;
    const differ = reviewDisagreements(d, records);
    tone = invalid === 0 && differ.length === 0 ? "link-ok" : "link-bad";
    text =
      invalid > 0
        ? `✗ ${invalid} of the review's ${records.length} signed record${records.length === 1 ? "" : "s"} fail${invalid === 1 ? "s" : ""} the signature check.`
        : differ.length > 0
          ? `✗ The review's signed records differ from the resolution shown above in: ${differ.join(", ")}.`
          : `✓ The resolution is signed: ${records.length === 1 ? "its record says" : `its ${records.length} records say`} the same resolution, reviewer, note and approvals, signature${records.length === 1 ? "" : "s"} verified here.`;
  }
  return (
    <p className={`card ${tone}`} data-testid="resolution-records" role="status" aria-live="polite">
      {text}
      {resolved && (
        <>
          {" "}
          <Link to={evidencePath(resolved.evidenceId)}>The resolution&apos;s record</Link>
        </>
      )}
      {!resolved && chain.hasNextPage && !chain.isFetchingNextPage && (
        <button type="button" className="secondary" onClick={() => void chain.fetchNextPage()}>
          Read the next {TRAIL_PAGE} records of the chain
        </button>
      )}
    </p>
  );
}

/**
 * The decision's single capability, found in the evidence chain after the decision's record; its
 * state from GetCapability for keys holding CAPABILITY_ISSUE, else as the chain tells it.
 */
function CapabilityCard({ decision: d, record }: { decision: Decision; record: EvidenceRecord }) {
  const id = useId();
  const possible = mayHaveCapability(d);
  const chain = useChainAfter(record.seq, possible);
  const read = chainRecords(chain);
  const trail = capabilityTrail(d.decisionId, read);
  const canRead = useCan("CAPABILITY_ISSUE");
  const capability = useCapability(trail.issued?.subjectId, canRead);
  let body;
  if (!possible) {
    body = <p className="empty">None: {d.outcome === Outcome.HUMAN_REVIEW ? "only a review resolved approved" : "only an ALLOW decision"} may carry a capability.</p>;
  } else if (chain.isPending) {
    body = <Loading what="the capability" />;
  } else if (chain.error) {
    body = <ApiError error={chain.error} title="The evidence chain could not be read" />;
  } else if (!trail.issued) {
    body = (
      <p className="empty" data-testid="capability-state">
        {chain.hasNextPage ? `None issued in the ${read.length} records after the decision.` : "None issued yet."}
      </p>
    );
  } else if (canRead && capability.error) {
    body = <ApiError error={capability.error} title="The capability could not be read" />;
  } else if (canRead && !capability.data) {
    body = <Loading what="the capability" />;
  } else {
    body = <CapabilityFacts capability={capability.data} issued={trail.issued} consumed={trail.consumed} />;
  }
  // Only the chain tells where the capability is: more of it is read on request, a page at a time.
  const looking = possible && !chain.error && chain.hasNextPage && (!trail.issued || (!trail.consumed && !canRead));
  return (
    <section className="card" aria-labelledby={`${id}-c`} data-testid="capability">
      <h2 id={`${id}-c`} className="h3">
        Capability
      </h2>
      {body}
      {looking && (
        <button type="button" className="secondary" onClick={() => void chain.fetchNextPage()} disabled={chain.isFetchingNextPage}>
          {chain.isFetchingNextPage ? "Reading…" : `Read the next ${TRAIL_PAGE} records of the chain`}
        </button>
      )}
    </section>
  );
}

function CapabilityFacts({ capability: c, issued, consumed }: { capability: Capability | undefined; issued: EvidenceRecord; consumed: EvidenceRecord | null }) {
  const p = issued.payload ?? {};
  const expires = typeof p.expires_at === "string" ? p.expires_at : "";
  // Without GetCapability (no CAPABILITY_ISSUE) the chain's records tell the state.
  const state = c ? CAPABILITY_STATE[c.state] : consumed ? "consumed" : expires && Date.parse(expires) <= Date.now() ? "expired" : "issued";
  return (
    <dl className="facts">
      <dt>State</dt>
      <dd>
        <strong data-testid="capability-state">{state}</strong>
        {!c && <span className="muted"> (from the evidence chain: this key lacks CAPABILITY_ISSUE)</span>}
      </dd>
      <dt>Capability</dt>
      <dd>
        <code>{issued.subjectId}</code>
      </dd>
      <dt>Audience</dt>
      <dd>
        <code>{c?.audience ?? String(p.audience ?? "")}</code>
      </dd>
      <dt>Issued by</dt>
      <dd>{c?.issuedBy ?? String(p.issued_by ?? "")}</dd>
      <dt>Issued</dt>
      <dd>
        <Link to={evidencePath(issued.evidenceId)}>
          <time dateTime={isoTime(issued.createdAt)}>{formatTime(issued.createdAt)}</time>
        </Link>
      </dd>
      <dt>Expires</dt>
      <dd>{c?.expiresAt ? <time dateTime={isoTime(c.expiresAt)}>{formatTime(c.expiresAt)}</time> : expires}</dd>
      {c && c.ttlSeconds > 0 && (
        <>
          <dt>Lifetime</dt>
          <dd>{c.ttlSeconds} s</dd>
        </>
      )}
      {c?.resource && (
        <>
          <dt>Resource</dt>
          <dd>
            <code>{c.resource}</code>
          </dd>
        </>
      )}
      {consumed ? (
        <>
          <dt>Consumed</dt>
          <dd>
            <Link to={evidencePath(consumed.evidenceId)}>
              <time dateTime={isoTime(consumed.createdAt)}>{formatTime(consumed.createdAt)}</time>
            </Link>
            {typeof consumed.payload?.by === "string" && <span className="muted"> by {consumed.payload.by}</span>}
          </dd>
        </>
      ) : (
        c?.consumedAt && (
          <>
            <dt>Consumed</dt>
            <dd>
              <time dateTime={isoTime(c.consumedAt)}>{formatTime(c.consumedAt)}</time>
            </dd>
          </>
        )
      )}
    </dl>
  );
}

/** Early access: how the execution receipts matched what was authorized, once computed. */
function ReconciliationCard({ decision: d }: { decision: Decision }) {
  const id = useId();
  const r = d.reconciliation;
  return (
    <section className="card" aria-labelledby={`${id}-r`} data-testid="reconciliation">
      <h2 id={`${id}-r`} className="h3">
        Reconciliation <span className="muted small">(early access)</span>
      </h2>
      {!r ? (
        <p className="empty">Not reconciled: no execution receipt has been reconciled against this decision.</p>
      ) : (
        <dl className="facts">
          <dt>Status</dt>
          <dd>
            <strong>{ReconciliationStatus[r.status]}</strong>
          </dd>
          <dt>Receipt</dt>
          <dd>{r.receiptId ? <code>{r.receiptId}</code> : "—"}</dd>
          <dt>Reported by</dt>
          <dd>{r.reportedBy || "—"}</dd>
          <dt>Reconciled</dt>
          <dd>
            <time dateTime={isoTime(r.reconciledAt)}>{formatTime(r.reconciledAt)}</time>
          </dd>
        </dl>
      )}
    </section>
  );
}
