import { useId } from "react";
import { useEvidenceRecord } from "../api/decisions";
import { ApiError, Loading } from "../components/api-error";
import { EvidenceRecordView, decisionOf } from "../components/evidence-record";
import { Link } from "../components/link";
import "../authoring.css";
import "../decisions.css";

/** /evidence/:id: one evidence record of the chain, its signature checked in the browser, and its neighbours. */
export function EvidencePage({ evidenceId }: { evidenceId: string }) {
  const id = useId();
  const record = useEvidenceRecord(evidenceId);
  const decisionId = record.data ? decisionOf(record.data) : null;
  return (
    <main aria-labelledby={`${id}-h`}>
      <p>
        <Link to="/decisions">← Decisions</Link>
        {decisionId && (
          <>
            {" · "}
            <Link to={`/decisions/${encodeURIComponent(decisionId)}`}>
              Decision <code>{decisionId}</code>
            </Link>
          </>
        )}
      </p>
      <h1 id={`${id}-h`}>
        Evidence record <code>{evidenceId}</code>
      </h1>
      {record.isPending ? (
        <Loading what="the evidence record" />
      ) : record.error ? (
        <ApiError error={record.error} title="The evidence record could not be read" />
      ) : (
        <EvidenceRecordView record={record.data} />
      )}
    </main>
  );
}
