import type { AgentRow, AgentState, AgentStore } from "../storage/agents.js";
import { CollisionError, NotFoundError } from "../storage/errors.js";
import type { OrgCaller } from "../base/caller.js";
import { MandateError, notFound, validationFailed, type FieldError } from "../base/errors.js";
import type { EvidenceLog } from "./evidence-log.js";
import { newId } from "./ids.js";
import { decodeCursor, encodeCursor, pageSize } from "../base/pagination.js";
import { AgentSignatures, parsePublicKey } from "./signatures.js";
import { parseInstant } from "../base/instants.js";
import { parseJsonObject } from "../base/text.js";

/** The stored shapes this module hands to services. */
export type { AgentRow, AgentState } from "../storage/agents.js";

/** Lifecycle operations and the states each may start from (spec "Agent transitions"). */
export const TRANSITIONS = {
  activate: { from: ["registered"], to: "active", evidence: "agent.activated" },
  suspend: { from: ["active"], to: "suspended", evidence: "agent.suspended" },
  reactivate: { from: ["suspended"], to: "active", evidence: "agent.reactivated" },
  revoke: { from: ["registered", "active", "suspended"], to: "revoked", evidence: "agent.revoked" },
  retire: { from: ["registered", "active", "suspended"], to: "retired", evidence: "agent.retired" },
} as const satisfies Record<string, { from: readonly AgentState[]; to: AgentState; evidence: string }>;

/** A lifecycle operation. */
export type Transition = keyof typeof TRANSITIONS;

/** Told about every committed agent state change (e.g. to mirror it into Redis). */
export type AgentStateListener = (agent: { agentId: string; organizationId: string; state: AgentState }) => Promise<void>;

/** Registration input. */
export interface Registration {
  name: string;
  actingForPrincipalId: string;
  publicKey: string;
  owner?: string;
  businessUnit?: string;
  environment?: string;
}

/** Ownership label changes; absent fields stay as they are. */
export interface LabelChanges {
  owner?: string;
  businessUnit?: string;
  environment?: string;
  actingForPrincipalId?: string;
}

function checkLabel(errors: FieldError[], field: string, value: string | undefined): void {
  if (value !== undefined && value.length > 200) errors.push({ field, code: "too_long", message: "at most 200 characters" });
}

/**
 * The request fields in which a repeated registration differs from the agent its key already
 * identifies (as it stands): the name, the acting principal, and each label the request gives.
 * A label left out claims nothing, as in a PATCH.
 */
function registrationDifferences(agent: AgentRow, name: string, input: Registration): string[] {
  const differing: string[] = [];
  if (agent.name !== name) differing.push("name");
  if (agent.acting_for_principal_id !== input.actingForPrincipalId) differing.push("acting_for_principal_id");
  if (input.owner !== undefined && agent.owner !== input.owner) differing.push("owner");
  if (input.businessUnit !== undefined && agent.business_unit !== input.businessUnit) differing.push("business_unit");
  if (input.environment !== undefined && agent.environment !== input.environment) differing.push("environment");
  return differing;
}

/** Agents: registration, lifecycle, key rotation, labels and heartbeats; every change leaves evidence. */
export class Agents {
  constructor(
    private readonly agents: AgentStore,
    private readonly evidence: EvidenceLog,
    private readonly signatures: AgentSignatures,
    private readonly onStateChange: AgentStateListener = async () => undefined,
  ) {}

  private async mustGet(caller: OrgCaller, agentId: string): Promise<AgentRow> {
    const row = await this.agents.get(caller.organizationId, agentId);
    if (!row) throw notFound("Agent");
    return row;
  }

