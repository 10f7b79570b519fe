import { useId, useMemo, useState, type FormEvent, type ReactNode } from "react";
import { parseDocument, stringify } from "yaml";
import type { PolicySource } from "../../../src/gen/mandate/v1/policies_pb.js";
import { describeFailure } from "../api/errors";
import { useCreatePolicy, useCreatePolicyVersion, usePolicy } from "../api/policies";
import { ApiError, Loading } from "../components/api-error";
import { CodeView, type LineNote } from "../components/code-view";
import { Link } from "../components/link";
import { navigate } from "../router";
import { latestVersion } from "./policies";
import "../authoring.css";

/** What a new policy starts from: the shape of a rules document (docs/architecture.md, Runtime policies). */
const TEMPLATE = `actions: [vendor_payment]
rules:
  - id: hard_cap
    when:
      amount: { gt: 1000000 }
    outcome: DENY
    reason: amount_over_hard_cap
  - id: authority
    authority: true
`;

/** A version's source as the editor shows it: the YAML as written, or a JSON document as YAML. */
export function sourceText(source: PolicySource | undefined): { text: string; language: "yaml" | "rego" } {
  if (source?.rulesYaml) return { text: source.rulesYaml, language: "yaml" };
  if (source?.rego) return { text: source.rego, language: "rego" };
  return { text: source?.rules ? stringify(source.rules) : "", language: "yaml" };
}

/** YAML syntax problems, checked in the page as the author types (the API checks the rest). */
function syntaxNotes(text: string): LineNote[] {
  const doc = parseDocument(text);
  return doc.errors.map((e) => ({ line: e.linePos?.[0].line ?? 1, column: e.linePos?.[0].col, message: e.message.split("\n")[0]! }));
}

/** The rules document editor: live syntax check, then the API's located refusal at its line. */
function RulesEditor({ initial, submitLabel, onSubmit, pending, error, extra }: {
  initial: string;
  submitLabel: string;
  onSubmit: (yaml: string) => void;
  pending: boolean;
  error: unknown;
  extra?: ReactNode;
}) {
  const id = useId();
  const [text, setText] = useState(initial);
  const [sent, setSent] = useState<string | null>(null);
  const local = useMemo(() => syntaxNotes(text), [text]);
  const failure = error ? describeFailure(error) : null;
  // The API's errors located in the document (source.rules[1].outcome, line and column), while the text is still what was sent.
  const remote: LineNote[] = sent === text ? (failure?.fields ?? []).filter((f) => f.line > 0 && f.field.startsWith("source")).map((f) => ({ line: f.line, column: f.column || undefined, message: `${f.message} (${f.field})` })) : [];
  const notes = local.length ? local : remote;
  const submit = (e: FormEvent) => {
    e.preventDefault();
    setSent(text);
    onSubmit(text);
  };
  return (
    <form className="card" onSubmit={submit} noValidate aria-label="Rules document">
      {extra}
      <label htmlFor={`${id}-yaml`}>Rules document (YAML)</label>
      <textarea
        id={`${id}-yaml`}
        rows={Math.min(24, Math.max(10, text.split("\n").length + 1))}
        className="mono"
        spellCheck={false}
        value={text}
        onChange={(e) => setText(e.target.value)}
        aria-invalid={notes.length > 0}
        aria-describedby={`${id}-check`}
      />
      <p id={`${id}-check`} className={notes.length ? "field-error" : "muted small help"} role="status" data-testid="yaml-check">
        {local.length
          ? `${local.length} YAML syntax error${local.length > 1 ? "s" : ""}, shown at ${local.length > 1 ? "their lines" : "its line"} below.`
          : remote.length
            ? `The API refused the document: ${remote.length} error${remote.length > 1 ? "s" : ""} at ${remote.length > 1 ? "their lines" : "its line"} below.`
            : "YAML syntax checked as you type; the API checks the rules when you save."}
      </p>
      <CodeView code={text} language="yaml" label="The rules document, highlighted, with errors at their lines" notes={notes} testId="yaml-preview" />
      <div className="actions">
        <button type="submit" disabled={pending || local.length > 0}>
          {submitLabel}
        </button>
      </div>
      <ApiError error={error} title="The document was refused" />
    </form>
  );
}

/** /new-policy: a policy's key, description and first version's rules document. */
export function NewPolicyPage() {
  const id = useId();
  const create = useCreatePolicy();
  const [key, setKey] = useState("");
  const [description, setDescription] = useState("");
  const save = (yaml: string) =>
    create.mutate(
      { policyKey: key.trim(), description, source: { rulesYaml: yaml } },
      {
        onSuccess: (ref) => {
          navigate(`/policies/${ref.policyKey}/versions/${ref.version}`);
        },
      },
    );
  const keyError = create.error ? describeFailure(create.error).fields.find((f) => f.field === "policy_key") : undefined;
  return (
    <main aria-labelledby={`${id}-h`}>
      <p>
        <Link to="/policies">← Policies</Link>
      </p>
      <h1 id={`${id}-h`}>New policy</h1>
      <RulesEditor
        initial={TEMPLATE}
        submitLabel="Create policy"
        onSubmit={save}
        pending={create.isPending}
        error={create.error}
        extra={
          <>
            <label htmlFor={`${id}-key`}>Policy key</label>
            <input id={`${id}-key`} value={key} onChange={(e) => setKey(e.target.value)} aria-invalid={!!keyError} aria-describedby={`${id}-key-help`} autoComplete="off" spellCheck={false} />
            <p id={`${id}-key-help`} className={keyError ? "field-error" : "muted small help"}>
              {keyError ? keyError.message : "Lowercase letters, digits, _ and -, starting with a letter; unique in the organization."}
            </p>
            <label htmlFor={`${id}-desc`}>Description</label>
            <input id={`${id}-desc`} value={description} onChange={(e) => setDescription(e.target.value)} />
          </>
        }
      />
    </main>
  );
}

/** /policies/:key/versions/new: a new draft, starting from the newest version's document. */
export function NewPolicyVersionPage({ policyKey }: { policyKey: string }) {
  const id = useId();
  const policy = usePolicy(policyKey);
  const create = useCreatePolicyVersion();
  const save = (yaml: string) =>
    create.mutate(
      { policyKey, source: { rulesYaml: yaml } },
      {
        onSuccess: (ref) => {
          navigate(`/policies/${ref.policyKey}/versions/${ref.version}`);
        },
      },
    );
  return (
    <main aria-labelledby={`${id}-h`}>
      <p>
        <Link to={`/policies/${policyKey}`}>← {policyKey}</Link>
      </p>
      <h1 id={`${id}-h`}>New version of {policyKey}</h1>
      {policy.isPending ? (
        <Loading what="the policy" />
      ) : policy.error ? (
        <ApiError error={policy.error} title="The policy could not be read" />
      ) : (
        <RulesEditor
          initial={sourceText(latestVersion(policy.data)?.source).text || TEMPLATE}
          submitLabel="Save draft"
          onSubmit={save}
          pending={create.isPending}
          error={create.error}
        />
      )}
    </main>
  );
}
