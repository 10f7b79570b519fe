import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { useId, useState, type FormEvent } from "react";
import { AgentService, AgentState, type Agent } from "../../../src/gen/mandate/v1/agents_pb.js";
import type { EvidenceRecord } from "../../../src/gen/mandate/v1/evidence_pb.js";
import { useAgentAuditRecords, useAgentDetail, useRotateAgentKey, useTransitionAgent, useUpdateAgent, type TransitionMethod } from "../api/agents";
import { describeFailure } from "../api/errors";
import { useCan, usePermissions, usePrincipal } from "../api/hooks";
import { ApiError, Loading } from "../components/api-error";
import { ConfirmButton } from "../components/confirm-button";
import { FocusedStatus } from "../components/focused-status";
import { Link } from "../components/link";
import { fieldError, LabelFields, PublicKeyField, wirePublicKey } from "../components/agent-fields";
import { formatTime, isoTime } from "../format";
import { StatePill, stateName } from "./agents";
import { ScrollTable } from "../components/scroll-table";
import "../authoring.css";
import "../agents.css";

const { REGISTERED, ACTIVE, SUSPENDED, REVOKED, RETIRED } = AgentState;

interface Transition {
  label: string;
  past: string;
  from: AgentState[];
  method: TransitionMethod;
  /** What the confirmation dialog says; none for a transition that can be undone. */
  confirm?: string;
}

/**
 * The lifecycle operations and the states each may start from: the spec's "Agent transitions"
 * table, as the server applies it (src/domain/agents.ts). Only these are offered.
 */
const TRANSITIONS: Transition[] = [
  { label: "Activate", past: "Activated", from: [REGISTERED], method: AgentService.method.activateAgent },
  { label: "Suspend", past: "Suspended", from: [ACTIVE], method: AgentService.method.suspendAgent },
  { label: "Reactivate", past: "Reactivated", from: [SUSPENDED], method: AgentService.method.reactivateAgent },
  {
    label: "Revoke",
    past: "Revoked",
    from: [REGISTERED, ACTIVE, SUSPENDED],
    method: AgentService.method.revokeAgent,
    confirm: "Revoking is permanent: the agent's certificate is revoked and it can never sign again. Use it for a compromised key.",
  },
  {
    label: "Retire",
    past: "Retired",
    from: [REGISTERED, ACTIVE, SUSPENDED],
    method: AgentService.method.retireAgent,
    confirm: "Retiring is permanent: the agent leaves operational use for good and can never sign again.",
  },
];

/** Whether an agent in `state` may sign actions (spec "Agent states"). */
const SIGNS: Record<AgentState, string> = {
  [AgentState.UNSPECIFIED]: "unknown",
  [REGISTERED]: "No: not yet operational",
  [ACTIVE]: "Yes",
  [SUSPENDED]: "No, but its Intents are reviewable",
  [REVOKED]: "No, ever (terminal)",
  [RETIRED]: "No, ever (terminal)",
};

/** /agents/:id: the agent, its certificates, heartbeat, the transitions its state allows, and its audit trail. */
export function AgentPage({ agentId }: { agentId: string }) {
  const id = useId();
  const agent = useAgentDetail(agentId);
  const canReadEvidence = useCan("EVIDENCE_READ");
  const audit = useAgentAuditRecords(agentId, canReadEvidence);
  return (
    <main aria-labelledby={`${id}-h`}>
      <p>
        <Link to="/agents">← Agents</Link>
      </p>
      <h1 id={`${id}-h`}>{agent.data ? `Agent ${agent.data.name}` : "Agent"}</h1>
      {agent.isPending ? (
        <Loading what="the agent" />
      ) : agent.error ? (
        <ApiError error={agent.error} title="The agent could not be read" />
      ) : (
        <>
          <Facts agent={agent.data} />
          <Lifecycle agent={agent.data} />
          <Certificates agent={agent.data} records={audit.data?.records} />
          <Labels agent={agent.data} />
          <section className="card" aria-labelledby={`${id}-audit`}>
            <h2 id={`${id}-audit`} className="h3">
              Audit trail
            </h2>
            {!canReadEvidence ? (
              <p className="muted small">The audit trail needs the EVIDENCE_READ permission, which this key lacks.</p>
            ) : audit.isPending ? (
              <Loading what="the audit trail" />
            ) : audit.error ? (
              <ApiError error={audit.error} title="The audit trail could not be read" />
            ) : (
              <AuditTrail records={audit.data.records} />
            )}
          </section>
        </>
      )}
    </main>
  );
}

