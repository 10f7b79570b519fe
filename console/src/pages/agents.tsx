import { useEffect, useId, useMemo, useState } from "react";
import { AgentState, type Agent } from "../../../src/gen/mandate/v1/agents_pb.js";
import type { Principal } from "../../../src/gen/mandate/v1/principals_pb.js";
import { useAgentPages, usePrincipalPages } from "../api/agents";
import { usePermissions } from "../api/hooks";
import { ApiError, Loading } from "../components/api-error";
import { Link } from "../components/link";
import { ScrollTable } from "../components/scroll-table";
import { formatTime, isoTime } from "../format";
import { BASE } from "../router";
import "../authoring.css";
import "../agents.css";

/** The lifecycle states, in the spec's order ("Agent states"). */
export const AGENT_STATES = [AgentState.REGISTERED, AgentState.ACTIVE, AgentState.SUSPENDED, AgentState.REVOKED, AgentState.RETIRED];

/** A state's wire name ("registered"), as the API documents it. */
export function stateName(state: AgentState): string {
  return state === AgentState.UNSPECIFIED ? "unknown" : AgentState[state].toLowerCase();
}

/** A state as a labelled pill. */
export function StatePill({ state, testId }: { state: AgentState; testId?: string }) {
  const name = stateName(state);
  return (
    <span className={`state agent-state-${name}`} data-testid={testId}>
      {name}
    </span>
  );
}

/** Every principal read so far, by id. */
export function usePrincipalIndex(): Map<string, Principal> {
  const principals = usePrincipalPages();
  return useMemo(() => new Map((principals.data?.pages ?? []).flatMap((p) => p.principals).map((p) => [p.principalId, p])), [principals.data]);
}

/** Whether `agent` matches the search text: its name, ids, labels or principal, ignoring case. */
function matches(agent: Agent, principal: Principal | undefined, text: string): boolean {
  const needle = text.trim().toLowerCase();
  if (!needle) return true;
  const haystack = [agent.name, agent.agentId, agent.certificateId, agent.owner, agent.businessUnit, agent.environment, agent.actingForPrincipalId];
  if (principal) haystack.push(principal.displayName, principal.externalRef);
  return haystack.some((s) => s.toLowerCase().includes(needle));
}

/** The filters as the address keeps them (?state=active&q=…), so a filtered list can be reloaded and shared. */
function readFilters(): { state: string; q: string } {
  const params = new URLSearchParams(window.location.search);
  const state = params.get("state") ?? "";
  return { state: AGENT_STATES.some((s) => stateName(s) === state) ? state : "", q: params.get("q") ?? "" };
}

function writeFilters(state: string, q: string): void {
  const params = new URLSearchParams();
  if (state) params.set("state", state);
  if (q) params.set("q", q);
  const query = params.toString();
  history.replaceState(null, "", `${BASE}/agents${query ? `?${query}` : ""}`);
}

/**
 * /agents: the organization's agents, oldest first, a page at a time. ListAgents takes no filter,
 * so the state filter and the search run here; while either is set, every page is read, so
 * nothing that matches is missed.
 */
