import { toJson, type JsonValue } from "@bufbuild/protobuf";
import { Fragment, useEffect, useId, useState, type ReactNode } from "react";
import { EvidenceRecordSchema, type EvidenceRecord } from "../../../src/gen/mandate/v1/evidence_pb.js";
import { useEvidenceAt, useJwks } from "../api/decisions";
import { checkEvidenceSignature, checkHeadSignature, prevDigestOf, type KeySet } from "../evidence-signature";
import { formatTime, isoTime } from "../format";
import { ApiError } from "./api-error";
import { Link } from "./link";

/** A console path for evidence record `id`. */
export const evidencePath = (id: string) => `/evidence/${encodeURIComponent(id)}`;

/** The decision a record is about, if any: a decision's own record or one naming its decision_id. */
export function decisionOf(r: EvidenceRecord): string | null {
  if (r.kind === "decision" || r.kind.startsWith("decision.")) return r.subjectId;
  const named = r.payload?.decision_id;
  return typeof named === "string" && named !== "" ? named : null;
}

/** A payload value in one line: strings as they are, anything else as compact JSON. */
function valueText(v: JsonValue): string {
  return typeof v === "string" ? v : JSON.stringify(v);
}

/** The answer of `check(input, jwks)`, or null while it runs or either is missing; `input` must keep its identity between renders. */
export function useCheck<T, R>(input: T | undefined, jwks: KeySet | undefined, check: (input: T, jwks: KeySet) => Promise<R>): R | null {
  const [result, setResult] = useState<{ of: T; is: R } | null>(null);
  useEffect(() => {
    let current = true;
    if (input !== undefined && jwks) void check(input, jwks).then((is) => current && setResult({ of: input, is }));
    return () => {
      current = false;
    };
  }, [input, jwks, check]);
  // An answer about an earlier input is no answer about this one.
  return result && result.of === input ? result.is : null;
}

/**
 * The verdict of checking `record` in this browser against the service's JWKS (see
 * evidence-signature.ts): exactly "Signature verified", or "Signature invalid: <reason>".
 */
function SignatureVerdict({ record }: { record: EvidenceRecord }) {
  const jwks = useJwks();
  const check = useCheck(record, jwks.data, checkEvidenceSignature);
  const text = jwks.error
    ? `Signature not checked: the service's keys could not be read (${(jwks.error as Error).message})`
    : !check
      ? "Checking the signature…"
      : check.ok
        ? "Signature verified"
        : `Signature invalid: ${check.reason}`;
  const tone = check?.ok ? "verdict-ok" : check || jwks.error ? "verdict-bad" : "";
  return (
    <>
      <p role="status" aria-live="polite" className={`verdict ${tone}`} data-testid="signature-check">
        {text}
      </p>
      <p className="muted small">
        Checked here in your browser: the record&apos;s members are put in RFC 8785 canonical JSON and hashed with SHA-256, which must give its digest; the
        Ed25519 signature of that digest must verify with key <code>{record.kid}</code> of the service&apos;s <code>/.well-known/jwks.json</code>.
      </p>
      {check?.canonical !== undefined && (
        <details>
          <summary>The bytes that were hashed</summary>
          <pre className="raw" tabIndex={0} aria-label="Canonical JSON of the record's covered members">
            {check.canonical}
          </pre>
        </details>
      )}
    </>
  );
}

