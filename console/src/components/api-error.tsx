import { describeFailure } from "../api/errors";

/** An API failure as the API put it: message, code, every field error, and the request id to quote. */
export function ApiError({ error, title = "The request failed" }: { error: unknown; title?: string }) {
  if (!error) return null;
  const f = describeFailure(error);
  return (
    <div className="error" role="alert">
      <p className="error-title">
        {title}: <strong>{f.message}</strong> <code className="error-code">{f.code}</code>
      </p>
      {f.fields.length > 0 && (
        <ul className="error-fields" aria-label="Field errors">
          {f.fields.map((e, i) => (
            <li key={i}>
              <code>{e.field || "(request)"}</code>
              {e.line ? ` (line ${e.line}${e.column ? `, column ${e.column}` : ""})` : ""}: {e.message}
            </li>
          ))}
        </ul>
      )}
      {f.requestId && <p className="muted small">Request id {f.requestId}</p>}
    </div>
  );
}

/** A region whose content is loading, announced to screen readers. */
export function Loading({ what }: { what: string }) {
  return (
    <p className="loading" role="status" aria-live="polite">
      Loading {what}…
    </p>
  );
}
