import { toJson } from "@bufbuild/protobuf";
import { ListValueSchema, ValueSchema, type Value } from "@bufbuild/protobuf/wkt";
import type { JsonObject } from "@bufbuild/protobuf";
import { useEffect, useId, useState, type FormEvent } from "react";
import { Outcome } from "../../../src/gen/mandate/v1/decisions_pb.js";
import type { RuleEvaluation } from "../../../src/gen/mandate/v1/policies_pb.js";
import { useDryRunAgents, useEvaluatePolicy } from "../api/policies";
import { AgentState } from "../../../src/gen/mandate/v1/agents_pb.js";
import { ApiError } from "../components/api-error";
import { CodeView } from "../components/code-view";
import { Link } from "../components/link";
import { ScrollTable } from "../components/scroll-table";
import { formatTime, isoTime } from "../format";
import "../authoring.css";

/** An Intent to start from: the fields POST /v1/intents requires, with a fresh nonce and time. */
function example(): string {
  const intent = { agent_id: "agt_…", action: "vendor_payment", amount: 2500, currency: "USD", counterparty: "ACME Corp", requested_at: new Date().toISOString(), nonce: crypto.randomUUID() };
  return JSON.stringify(intent, null, 2);
}

const OUTCOME = (o: Outcome) => Outcome[o] ?? "UNSPECIFIED";

/** "payments=2, limits=1" as the request's policy_versions; null when it does not read so. */
function parseVersions(text: string): Record<string, number> | null {
  const out: Record<string, number> = {};
  for (const part of text.split(",").map((p) => p.trim()).filter(Boolean)) {
    const m = /^([a-z][a-z0-9_-]*)\s*=\s*v?(\d+)$/.exec(part);
    if (!m) return null;
    out[m[1]!] = Number(m[2]);
  }
  return out;
}

