import { Fragment, useEffect, useId, useState, type FormEvent, type ReactNode } from "react";
import { DecisionStatus, Outcome } from "../../../src/gen/mandate/v1/decisions_pb.js";
import { useDecisionPage, type DecisionFilter } from "../api/decisions";
import { useDryRunAgents } from "../api/policies";
import { ApiError, Loading } from "../components/api-error";
import { Link } from "../components/link";
import { ScrollTable } from "../components/scroll-table";
import { formatAmount, formatTime, isoTime } from "../format";
import { BASE, navigate } from "../router";
import "../authoring.css";
import "../decisions.css";

/** Page sizes offered (ListDecisions allows 1..500). */
const PAGE_SIZES = [10, 25, 50, 100];
const DEFAULT_PAGE_SIZE = 25;

const OUTCOMES = [Outcome.ALLOW, Outcome.DENY, Outcome.HUMAN_REVIEW];
const STATUSES = [DecisionStatus.PENDING, DecisionStatus.RESOLVED];

/** The filter written in the address (?outcome=DENY&status=…&agent=…&page_size=…), so Back and a shared link keep it. */
function filterFromUrl(): DecisionFilter {
  const q = new URLSearchParams(window.location.search);
  const outcome = OUTCOMES.find((o) => Outcome[o] === q.get("outcome")) ?? Outcome.UNSPECIFIED;
  const status = STATUSES.find((s) => DecisionStatus[s] === q.get("status")) ?? DecisionStatus.UNSPECIFIED;
  const size = Number(q.get("page_size"));
  return { outcome, status, agentId: q.get("agent") ?? "", pageSize: PAGE_SIZES.includes(size) ? size : DEFAULT_PAGE_SIZE };
}

function filterToUrl(f: DecisionFilter): void {
  const q = new URLSearchParams();
  if (f.outcome) q.set("outcome", Outcome[f.outcome]);
  if (f.status) q.set("status", DecisionStatus[f.status]);
  if (f.agentId) q.set("agent", f.agentId);
  if (f.pageSize !== DEFAULT_PAGE_SIZE) q.set("page_size", String(f.pageSize));
  const search = q.toString();
  history.replaceState(null, "", `${BASE}/decisions${search ? `?${search}` : ""}`);
}

/** A snake_case word that may break after its underscores (and nowhere else) in a narrow column. */
function breakable(word: string): ReactNode {
  return word.split("_").map((part, i) => (
    <Fragment key={i}>
      {i > 0 && (
        <>
          _<wbr />
        </>
      )}
      {part}
    </Fragment>
  ));
}

/** The status a decision shows in the list: PENDING or RESOLVED for a review, "final" otherwise. */
export function statusText(outcome: Outcome, status: DecisionStatus): string {
  if (outcome !== Outcome.HUMAN_REVIEW) return "final";
  return status === DecisionStatus.RESOLVED ? "RESOLVED" : "PENDING";
}

/**
 * /decisions: the organization's decisions, newest first, filtered as ListDecisions allows (outcome,
 * review status, agent) a page at a time; a decision id opens that decision.
 */