function Facts({ agent: a }: { agent: Agent }) {
  const principal = usePrincipal(a.actingForPrincipalId);
  return (
    <section className="card" aria-label="Agent">
      <dl className="facts">
        <dt>State</dt>
        <dd>
          <StatePill state={a.state} testId="agent-state" />
        </dd>
        <dt>Can sign actions</dt>
        <dd>{SIGNS[a.state]}</dd>
        <dt>Agent id</dt>
        <dd>
          <code>{a.agentId}</code>
        </dd>
        <dt>Acts for</dt>
        <dd data-testid="principal">
          {principal.data ? (
            <>
              {principal.data.displayName}
              {principal.data.externalRef && <> ({principal.data.externalRef})</>} <code className="muted">{a.actingForPrincipalId}</code>
            </>
          ) : (
            <code>{a.actingForPrincipalId}</code>
          )}
        </dd>
        <dt>Owner</dt>
        <dd data-testid="owner">{a.owner || "—"}</dd>
        <dt>Business unit</dt>
        <dd data-testid="business-unit">{a.businessUnit || "—"}</dd>
        <dt>Environment</dt>
        <dd data-testid="environment">{a.environment || "—"}</dd>
        <dt>Last heartbeat</dt>
        <dd data-testid="heartbeat">
          {a.lastHeartbeatAt ? <time dateTime={isoTime(a.lastHeartbeatAt)}>{formatTime(a.lastHeartbeatAt)}</time> : "never: the agent has sent no heartbeat"}
        </dd>
        <dt>Registered</dt>
        <dd>
          <time dateTime={isoTime(a.createdAt)}>{formatTime(a.createdAt)}</time>
        </dd>
        <dt>Last changed</dt>
        <dd>
          <time dateTime={isoTime(a.updatedAt)}>{formatTime(a.updatedAt)}</time>
        </dd>
      </dl>
    </section>
  );
}

/** The transitions the agent's state allows, each a button; revoke and retire ask first. */
function Lifecycle({ agent: a }: { agent: Agent }) {
  const id = useId();
  const permissions = usePermissions();
  const [reason, setReason] = useState("");
  const [done, setDone] = useState("");
  const [refusal, setRefusal] = useState<{ label: string; error: unknown } | null>(null);
  const allowed = TRANSITIONS.filter((t) => t.from.includes(a.state));
  const canAdmin = permissions.data?.has("AGENT_ADMIN") ?? false;
  return (
    <section className="card" aria-labelledby={`${id}-h`}>
      <h2 id={`${id}-h`} className="h3">
        Lifecycle
      </h2>
      <FocusedStatus text={done} testId="transition-done" />
      {allowed.length === 0 ? (
        <p className="muted small" data-testid="no-transition">
          The agent is {stateName(a.state)}: no transition leaves this state.
        </p>
      ) : permissions.isPending ? null : !canAdmin ? (
        <p className="muted small" data-testid="no-admin">
          This key lacks AGENT_ADMIN: it can read this agent but not change its state, labels or key. From {stateName(a.state)} an administrator may{" "}
          {new Intl.ListFormat("en", { type: "disjunction" }).format(allowed.map((t) => t.label.toLowerCase()))} it.
        </p>
      ) : (
        <div className="lifecycle-controls">
          <label htmlFor={`${id}-reason`}>Reason (optional, recorded in the audit record)</label>
          <input id={`${id}-reason`} value={reason} maxLength={2000} onChange={(e) => setReason(e.target.value)} />
          <div className="actions" data-testid="transitions">
            {allowed.map((t) => (
              <TransitionButton
                key={t.label}
                agent={a}
                transition={t}
                reason={reason}
                on={{
                  done: (after) => {
                    setReason("");
                    setRefusal(null);
                    setDone(`${t.past}: the agent is now ${stateName(after.state)}.`);
                  },
                  refused: (error) => {
                    setDone("");
                    setRefusal({ label: t.label, error });
                  },
                }}
              />
            ))}
          </div>
        </div>
      )}
      {refusal && <ApiError error={refusal.error} title={`${refusal.label} was refused`} />}
    </section>
  );
}