  /**
   * Registers an agent (state `registered`). Idempotent per public key: the
   * same key in the same organization with the same name, acting principal and
   * the labels it gives returns the same identity; a key used by another
   * organization, rotated away, or registered for another principal, under
   * another name or with another label is 409 `already_exists`.
   */
  async register(caller: OrgCaller, input: Registration): Promise<{ agent: AgentRow; created: boolean }> {
    const errors: FieldError[] = [];
    const name = input.name.trim();
    if (!name) errors.push({ field: "name", code: "required", message: "must not be empty" });
    else if (name.length > 200) errors.push({ field: "name", code: "too_long", message: "at most 200 characters" });
    if (!input.actingForPrincipalId) errors.push({ field: "acting_for_principal_id", code: "required", message: "must name a principal" });
    try {
      parsePublicKey(input.publicKey);
    } catch (err) {
      errors.push(...(err as MandateError).fieldErrors);
    }
    checkLabel(errors, "owner", input.owner);
    checkLabel(errors, "business_unit", input.businessUnit);
    checkLabel(errors, "environment", input.environment);
    if (errors.length) throw validationFailed(errors);

    for (let attempt = 0; attempt < 3; attempt++) {
      const existing = await this.agents.certificateByKey(input.publicKey);
      if (existing) {
        if (existing.organization_id !== caller.organizationId || existing.state === "replaced") {
          throw new MandateError("already_exists", "This public key is already registered to another identity.");
        }
        const agent = await this.mustGet(caller, existing.agent_id);
        const differing = registrationDifferences(agent, name, input);
        if (differing.length) {
          throw new MandateError(
            "already_exists",
            "This public key is already registered to an agent with other fields; a registration is repeated only with the same ones.",
            differing.map((field) => ({ field, code: "already_exists", message: "differs from the agent already registered with this public key" })),
          );
        }
        return { agent, created: false };
      }
      const agentId = newId("agt");
      const certificateId = newId("crt");
      const owner = input.owner ?? "";
      const businessUnit = input.businessUnit ?? "";
      const environment = input.environment ?? "";
      try {
        const fields = {
          agent_id: agentId,
          certificate_id: certificateId,
          name,
          acting_for_principal_id: input.actingForPrincipalId,
          public_key: input.publicKey,
          owner,
          business_unit: businessUnit,
          environment,
        };
        // The registered record states exactly what was stored, and by whom.
        const agent = await this.agents.register(
          { ...fields, organization_id: caller.organizationId },
          { organizationId: caller.organizationId, kind: "agent.registered", subjectId: agentId, payload: { ...fields, by: caller.identity } },
        );
        return { agent, created: true };
      } catch (err) {
        if (err instanceof NotFoundError) {
          throw validationFailed([{ field: "acting_for_principal_id", code: "unknown_principal", message: "no such principal in this organization" }]);
        }
        if (err instanceof CollisionError && err.key === "public_key_held_by_adapter") {
          throw new MandateError("already_exists", "This public key is already registered to another identity.");
        }
        // A concurrent registration of the same key won the insert: answer as it did.
        if (err instanceof CollisionError) continue;
        throw err;
      }
    }
    throw new MandateError("unavailable", "Registration contended; try again.");
  }

  /** One agent of the caller's organization. */
  get(caller: OrgCaller, agentId: string): Promise<AgentRow> {
    return this.mustGet(caller, agentId);
  }

  /** A page of agents and the next page token. */
  async list(caller: OrgCaller, size: number, token: string): Promise<{ rows: AgentRow[]; next: string }> {
    const limit = pageSize(size);
    const rows = await this.agents.list(caller.organizationId, decodeCursor(token), limit + 1);
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return { rows: page, next: rows.length > limit && last ? encodeCursor({ createdAt: last.created_at, id: last.agent_id }) : "" };
  }

  /**
   * Applies a lifecycle transition and its evidence in one transaction; 409
   * `invalid_transition` (nothing changes) when the current state does not allow it.
   */
  async transition(caller: OrgCaller, agentId: string, op: Transition, reason: string): Promise<AgentRow> {
    if (reason.length > 2000) throw validationFailed([{ field: "reason", code: "too_long", message: "at most 2000 characters" }]);
    const { from, to, evidence } = TRANSITIONS[op];
    let agent: AgentRow;
    try {
      agent = await this.agents.transition(caller.organizationId, agentId, (current) => {
        if (!(from as readonly AgentState[]).includes(current.state)) {
          throw new MandateError("invalid_transition", `Cannot ${op} an agent that is ${current.state}.`);
        }
        return {
          state: to,
          revokeCertificates: to === "revoked",
          evidence: {
            organizationId: caller.organizationId,
            kind: evidence,
            subjectId: agentId,
            payload: { agent_id: agentId, operation: op, from: current.state, to, reason, by: caller.identity },
          },
        };
      });
    } catch (err) {
      if (err instanceof NotFoundError) throw notFound("Agent");
      throw err;
    }
    await this.onStateChange({ agentId, organizationId: caller.organizationId, state: agent.state });
    return agent;
  }