export function AgentsPage() {
  const id = useId();
  const permissions = usePermissions();
  const canAdmin = permissions.data?.has("AGENT_ADMIN") ?? false;
  const agents = useAgentPages();
  const principals = usePrincipalIndex();
  const [state, setState] = useState(() => readFilters().state);
  const [q, setQ] = useState(() => readFilters().q);
  useEffect(() => writeFilters(state, q), [state, q]);
  const filtering = state !== "" || q.trim() !== "";
  const { hasNextPage, isFetchingNextPage, fetchNextPage } = agents;
  useEffect(() => {
    if (filtering && hasNextPage && !isFetchingNextPage) void fetchNextPage();
  }, [filtering, hasNextPage, isFetchingNextPage, fetchNextPage]);

  // An agent registered between two pages' reads is listed once.
  const seen = new Set<string>();
  const all = (agents.data?.pages ?? []).flatMap((p) => p.agents).filter((a) => !seen.has(a.agentId) && seen.add(a.agentId));
  const shown = all.filter((a) => (!state || stateName(a.state) === state) && matches(a, principals.get(a.actingForPrincipalId), q));
  return (
    <main aria-labelledby={`${id}-h`}>
      <h1 id={`${id}-h`}>Agents</h1>
      <p className="muted">
        Agents are identities with a lifecycle: registered → active ⇄ suspended, and revoked or retired for good. Registration grants no authority; an agent
        acts for one principal, within that principal&apos;s authority.
      </p>
      {canAdmin ? (
        <p className="actions">
          <Link to="/agents/new" className="button-link">
            Register an agent
          </Link>
        </p>
      ) : (
        permissions.data && (
          <p className="muted small" data-testid="no-admin">
            This key lacks AGENT_ADMIN: it can read the agents but not register them or change their state.
          </p>
        )
      )}
      <form className="card filters" role="search" aria-label="Filter agents" onSubmit={(e) => e.preventDefault()}>
        <div>
          <label htmlFor={`${id}-state`}>State</label>
          <select id={`${id}-state`} value={state} onChange={(e) => setState(e.target.value)}>
            <option value="">Every state</option>
            {AGENT_STATES.map((s) => (
              <option key={s} value={stateName(s)}>
                {stateName(s)}
              </option>
            ))}
          </select>
        </div>
        <div>
          <label htmlFor={`${id}-q`}>Search</label>
          <input
            id={`${id}-q`}
            type="search"
            value={q}
            onChange={(e) => setQ(e.target.value)}
            aria-describedby={`${id}-q-help`}
            autoComplete="off"
            spellCheck={false}
          />
          <p id={`${id}-q-help`} className="muted small help">
            Name, agent or certificate id, owner, business unit, environment or principal.
          </p>
        </div>
      </form>
      <section className="card" aria-label="Agents">
        {agents.isPending ? (
          <Loading what="the agents" />
        ) : agents.error ? (
          <ApiError error={agents.error} title="The agents could not be read" />
        ) : all.length === 0 ? (
          <p className="empty">No agent is registered yet.{canAdmin && " Register one with its public key."}</p>
        ) : (
          <>
            <p className="muted small" role="status" data-testid="agent-count">
              {filtering ? `${shown.length} of ${all.length} agents match` : `${all.length} agents`}
              {hasNextPage ? (filtering ? "; reading the rest…" : "; more to load") : ""}
            </p>
            {shown.length === 0 ? (
              <p className="empty">No agent matches these filters.</p>
            ) : (
              <ScrollTable label="Agents" testId="agents" className="wide" columns={["Agent", "State", "Acts for", "Owner", "Environment", "Last heartbeat"]}>
                <tbody>
                  {shown.map((a) => {
                    const principal = principals.get(a.actingForPrincipalId);
                    return (
                      <tr key={a.agentId} data-agent-id={a.agentId}>
                        <th scope="row">
                          <Link to={`/agents/${encodeURIComponent(a.agentId)}`}>{a.name}</Link>
                          <br />
                          <code className="muted small">{a.agentId}</code>
                        </th>
                        <td>
                          <StatePill state={a.state} />
                        </td>
                        <td>{principal ? principal.displayName : <code>{a.actingForPrincipalId}</code>}</td>
                        <td>{a.owner || "—"}</td>
                        <td>{a.environment || "—"}</td>
                        <td>{a.lastHeartbeatAt ? <time dateTime={isoTime(a.lastHeartbeatAt)}>{formatTime(a.lastHeartbeatAt)}</time> : "never"}</td>
                      </tr>
                    );
                  })}
                </tbody>
              </ScrollTable>
            )}
          </>
        )}
        {hasNextPage && !filtering && (
          <button type="button" onClick={() => void fetchNextPage()} disabled={isFetchingNextPage}>
            {isFetchingNextPage ? "Loading…" : "Show more agents"}
          </button>
        )}
      </section>
    </main>
  );
}
