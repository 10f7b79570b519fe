import type { Cursor } from "../base/pagination.js";
import type { EvidenceEntry } from "./evidence.js";

/** Agent states (spec "Agent states"). */
export type AgentState = "registered" | "active" | "suspended" | "revoked" | "retired";

/** A stored agent with its active (or, once revoked, last) certificate id. */
export interface AgentRow {
  agent_id: string;
  organization_id: string;
  name: string;
  acting_for_principal_id: string;
  public_key: string;
  owner: string;
  business_unit: string;
  environment: string;
  state: AgentState;
  created_at: Date;
  updated_at: Date;
  last_heartbeat_at: Date | null;
  certificate_id: string;
}

/** An agent as first registered (state `registered`), with the id of its first certificate. */
export type NewAgent = Omit<AgentRow, "created_at" | "updated_at" | "last_heartbeat_at" | "state">;

/** A certificate with its agent's state, as the signature check needs it. */
export interface CertificateRow {
  certificate_id: string;
  agent_id: string;
  organization_id: string;
  public_key: string;
  state: "active" | "replaced" | "revoked";
  agent_state: AgentState;
  /** The organization's state at read time: a suspended organization's certificates authenticate nothing. */
  organization_state: "active" | "suspended";
  acting_for_principal_id: string;
  /** The acting principal, as policy evaluation needs it. */
  principal_external_ref: string | null;
  principal_kind: string;
  /** The organization's policy head at read time (null before any bundle exists). */
  bundle_digest: string | null;
  policy_versions: Record<string, number> | null;
  graph_version: number | null;
}

/** Who holds a public key: the certificate, its agent and organization, and the certificate's state. */
export type KeyHolder = Pick<CertificateRow, "certificate_id" | "agent_id" | "organization_id" | "state">;

/** The ownership labels of an agent. */
export interface AgentLabels {
  owner: string;
  business_unit: string;
  environment: string;
}

/** A lifecycle transition computed from the agent as it stands under lock. */
export interface AgentTransition {
  /** The state the agent moves to. */
  state: AgentState;
  /** Whether every certificate of the agent still in use is revoked with it (permanently). */
  revokeCertificates: boolean;
  /** The evidence record stating the transition. */
  evidence: EvidenceEntry;
}

/** A key rotation computed from the agent as it stands under lock. */
export interface KeyRotation {
  /** The id of the new certificate. */
  certificateId: string;
  /** The new public key; the agent's active certificate is replaced by one for it. */
  publicKey: string;
  /** The evidence record stating the rotation. */
  evidence: EvidenceEntry;
}

/** A label change computed from the agent as it stands under lock. */
export interface LabelChange {
  labels: AgentLabels;
  /** The evidence record stating the change. */
  evidence: EvidenceEntry;
}

/**
 * Agents and their certificates. Every change that leaves evidence writes the change and its
 * evidence record in one transaction (both or neither). Changes whose rules are the domain's
 * (lifecycle, rotation, labels) take a `step` that is handed the agent as it stands under a row
 * lock and returns the change, or throws to refuse it: then nothing is written and the error
 * reaches the caller as thrown. `step` runs synchronously inside the transaction and may be
 * called again if the transaction is retried after a conflict.
 */
export interface AgentStore {
  /** The agent of the organization, or null (also when it belongs to another organization). */
  get(organizationId: string, agentId: string): Promise<AgentRow | null>;

  /** Up to `limit` agents of the organization in (created_at, agent_id) order, strictly after `after` when given. */
  list(organizationId: string, after: Cursor | null, limit: number): Promise<AgentRow[]>;

  /** The certificate holding `publicKey` (of any organization, in any state), or null when no certificate ever held it. */
  certificateByKey(publicKey: string): Promise<KeyHolder | null>;

  /**
   * A certificate by id (of any organization, in any state) with its agent's live state, the
   * acting principal and the organization's policy head, in one read; null when there is no
   * such certificate.
   */
  certificate(certificateId: string): Promise<CertificateRow | null>;

  /**
   * Stores a new agent in state `registered` with its first (active) certificate, and
   * `evidence`, together. Returns the stored agent.
   * Throws NotFoundError when the organization has no principal `acting_for_principal_id`.
   * Throws CollisionError when the public key is already held by a certificate (key
   * `certificates_public_key_key`) or by an adapter (key `public_key_held_by_adapter`); another
   * key only on an id collision.
   */
  register(agent: NewAgent, evidence: EvidenceEntry): Promise<AgentRow>;

  /**
   * Applies a lifecycle transition: locks the agent, hands it to `step`, stores the state it
   * returns (revoking the certificates when it says so) and its evidence record. Returns the
   * agent as changed. Throws NotFoundError when the organization has no such agent.
   */
  transition(organizationId: string, agentId: string, step: (current: AgentRow) => AgentTransition): Promise<AgentRow>;

  /**
   * Rotates the agent's key: locks the agent, hands it to `step`, replaces the active
   * certificate by a new one for the key it returns (the old one stops verifying at once) and
   * stores its evidence record. Returns the agent as changed. Throws NotFoundError when the
   * organization has no such agent; throws CollisionError when the new key is already held by a
   * certificate (key `certificates_public_key_key`) or by an adapter (key
   * `public_key_held_by_adapter`); another key only on a certificate id collision.
   */
  rotateKey(organizationId: string, agentId: string, step: (current: AgentRow) => KeyRotation): Promise<AgentRow>;

  /**
   * Changes the agent's labels: locks the agent, hands it to `step`, stores the labels it
   * returns and its evidence record; when `step` returns null, nothing changes and the agent is
   * returned as it stands. Returns the agent as changed. Throws NotFoundError when the
   * organization has no such agent.
   */
  relabel(organizationId: string, agentId: string, step: (current: AgentRow) => LabelChange | null): Promise<AgentRow>;

  /**
   * Records a heartbeat sent at `sentAt` if the agent is active and `sentAt` is later than the
   * last accepted heartbeat's; returns the time it was received (millisecond precision). Returns
   * null when it was not recorded (the agent is not active, or it is a replay or out of order:
   * `state` tells which), including when there is no such agent.
   */
  heartbeat(agentId: string, sentAt: Date): Promise<Date | null>;

  /** The agent's current state, or null when there is no such agent. */
  state(agentId: string): Promise<AgentState | null>;
}