export function DecisionsPage() {
  const id = useId();
  const [filter, setFilter] = useState(filterFromUrl);
  // The tokens of the pages read so far: tokens[i] fetches page i + 1.
  const [tokens, setTokens] = useState<string[]>([""]);
  const pageIndex = tokens.length - 1;
  const page = useDecisionPage(filter, tokens[pageIndex]!);
  const agents = useDryRunAgents();
  const names = new Map((agents.data?.agents ?? []).map((a) => [a.agentId, a.name]));
  useEffect(() => filterToUrl(filter), [filter]);
  const change = (next: Partial<DecisionFilter>) => {
    setFilter((f) => ({ ...f, ...next }));
    setTokens([""]);
  };
  const [searchId, setSearchId] = useState("");
  const [searchEmpty, setSearchEmpty] = useState(false);
  const search = (e: FormEvent) => {
    e.preventDefault();
    const wanted = searchId.trim();
    setSearchEmpty(wanted === "");
    if (wanted) navigate(`/decisions/${encodeURIComponent(wanted)}`);
  };
  const filtered = filter.outcome !== Outcome.UNSPECIFIED || filter.status !== DecisionStatus.UNSPECIFIED || filter.agentId !== "";
  const decisions = page.data?.decisions ?? [];
  return (
    <main aria-labelledby={`${id}-h`}>
      <h1 id={`${id}-h`}>Decisions</h1>
      <p className="muted">Every Intent the organization&apos;s agents submitted and its outcome, newest first. Each decision carries a signed evidence record.</p>
      <form className="card" role="search" aria-label="Find a decision by id" onSubmit={search} noValidate>
        <label htmlFor={`${id}-search`}>Decision id</label>
        <div className="search-row">
          <input
            id={`${id}-search`}
            value={searchId}
            onChange={(e) => setSearchId(e.target.value)}
            placeholder="dec_…"
            autoComplete="off"
            spellCheck={false}
            aria-invalid={searchEmpty}
            aria-describedby={searchEmpty ? `${id}-search-err` : undefined}
          />
          <button type="submit">Open</button>
        </div>
        {searchEmpty && (
          <p id={`${id}-search-err`} className="field-error" role="alert">
            Enter a decision id.
          </p>
        )}
      </form>
      <section className="card" aria-labelledby={`${id}-filters`}>
        <h2 id={`${id}-filters`} className="h3">
          Filter
        </h2>
        <div className="form-grid">
          <div>
            <label htmlFor={`${id}-outcome`}>Outcome</label>
            <select id={`${id}-outcome`} value={filter.outcome} onChange={(e) => change({ outcome: Number(e.target.value) as Outcome })}>
              <option value={Outcome.UNSPECIFIED}>Any outcome</option>
              {OUTCOMES.map((o) => (
                <option key={o} value={o}>
                  {Outcome[o]}
                </option>
              ))}
            </select>
          </div>
          <div>
            <label htmlFor={`${id}-status`}>Review status</label>
            <select id={`${id}-status`} value={filter.status} onChange={(e) => change({ status: Number(e.target.value) as DecisionStatus })}>
              <option value={DecisionStatus.UNSPECIFIED}>Any status</option>
              {STATUSES.map((s) => (
                <option key={s} value={s}>
                  {DecisionStatus[s]}
                </option>
              ))}
            </select>
          </div>
          <div>
            <label htmlFor={`${id}-agent`}>Agent</label>
            <select id={`${id}-agent`} value={filter.agentId} onChange={(e) => change({ agentId: e.target.value })}>
              <option value="">Any agent</option>
              {filter.agentId && !names.has(filter.agentId) && <option value={filter.agentId}>{filter.agentId}</option>}
              {(agents.data?.agents ?? []).map((a) => (
                <option key={a.agentId} value={a.agentId}>
                  {a.name} ({a.agentId})
                </option>
              ))}
            </select>
          </div>
          <div>
            <label htmlFor={`${id}-size`}>Per page</label>
            <select id={`${id}-size`} value={filter.pageSize} onChange={(e) => change({ pageSize: Number(e.target.value) })}>
              {PAGE_SIZES.map((n) => (
                <option key={n} value={n}>
                  {n}
                </option>
              ))}
            </select>
          </div>
        </div>
        <p className="muted small">The API filters by outcome, review status and agent; it has no time filter, so the list runs newest first.</p>
      </section>
      <section className="card" aria-label="Decisions" aria-busy={page.isFetching}>
        {page.isPending ? (
          <Loading what="the decisions" />
        ) : page.error ? (
          <ApiError error={page.error} title="The decisions could not be read" />
        ) : decisions.length === 0 ? (
          <p className="empty">{filtered ? "No decision matches this filter." : "No decision yet: they appear here once agents submit Intents."}</p>
        ) : (
          <ScrollTable label="Decisions" testId="decisions" className="decision-table" columns={["Decision", "Outcome", "Status", "Action", "Amount", "Reason", "Agent", "Evaluated"]}>
            <tbody>
              {decisions.map((d) => (
                <tr key={d.decisionId} data-decision-id={d.decisionId}>
                  <th scope="row">
                    <Link to={`/decisions/${encodeURIComponent(d.decisionId)}`}>
                      <code className="nowrap">{d.decisionId}</code>
                    </Link>
                  </th>
                  <td>
                    <span className={`outcome outcome-${Outcome[d.outcome]}`} data-testid="row-outcome">
                      {Outcome[d.outcome]}
                    </span>
                  </td>
                  <td data-testid="row-status">{statusText(d.outcome, d.status)}</td>
                  <td>
                    <code>{breakable(d.action)}</code>
                  </td>
                  <td className="nowrap">{formatAmount(d.intent) || "—"}</td>
                  <td>
                    <code>{breakable(d.reason)}</code>
                  </td>
                  <td>{names.get(d.agentId) ?? <code>{d.agentId}</code>}</td>
                  <td className="nowrap">
                    <time dateTime={isoTime(d.evaluatedAt)}>{formatTime(d.evaluatedAt)}</time>
                  </td>
                </tr>
              ))}
            </tbody>
          </ScrollTable>
        )}
        <nav className="pager" aria-label="Pages of decisions">
          <button type="button" className="secondary" disabled={pageIndex === 0} onClick={() => setTokens((t) => t.slice(0, -1))}>
            ← Newer
          </button>
          <span data-testid="page-number">Page {pageIndex + 1}</span>
          <button
            type="button"
            className="secondary"
            disabled={!page.data?.nextPageToken || page.isPlaceholderData}
            onClick={() => setTokens((t) => [...t, page.data!.nextPageToken])}
          >
            Older →
          </button>
        </nav>
      </section>
    </main>
  );
}
