import { useId, useRef, useState, type DragEvent, type FormEvent } from "react";
import { DocumentFormat, GovernanceDocumentKind, GraphVersionState, type GraphVersionRef } from "../../../src/gen/mandate/v1/authority_graph_pb.js";
import { describeFailure } from "../api/errors";
import { useDeleteGovernanceDocument, useGenerateGraphVersion, useGovernanceDocuments, useGraphVersions, useUploadGovernanceDocument } from "../api/governance";
import { useCan } from "../api/hooks";
import { ApiError, Loading } from "../components/api-error";
import { CodeView, type LineNote } from "../components/code-view";
import { Link } from "../components/link";
import { ScrollTable } from "../components/scroll-table";
import { VersionsTable } from "../components/version-facts";
import { formatTime, isoTime } from "../format";
import { ConfirmButton } from "../components/confirm-button";
import "../authoring.css";
import "../agents.css";

/** The three kinds, with what each holds (docs/architecture.md, The authority graph). */
const KINDS = [
  { kind: GovernanceDocumentKind.SIGNING_SCHEDULE, label: "Signing schedule", header: "principal,role,reports_to" },
  { kind: GovernanceDocumentKind.DELEGATION_OF_AUTHORITY, label: "Delegation of authority", header: "holder,delegate,action,currency,max_amount,valid_until" },
  { kind: GovernanceDocumentKind.APPROVAL_MATRIX, label: "Approval matrix", header: "action,currency,up_to_amount,approvals_required" },
];

const kindLabel = (k: GovernanceDocumentKind) => KINDS.find((x) => x.kind === k)?.label ?? "unknown";
const FORMATS = { csv: DocumentFormat.CSV, yaml: DocumentFormat.YAML, json: DocumentFormat.JSON } as const;
type FormatName = keyof typeof FORMATS;

/** The format a file name suggests (.csv, .yaml/.yml, .json). */
function formatOf(name: string): FormatName | undefined {
  const ext = /\.([a-z]+)$/i.exec(name)?.[1]?.toLowerCase();
  return ext === "yml" ? "yaml" : ext === "csv" || ext === "yaml" || ext === "json" ? ext : undefined;
}

export const GRAPH_STATE: Record<GraphVersionState, string> = {
  [GraphVersionState.UNSPECIFIED]: "unknown",
  [GraphVersionState.DRAFT]: "draft",
  [GraphVersionState.APPROVED]: "approved",
  [GraphVersionState.ACTIVE]: "active",
  [GraphVersionState.SUPERSEDED]: "superseded",
};

/** /governance: governance documents (upload, list, delete), generation, and the graph versions. */
export function GovernancePage() {
  const id = useId();
  const canAuthor = useCan("POLICY_AUTHOR");
  return (
    <main aria-labelledby={`${id}-h`}>
      <h1 id={`${id}-h`}>Governance</h1>
      <p className="muted">
        The authority graph is generated from three kinds of documents: who holds which role (signing schedule), who may do what up to which amount
        (delegation of authority), and how many approvals each amount needs (approval matrix). A version needs a second identity&apos;s approval before it is
        published.
      </p>
      {canAuthor ? <UploadForm /> : <p className="card muted">This key lacks POLICY_AUTHOR: it can read the documents and versions but not upload or generate.</p>}
      <Documents canAuthor={canAuthor} />
      {canAuthor && <Generate />}
      <Versions />
    </main>
  );
}