/** The record before and after this one in the organization's chain, and whether they link to it. */
function ChainPosition({ record }: { record: EvidenceRecord }) {
  const prev = useEvidenceAt(record.seq - 1n, record.seq > 1n);
  const next = useEvidenceAt(record.seq + 1n, true);
  const before = prev.data?.records[0];
  const after = next.data?.records[0];
  const head = next.data?.head;
  const jwks = useJwks();
  const headRefused = useCheck(head, jwks.data, checkHeadSignature);
  const prevDigest = prevDigestOf(record);
  return (
    <dl className="facts" data-testid="chain-position">
      <dt>Position</dt>
      <dd data-testid="seq">
        seq {String(record.seq)}
        {head && head.seq > 0n && (
          <span className="muted" data-testid="head">
            {" "}
            of {String(head.seq)} (the chain&apos;s head
            {headRefused === null ? "" : headRefused === "" ? ", whose signature verifies" : `; its signature does not verify: ${headRefused}`})
          </span>
        )}
      </dd>
      <dt>Previous digest</dt>
      <dd>
        <code data-testid="prev-digest">{prevDigest === null ? "null (the chain's first record)" : valueText(prevDigest)}</code>
      </dd>
      <dt>Previous record</dt>
      <dd data-testid="previous-record">
        {record.seq === 1n ? (
          "none: this record starts the chain"
        ) : prev.error ? (
          <ApiError error={prev.error} title="The previous record could not be read" />
        ) : !before ? (
          "…"
        ) : (
          <>
            <Link to={evidencePath(before.evidenceId)}>
              seq {String(before.seq)} · <code>{before.kind}</code>
            </Link>{" "}
            {before.digest === prevDigest ? (
              <span className="link-ok">✓ its digest is this record&apos;s previous digest</span>
            ) : (
              <span className="link-bad">✗ its digest {before.digest} is not this record&apos;s previous digest</span>
            )}
          </>
        )}
      </dd>
      <dt>Next record</dt>
      <dd data-testid="next-record">
        {next.error ? (
          <ApiError error={next.error} title="The next record could not be read" />
        ) : next.isPending ? (
          "…"
        ) : !after ? (
          "none yet: this is the chain's last record"
        ) : (
          <>
            <Link to={evidencePath(after.evidenceId)}>
              seq {String(after.seq)} · <code>{after.kind}</code>
            </Link>{" "}
            {prevDigestOf(after) === record.digest ? (
              <span className="link-ok">✓ it links back to this record&apos;s digest</span>
            ) : (
              <span className="link-bad">✗ its previous digest is not this record&apos;s digest</span>
            )}
          </>
        )}
      </dd>
    </dl>
  );
}

/** One evidence record: what it says, its signature checked here (with `children` after the verdict), its place in the chain, and the record as received. */
export function EvidenceRecordView({ record, children }: { record: EvidenceRecord; children?: ReactNode }) {
  const id = useId();
  const decisionId = decisionOf(record);
  const payload = Object.entries(record.payload ?? {});
  return (
    <>
      <section className="card" aria-labelledby={`${id}-sig`}>
        <h2 id={`${id}-sig`} className="h3">
          Signature
        </h2>
        <SignatureVerdict record={record} />
        {children}
      </section>
      <section className="card" aria-labelledby={`${id}-rec`}>
        <h2 id={`${id}-rec`} className="h3">
          Evidence record
        </h2>
        <dl className="facts">
          <dt>Evidence id</dt>
          <dd>
            <Link to={evidencePath(record.evidenceId)}>
              <code data-testid="evidence-id">{record.evidenceId}</code>
            </Link>
          </dd>
          <dt>Kind</dt>
          <dd>
            <code data-testid="evidence-kind">{record.kind}</code>
          </dd>
          <dt>Subject</dt>
          <dd>
            {decisionId === record.subjectId ? (
              <Link to={`/decisions/${encodeURIComponent(decisionId)}`}>
                <code>{record.subjectId}</code>
              </Link>
            ) : (
              <code>{record.subjectId}</code>
            )}
          </dd>
          <dt>Recorded</dt>
          <dd>
            <time dateTime={isoTime(record.createdAt)}>{formatTime(record.createdAt)}</time>
          </dd>
          <dt>Digest</dt>
          <dd>
            <code data-testid="digest">{record.digest}</code>
          </dd>
          <dt>Signing key</dt>
          <dd>
            <code>{record.kid}</code>
          </dd>
          <dt>Signature</dt>
          <dd>
            <code>{record.signature}</code>
          </dd>
        </dl>
        <h3 className="h4">Chain</h3>
        <ChainPosition record={record} />
        <h3 className="h4">Payload</h3>
        {payload.length === 0 ? (
          <p className="empty">Empty.</p>
        ) : (
          <dl className="facts" data-testid="payload">
            {payload.map(([k, v]) => (
              <Fragment key={k}>
                <dt>{k}</dt>
                <dd>
                  <code>{valueText(v)}</code>
                </dd>
              </Fragment>
            ))}
          </dl>
        )}
        <details>
          <summary>Raw record, as the API returned it</summary>
          <pre className="raw" tabIndex={0} aria-label="The evidence record as JSON" data-testid="raw-record">
            {JSON.stringify(toJson(EvidenceRecordSchema, record), null, 2)}
          </pre>
        </details>
      </section>
    </>
  );
}