  /** Issues a new certificate for a new key; the old certificate stops verifying at once. */
  async rotateKey(caller: OrgCaller, agentId: string, publicKey: string): Promise<AgentRow> {
    parsePublicKey(publicKey);
    try {
      return await this.agents.rotateKey(caller.organizationId, agentId, (agent) => {
        if (agent.state === "revoked" || agent.state === "retired") {
          throw new MandateError("invalid_transition", `Cannot rotate the key of an agent that is ${agent.state}.`);
        }
        const certificateId = newId("crt");
        return {
          certificateId,
          publicKey,
          evidence: {
            organizationId: caller.organizationId,
            kind: "agent.key_rotated",
            subjectId: agentId,
            payload: { agent_id: agentId, previous_certificate_id: agent.certificate_id, certificate_id: certificateId, public_key: publicKey, by: caller.identity },
          },
        };
      });
    } catch (err) {
      if (err instanceof NotFoundError) throw notFound("Agent");
      if (err instanceof CollisionError) throw new MandateError("already_exists", "This public key is already registered to an identity.");
      throw err;
    }
  }

  /** Changes ownership labels; never the acting principal (422). A changed owner is recorded as a transfer. */
  async updateLabels(caller: OrgCaller, agentId: string, changes: LabelChanges): Promise<AgentRow> {
    const errors: FieldError[] = [];
    if (changes.actingForPrincipalId !== undefined) {
      errors.push({ field: "acting_for_principal_id", code: "immutable", message: "the acting principal never changes; register a new agent instead" });
    }
    checkLabel(errors, "owner", changes.owner);
    checkLabel(errors, "business_unit", changes.businessUnit);
    checkLabel(errors, "environment", changes.environment);
    if (errors.length) throw validationFailed(errors);
    try {
      return await this.agents.relabel(caller.organizationId, agentId, (agent) => {
        const before = { owner: agent.owner, business_unit: agent.business_unit, environment: agent.environment };
        const after = {
          owner: changes.owner ?? agent.owner,
          business_unit: changes.businessUnit ?? agent.business_unit,
          environment: changes.environment ?? agent.environment,
        };
        if (JSON.stringify(before) === JSON.stringify(after)) return null;
        return {
          labels: after,
          evidence: {
            organizationId: caller.organizationId,
            kind: before.owner !== after.owner ? "agent.ownership_transferred" : "agent.labels_changed",
            subjectId: agentId,
            payload: { agent_id: agentId, before, after, acting_for_principal_id: agent.acting_for_principal_id, by: caller.identity },
          },
        };
      });
    } catch (err) {
      if (err instanceof NotFoundError) throw notFound("Agent");
      throw err;
    }
  }

  /** Accepts an agent-signed heartbeat `{agent_id, sent_at, nonce}` while the agent is active. */
  async heartbeat(keyId: string, signature: string, body: Uint8Array, pathAgentId: string, skewSeconds: number): Promise<{ agentId: string; state: AgentState; at: Date }> {
    const cert = await this.signatures.verifyLive(keyId, signature, body, false);
    const d = parseJsonObject(body);
    const errors: FieldError[] = [];
    for (const k of Object.keys(d)) if (!["agent_id", "sent_at", "nonce"].includes(k)) errors.push({ field: k, code: "unknown_field", message: "unknown field" });
    if (d.agent_id !== cert.agent_id || d.agent_id !== pathAgentId) errors.push({ field: "agent_id", code: "mismatch", message: "must be the signing agent's id" });
    if (typeof d.nonce !== "string" || d.nonce.length === 0 || d.nonce.length > 128) errors.push({ field: "nonce", code: "required", message: "a nonce string is required" });
    const sent = parseInstant(d.sent_at);
    if (!sent) errors.push({ field: "sent_at", code: "invalid_format", message: "expected an RFC 3339 timestamp" });
    else if (Math.abs(Date.now() - sent.getTime()) > skewSeconds * 1000) throw new MandateError("request_expired", `sent_at must be within ${skewSeconds} s of server time.`);
    if (errors.length) throw validationFailed(errors);
    const at = await this.agents.heartbeat(cert.agent_id, sent!);
    if (!at) {
      if ((await this.agents.state(cert.agent_id)) !== "active") throw new MandateError("agent_not_active", "The agent is not active.");
      throw new MandateError("nonce_reused", "A heartbeat must be sent after the last accepted one; this one is a replay or out of order.");
    }
    return { agentId: cert.agent_id, state: "active", at };
  }

  /** The agent's signed audit records, oldest first. */
  async auditRecords(caller: OrgCaller, agentId: string) {
    await this.mustGet(caller, agentId);
    return this.evidence.bySubject(caller.organizationId, agentId);
  }
}