/** /dry-run: an unsigned Intent evaluated by the active policies, or the versions named; nothing is recorded. */
export function DryRunPage() {
  const id = useId();
  const evaluate = useEvaluatePolicy();
  const params = new URLSearchParams(window.location.search);
  const [intent, setIntent] = useState(example);
  const [versions, setVersions] = useState(params.get("policy") ? `${params.get("policy")}=${params.get("version") ?? ""}` : "");
  const [graphVersion, setGraphVersion] = useState("");
  const [problem, setProblem] = useState<{ field: "intent" | "versions"; message: string } | null>(null);
  const run = (e: FormEvent) => {
    e.preventDefault();
    let parsed: unknown;
    try {
      parsed = JSON.parse(intent);
    } catch (err) {
      setProblem({ field: "intent", message: `The Intent is not JSON: ${(err as Error).message}` });
      return;
    }
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
      setProblem({ field: "intent", message: "The Intent must be a JSON object." });
      return;
    }
    const policyVersions = parseVersions(versions);
    if (!policyVersions) {
      setProblem({ field: "versions", message: 'Write policy versions as "payments=2, limits=1".' });
      return;
    }
    setProblem(null);
    evaluate.mutate({ intent: parsed as JsonObject, policyVersions, graphVersion: Number(graphVersion) || 0 });
  };
  const agents = useDryRunAgents();
  const active = (agents.data?.agents ?? []).filter((a) => a.state === AgentState.ACTIVE);
  // The Intent names the agent picked (the first active one to start with).
  const setAgent = (agentId: string) => {
    try {
      const parsed = JSON.parse(intent) as Record<string, unknown>;
      setIntent(JSON.stringify({ ...parsed, agent_id: agentId }, null, 2));
    } catch {
      // The text is being edited and is not JSON: the author writes agent_id by hand.
    }
  };
  const firstActive = active[0]?.agentId;
  useEffect(() => {
    if (firstActive && intent.includes('"agt_…"')) setAgent(firstActive);
    // Only when the list arrives, for the untouched example.
  }, [firstActive]);
  const current = (() => {
    try {
      return String((JSON.parse(intent) as Record<string, unknown>).agent_id ?? "");
    } catch {
      return "";
    }
  })();
  const r = evaluate.data;
  return (
    <main aria-labelledby={`${id}-h`}>
      <p>
        <Link to="/policies">← Policies</Link>
      </p>
      <h1 id={`${id}-h`}>Dry-run an Intent</h1>
      <p className="muted">
        Evaluates an Intent (unsigned; its <code>agent_id</code> names one of the organization&apos;s agents) exactly as <code>POST /v1/intents</code> would,
        without recording anything.
      </p>
      <form className="card" onSubmit={run} noValidate aria-label="Dry run">
        <label htmlFor={`${id}-agent`}>Agent</label>
        <select id={`${id}-agent`} value={active.some((a) => a.agentId === current) ? current : ""} onChange={(e) => e.target.value && setAgent(e.target.value)}>
          <option value="">{agents.isPending ? "Loading the agents…" : active.length ? "(as written in the Intent)" : "No active agent"}</option>
          {active.map((a) => (
            <option key={a.agentId} value={a.agentId}>
              {a.name} ({a.agentId})
            </option>
          ))}
        </select>
        <label htmlFor={`${id}-intent`}>Intent (JSON)</label>
        <textarea
          id={`${id}-intent`}
          className="mono"
          rows={9}
          spellCheck={false}
          value={intent}
          onChange={(e) => setIntent(e.target.value)}
          aria-invalid={problem?.field === "intent"}
          aria-describedby={problem?.field === "intent" ? `${id}-problem` : undefined}
        />
        <div className="form-grid">
          <div>
            <label htmlFor={`${id}-versions`}>Policy versions instead of the active ones (optional)</label>
            <input
              id={`${id}-versions`}
              value={versions}
              placeholder="payments=2"
              onChange={(e) => setVersions(e.target.value)}
              aria-invalid={problem?.field === "versions"}
              aria-describedby={problem?.field === "versions" ? `${id}-problem` : undefined}
            />
          </div>
          <div>
            <label htmlFor={`${id}-graph`}>Graph version instead of the active one (optional)</label>
            <input id={`${id}-graph`} type="number" min={0} value={graphVersion} onChange={(e) => setGraphVersion(e.target.value)} />
          </div>
        </div>
        {problem && (
          <p id={`${id}-problem`} className="field-error" role="alert">
            {problem.message}
          </p>
        )}
        <div className="actions">
          <button type="submit" disabled={evaluate.isPending}>
            Evaluate
          </button>
        </div>
        <ApiError error={evaluate.error} title="The dry run was refused" />
      </form>
      {r && (
        <section className="card" aria-labelledby={`${id}-r`} data-testid="dry-run-result">
          <h2 id={`${id}-r`} className="h3">
            Result
          </h2>
          <p>
            <span className={`outcome-${OUTCOME(r.outcome)}`} data-testid="dry-run-outcome">
              {OUTCOME(r.outcome)}
            </span>{" "}
            <code data-testid="dry-run-reason">{r.reason}</code>
          </p>
          <dl className="facts">
            <dt>Policy versions</dt>
            <dd>{Object.entries(r.policyVersions).map(([k, n]) => `${k} v${n}`).join(", ") || "none"}</dd>
            <dt>Authority graph</dt>
            <dd>{r.graphVersion ? `v${r.graphVersion}` : "none"}</dd>
            <dt>Evaluated at</dt>
            <dd>
              <time dateTime={isoTime(r.now)}>{formatTime(r.now)}</time>
            </dd>
            <dt>Bundle</dt>
            <dd>
              <code>{r.bundleDigest}</code>
            </dd>
          </dl>
          <RuleTable rules={r.rules} />
          <h3 className="h4">Trace</h3>
          <CodeView code={JSON.stringify(r.trace ? toJson(ListValueSchema, r.trace) : [], null, 2)} language="json" label="The evaluation's trace" testId="dry-run-trace" />
        </section>
      )}
    </main>
  );
}

/** Every rule of the covering policies: fired (with its outcome), or the first condition that did not hold and the value seen. */
function RuleTable({ rules }: { rules: RuleEvaluation[] }) {
  if (rules.length === 0) return <p className="muted small">No rule to explain (no policy compiled from a rules document covers the action).</p>;
  const value = (v: Value | undefined) => {
    const json = v ? toJson(ValueSchema, v) : null;
    return json === null ? "missing" : JSON.stringify(json);
  };
  return (
    <ScrollTable label="Rules" testId="dry-run-rules" caption="Rules, and why each fired or not" columns={["Policy", "Rule", "Line", "Result"]}>
      <tbody>
        {rules.map((rule, i) => (
          <tr key={i} data-rule={rule.ruleId} className={rule.fired ? "rule-fired" : undefined}>
            <td>
              {rule.policyKey} v{rule.policyVersion}
            </td>
            <th scope="row">
              <code>{rule.ruleId}</code>
            </th>
            <td>{rule.line || "—"}</td>
            <td>
              {rule.fired ? (
                <>
                  fired: <span className={`outcome-${OUTCOME(rule.outcome)}`}>{OUTCOME(rule.outcome)}</span> <code>{rule.reason}</code>
                </>
              ) : rule.failedCondition ? (
                <>
                  not fired: <code>{rule.failedCondition.field}</code> {rule.failedCondition.operator} <code>{value(rule.failedCondition.expected)}</code> did not
                  hold (the Intent had <code>{value(rule.failedCondition.actual)}</code>)
                </>
              ) : (
                "not fired"
              )}
            </td>
          </tr>
        ))}
      </tbody>
    </ScrollTable>
  );
}