function TransitionButton({ agent: a, transition: t, reason, on }: { agent: Agent; transition: Transition; reason: string; on: Parameters<typeof useTransitionAgent>[1] }) {
  const mutation = useTransitionAgent(t.method, on);
  const run = () => mutation.mutate({ agentId: a.agentId, reason });
  if (!t.confirm) {
    return (
      <button type="button" disabled={mutation.isPending} onClick={run}>
        {t.label}
      </button>
    );
  }
  return (
    <ConfirmButton label={t.label} title={`${t.label} agent ${a.name}?`} description={t.confirm} confirmLabel={`${t.label} agent`} onConfirm={run} disabled={mutation.isPending}>
      {reason && <p className="small">Reason recorded: “{reason}”</p>}
    </ConfirmButton>
  );
}

/** A record's payload field as text ("" when absent). */
function text(payload: JsonObject | undefined, key: string): string {
  const v: JsonValue | undefined = payload?.[key];
  return typeof v === "string" ? v : v === undefined || v === null ? "" : JSON.stringify(v);
}

/**
 * The agent's certificates: the current one always; with the audit trail (EVIDENCE_READ), every
 * one it has had, from its registration and key rotation records.
 */
function Certificates({ agent: a, records }: { agent: Agent; records: EvidenceRecord[] | undefined }) {
  const id = useId();
  const issued = (records ?? [])
    .filter((r) => r.kind === "agent.registered" || r.kind === "agent.key_rotated")
    .map((r) => ({ certificateId: text(r.payload, "certificate_id"), publicKey: text(r.payload, "public_key"), at: r.createdAt }));
  if (!issued.some((c) => c.certificateId === a.certificateId)) issued.push({ certificateId: a.certificateId, publicKey: a.publicKey, at: undefined });
  const status = (certificateId: string) =>
    certificateId !== a.certificateId ? "replaced" : a.state === REVOKED ? "revoked" : a.state === ACTIVE ? "current, verifying" : `current (the agent is ${stateName(a.state)})`;
  return (
    <section className="card" aria-labelledby={`${id}-h`}>
      <h2 id={`${id}-h`} className="h3">
        Certificates
      </h2>
      <ScrollTable label="Certificates" testId="certificates" className="wide" columns={["Certificate", "Public key", "Issued", "Status"]}>
        <tbody>
          {[...issued].reverse().map((c) => (
            <tr key={c.certificateId} data-certificate-id={c.certificateId}>
              <th scope="row">
                <code>{c.certificateId}</code>
              </th>
              <td>
                <code data-testid="public-key">{c.publicKey}</code>
              </td>
              <td>{c.at ? <time dateTime={isoTime(c.at)}>{formatTime(c.at)}</time> : "—"}</td>
              <td data-testid="certificate-status">{status(c.certificateId)}</td>
            </tr>
          ))}
        </tbody>
      </ScrollTable>
      <RotateKey agent={a} />
    </section>
  );
}

