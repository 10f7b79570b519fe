/** What the mirror's atomic consume answered. */
export type MirrorVerdict = "OK" | "CONSUMED" | "INACTIVE" | "MISS";

/** Live states the mirror's consume checks, as the durable store knows them. */
export interface LiveStates {
  organization: string;
  agent: string;
  /** Present when the capability is bound to an integration: "active" only if it and its adapters are. */
  integration?: string;
}

/** The capability a mirror consume is about, and what it depends on. */
export interface MirroredCapability {
  organizationId: string;
  agentId: string;
  integrationId: string | null;
  capabilityId: string;
  /** How long the consumed marker lives from the consume, in ms: the caller makes it outlive the capability's expiry. */
  ttlMs: number;
}

/**
 * A fast, non-durable mirror of what a Capability's consume depends on, with a consumed
 * marker per Capability, checked and set in one atomic step, so that replays are refused
 * without touching the durable store. The durable store stays the arbiter: a mirror may lose
 * everything at any time (MISS), and every call may fail while it is unreachable or slow: a
 * call never waits past a short deadline (a fraction of a second), so a mirror that stops
 * answering costs its callers that deadline, not their request.
 */
export interface CapabilityMirror {
  /** Checks the mirrored states and sets the consumed marker atomically; MISS when the mirror lacks a state it needs. */
  consume(c: MirroredCapability): Promise<MirrorVerdict>;
  /** Writes the states a capability depends on, as read from the durable store (after a MISS). */
  restore(c: Omit<MirroredCapability, "capabilityId" | "ttlMs">, states: LiveStates): Promise<void>;
  /** Clears a consumed marker the durable store did not confirm. */
  release(organizationId: string, capabilityId: string): Promise<void>;
  /** Mirrors an organization's state after its lifecycle change committed in the durable store. */
  setOrganization(organizationId: string, state: string): Promise<void>;
  /** Mirrors an agent's state after its lifecycle change committed in the durable store. */
  setAgent(organizationId: string, agentId: string, state: string): Promise<void>;
  /** Mirrors an integration's state (as `LiveStates.integration` has it) after its change committed. */
  setIntegration(organizationId: string, integrationId: string, state: string): Promise<void>;
  /** Closes the connection to the mirror, at shutdown, as bounded as any call; calls after it fail. */
  close(): Promise<void>;
}