function UploadForm() {
  const id = useId();
  const upload = useUploadGovernanceDocument();
  const [kind, setKind] = useState(GovernanceDocumentKind.SIGNING_SCHEDULE);
  const [format, setFormat] = useState<FormatName>("csv");
  const [name, setName] = useState("");
  const [content, setContent] = useState("");
  const [dragging, setDragging] = useState(false);
  const [sent, setSent] = useState<{ content: string; format: FormatName } | null>(null);
  const fileInput = useRef<HTMLInputElement>(null);

  const readFile = async (file: File) => {
    setContent(await file.text());
    setName(file.name);
    const f = formatOf(file.name);
    if (f) setFormat(f);
    upload.reset();
  };
  const onDrop = (e: DragEvent) => {
    e.preventDefault();
    setDragging(false);
    const file = e.dataTransfer.files[0];
    if (file) void readFile(file);
  };
  const submit = (e: FormEvent) => {
    e.preventDefault();
    setSent({ content, format });
    upload.mutate(
      { kind, format: FORMATS[format], name: name.trim(), content },
      {
        onSuccess: () => {
          setContent("");
          setName("");
          if (fileInput.current) fileInput.current.value = "";
        },
      },
    );
  };
  // The API's field errors located in the document (content[line 4].max_amount): shown at their line.
  const failure = upload.error ? describeFailure(upload.error) : null;
  // The message repeats the place ("content line 4, column 5: …"), which the note already gives.
  const notes: LineNote[] = (failure?.fields ?? [])
    .filter((f) => f.line > 0)
    .map((f) => ({ line: f.line, column: f.column || undefined, message: f.message.replace(/^content line \d+(, column \d+)?: /, "") }));
  const header = KINDS.find((k) => k.kind === kind)!.header;
  return (
    <form className="card" aria-labelledby={`${id}-h`} onSubmit={submit} noValidate>
      <h2 id={`${id}-h`} className="h3">
        Upload a document
      </h2>
      <div className="form-grid">
        <div>
          <label htmlFor={`${id}-kind`}>Kind</label>
          <select id={`${id}-kind`} value={kind} onChange={(e) => setKind(Number(e.target.value) as GovernanceDocumentKind)}>
            {KINDS.map((k) => (
              <option key={k.kind} value={k.kind}>
                {k.label}
              </option>
            ))}
          </select>
        </div>
        <div>
          <label htmlFor={`${id}-format`}>Format</label>
          <select id={`${id}-format`} value={format} onChange={(e) => setFormat(e.target.value as FormatName)}>
            <option value="csv">CSV</option>
            <option value="yaml">YAML</option>
            <option value="json">JSON</option>
          </select>
        </div>
      </div>
      <div
        className={dragging ? "drop-zone dragging" : "drop-zone"}
        data-testid="drop-zone"
        onDragOver={(e) => {
          e.preventDefault();
          setDragging(true);
        }}
        onDragLeave={() => setDragging(false)}
        onDrop={onDrop}
      >
        <label htmlFor={`${id}-file`}>File</label>
        <input id={`${id}-file`} ref={fileInput} type="file" accept=".csv,.yaml,.yml,.json,text/csv,application/json,application/yaml" onChange={(e) => e.target.files?.[0] && void readFile(e.target.files[0])} />
        <p className="muted small">…or drop a file here. Its text appears below, where it can be corrected before uploading.</p>
      </div>
      <label htmlFor={`${id}-name`}>Name</label>
      <input id={`${id}-name`} value={name} maxLength={200} onChange={(e) => setName(e.target.value)} aria-describedby={`${id}-name-help`} />
      <p id={`${id}-name-help`} className="muted small help">
        Unique in the organization; errors and warnings cite it.
      </p>
      <label htmlFor={`${id}-content`}>Content</label>
      <textarea id={`${id}-content`} rows={8} className="mono" spellCheck={false} value={content} onChange={(e) => setContent(e.target.value)} aria-describedby={`${id}-content-help`} />
      <p id={`${id}-content-help`} className="muted small help">
        {format === "csv" ? (
          <>
            A CSV with the header <code>{header}</code> (line 1).
          </>
        ) : (
          <>
            A list of rows with the keys <code>{header.split(",").join(", ")}</code>.
          </>
        )}
      </p>
      <div className="actions">
        <button type="submit" disabled={upload.isPending}>
          Upload
        </button>
      </div>
      <ApiError error={upload.error} title="The document was refused" />
      {notes.length > 0 && sent && (
        <div className="in-place" data-testid="upload-errors">
          <h3 className="h4">Where in the document</h3>
          <CodeView code={sent.content} language={sent.format} label="The refused document, with the errors at their lines" notes={notes} />
        </div>
      )}
      {upload.isSuccess && (
        <p role="status" className="ok">
          Uploaded <strong>{upload.data.name}</strong>: {upload.data.rows} rows.
        </p>
      )}
    </form>
  );
}

