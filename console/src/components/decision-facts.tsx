import type { Decision } from "../../../src/gen/mandate/v1/decisions_pb.js";
import { useAgent, usePrincipal } from "../api/hooks";
import { formatAmount, formatTime, isoTime } from "../format";

/** The agent and the principal it acts for (AgentService.GetAgent, PrincipalService.GetPrincipal). */
export function AgentAndPrincipal({ agentId }: { agentId: string }) {
  const agent = useAgent(agentId);
  const principal = usePrincipal(agent.data?.actingForPrincipalId);
  return (
    <>
      <dt>Agent</dt>
      <dd>
        {agent.data ? (
          <>
            {agent.data.name} <code className="muted">{agentId}</code>
          </>
        ) : (
          <code>{agentId}</code>
        )}
      </dd>
      <dt>Principal</dt>
      <dd>
        {principal.data ? (
          <>
            {principal.data.displayName} <code className="muted">{principal.data.principalId}</code>
          </>
        ) : agent.data ? (
          <code>{agent.data.actingForPrincipalId}</code>
        ) : agent.isPending ? (
          "…"
        ) : (
          "unknown"
        )}
      </dd>
    </>
  );
}

/** The policy versions a decision was evaluated against ("payments v1, graph v1"). */
export function policyVersionsText(d: Decision): string {
  const parts = Object.entries(d.policyVersions)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k} v${v}`);
  if (d.graphVersion) parts.push(`authority graph v${d.graphVersion}`);
  return parts.length ? parts.join(", ") : "none (no rule ran)";
}

/** What was attempted and why it needs a human: the facts of the review queue and the review page. */
export function DecisionFacts({ decision: d }: { decision: Decision }) {
  return (
    <dl className="facts">
      <dt>Action</dt>
      <dd>
        <code>{d.action}</code>
      </dd>
      <dt>Amount</dt>
      <dd data-testid="amount">{formatAmount(d.intent) || "—"}</dd>
      <dt>Reason</dt>
      <dd>
        <code data-testid="reason">{d.reason}</code>
      </dd>
      <AgentAndPrincipal agentId={d.agentId} />
      <dt>Policy versions</dt>
      <dd>{policyVersionsText(d)}</dd>
      <dt>Evaluated</dt>
      <dd>
        <time dateTime={isoTime(d.evaluatedAt)}>{formatTime(d.evaluatedAt)}</time>
      </dd>
    </dl>
  );
}