/** RotateAgentKey: a new certificate for a new public key, while the agent is not revoked or retired. */
function RotateKey({ agent: a }: { agent: Agent }) {
  const canAdmin = useCan("AGENT_ADMIN");
  const rotate = useRotateAgentKey();
  const [publicKey, setPublicKey] = useState("");
  if (!canAdmin || a.state === REVOKED || a.state === RETIRED) return null;
  const fields = rotate.error ? describeFailure(rotate.error).fields : undefined;
  const submit = (e: FormEvent) => {
    e.preventDefault();
    rotate.mutate({ agentId: a.agentId, publicKey: wirePublicKey(publicKey) }, { onSuccess: () => setPublicKey("") });
  };
  return (
    <form onSubmit={submit} noValidate aria-label="Rotate the key">
      <h3 className="h4">Rotate the key</h3>
      <PublicKeyField label="New public key" value={publicKey} onChange={setPublicKey} error={fieldError(fields, "public_key")} />
      <button type="submit" disabled={rotate.isPending}>
        Rotate key
      </button>
      {rotate.isSuccess && <p role="status">The key is rotated: the previous certificate no longer verifies.</p>}
      <ApiError error={rotate.error} title="Key rotation was refused" />
    </form>
  );
}

/** The responsibility labels, editable with AGENT_ADMIN (UpdateAgent; an empty field clears). */
function Labels({ agent: a }: { agent: Agent }) {
  const id = useId();
  const canAdmin = useCan("AGENT_ADMIN");
  const update = useUpdateAgent();
  const [labels, setLabels] = useState({ owner: a.owner, businessUnit: a.businessUnit, environment: a.environment });
  if (!canAdmin) return null;
  const fields = update.error ? describeFailure(update.error).fields : undefined;
  const submit = (e: FormEvent) => {
    e.preventDefault();
    update.mutate({ agentId: a.agentId, ...labels });
  };
  return (
    <form className="card" onSubmit={submit} noValidate aria-labelledby={`${id}-h`}>
      <h2 id={`${id}-h`} className="h3">
        Responsibility labels
      </h2>
      <p className="muted small">Labels say who answers for the agent; they grant nothing. A changed owner is recorded as a transfer.</p>
      <LabelFields values={labels} onChange={setLabels} fields={fields} />
      <button type="submit" disabled={update.isPending}>
        Save labels
      </button>
      {update.isSuccess && <p role="status">Labels saved.</p>}
      <ApiError error={update.error} title="The labels were refused" />
    </form>
  );
}

/** What a record says happened, in a line. */
function describe(r: EvidenceRecord): string {
  const p = r.payload;
  switch (r.kind) {
    case "agent.registered":
      return `registered with certificate ${text(p, "certificate_id")}`;
    case "agent.key_rotated":
      return `certificate ${text(p, "previous_certificate_id")} replaced by ${text(p, "certificate_id")}`;
    case "agent.labels_changed":
    case "agent.ownership_transferred": {
      const before = (p?.before ?? {}) as JsonObject;
      const after = (p?.after ?? {}) as JsonObject;
      const changed = Object.keys(after).filter((k) => before[k] !== after[k]);
      return changed.map((k) => `${k}: “${text(before, k)}” → “${text(after, k)}”`).join("; ");
    }
    default:
      return p?.from !== undefined && p?.to !== undefined ? `${text(p, "from")} → ${text(p, "to")}` : "";
  }
}

function AuditTrail({ records }: { records: EvidenceRecord[] }) {
  if (records.length === 0) return <p className="empty">No record yet.</p>;
  return (
    <ScrollTable label="Audit trail" testId="audit-trail" className="wide" columns={["Seq", "Record", "What changed", "By", "Reason", "At"]}>
      <tbody>
        {records.map((r) => (
          <tr key={r.evidenceId} data-kind={r.kind}>
            <th scope="row">{String(r.seq)}</th>
            <td>
              <code className="record-kind">{r.kind}</code>
            </td>
            <td>{describe(r) || "—"}</td>
            <td>
              <code>{text(r.payload, "by") || "—"}</code>
            </td>
            <td>{text(r.payload, "reason") || "—"}</td>
            <td>
              <time dateTime={isoTime(r.createdAt)}>{formatTime(r.createdAt)}</time>
            </td>
          </tr>
        ))}
      </tbody>
    </ScrollTable>
  );
}