function Documents({ canAuthor }: { canAuthor: boolean }) {
  const id = useId();
  const docs = useGovernanceDocuments();
  const remove = useDeleteGovernanceDocument();
  return (
    <section className="card" aria-labelledby={`${id}-h`}>
      <h2 id={`${id}-h`} className="h3">
        Documents
      </h2>
      {docs.isPending ? (
        <Loading what="the documents" />
      ) : docs.error ? (
        <ApiError error={docs.error} title="The documents could not be read" />
      ) : docs.data.documents.length === 0 ? (
        <p className="empty">No document uploaded yet.</p>
      ) : (
        <ScrollTable label="Documents" testId="documents" columns={["Name", "Kind", "Format", "Rows", "Uploaded by", "Uploaded", canAuthor && <span className="visually-hidden">Actions</span>]}>
          <tbody>
            {docs.data.documents.map((d) => (
              <tr key={d.documentId} data-document={d.name}>
                <th scope="row">{d.name}</th>
                <td>{kindLabel(d.kind)}</td>
                <td>{DocumentFormat[d.format]}</td>
                <td>{d.rows}</td>
                <td>
                  <code>{d.author}</code>
                </td>
                <td>
                  <time dateTime={isoTime(d.createdAt)}>{formatTime(d.createdAt)}</time>
                </td>
                {canAuthor && (
                  <td>
                    <ConfirmButton
                      label="Delete"
                      className="danger small-button"
                      ariaLabel={`Delete ${d.name}`}
                      title={`Delete ${d.name}?`}
                      description="The next graph version generated leaves this document out. Graph versions already generated from it keep it, and its upload stays in the evidence."
                      confirmLabel="Delete document"
                      disabled={remove.isPending}
                      onConfirm={() => remove.mutate({ documentId: d.documentId })}
                    />
                  </td>
                )}
              </tr>
            ))}
          </tbody>
        </ScrollTable>
      )}
      <ApiError error={remove.error} title="The document could not be deleted" />
    </section>
  );
}

function Generate() {
  const id = useId();
  const generate = useGenerateGraphVersion();
  return (
    <section className="card" aria-labelledby={`${id}-h`}>
      <h2 id={`${id}-h`} className="h3">
        Generate a graph version
      </h2>
      <p className="muted small">From every document listed above. A problem only visible once they are combined is refused with the document and line; suspect rows come back as warnings.</p>
      <div className="actions">
        <button type="button" disabled={generate.isPending} onClick={() => generate.mutate({})}>
          Generate graph version
        </button>
      </div>
      <ApiError error={generate.error} title="Generation was refused" />
      {generate.isSuccess && <Generated result={generate.data} />}
    </section>
  );
}

function Generated({ result: ref }: { result: GraphVersionRef }) {
  return (
    <div role="status" data-testid="generated">
      <p className="ok">
        Generated version <Link to={`/governance/versions/${ref.version}`}>{ref.version}</Link> ({GRAPH_STATE[ref.state]}).{" "}
        {ref.warnings.length === 0 ? "No warnings." : `${ref.warnings.length} warning${ref.warnings.length > 1 ? "s" : ""}:`}
      </p>
      {ref.warnings.length > 0 && (
        <ul className="warnings" aria-label="Generation warnings">
          {ref.warnings.map((w, i) => (
            <li key={i} data-testid="warning">
              <code>{w.code}</code> {w.document && <strong>{w.document}</strong>}
              {w.line ? ` line ${w.line}` : ""}: {w.message}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

function Versions() {
  const id = useId();
  const versions = useGraphVersions();
  return (
    <section className="card" aria-labelledby={`${id}-h`}>
      <h2 id={`${id}-h`} className="h3">
        Graph versions
      </h2>
      {versions.isPending ? (
        <Loading what="the versions" />
      ) : versions.error ? (
        <ApiError error={versions.error} title="The versions could not be read" />
      ) : versions.data.versions.length === 0 ? (
        <p className="empty">No graph version yet.</p>
      ) : (
        <VersionsTable
          label="Graph versions"
          testId="graph-versions"
          rows={versions.data.versions.map((v) => ({ ...v, state: GRAPH_STATE[v.state], href: `/governance/versions/${v.version}` }))}
        />
      )}
    </section>
  );
}
