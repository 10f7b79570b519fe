import { ApiError, errorFromResponse, MandateError, ResolutionTimeoutError, ServerError, TransportError } from "./errors.js";
import { SseParser } from "./events.js";
import type { AgentKey } from "./keys.js";
import type {
  EventEnvelope,
  EventName,
  Webhook,
  WebhookDelivery,
  Agent,
  AgentIdentity,
  ApiKey,
  Capability,
  CapabilityToken,
  Decision,
  GovernanceDocument,
  GraphVersion,
  GraphVersionRef,
  Heartbeat,
  IntentFields,
  IssueCapabilityOptions,
  Permission,
  PolicyVersionRef,
  Principal,
  PrincipalKind,
  ReviewResolution,
  Sandbox,
  VerifiedCapability,
  VerifyCapabilityOptions,
} from "./types.js";

/*
 * The TypeScript client of Mandate's /v1 JSON API: the same surface and rules
 * as the Python client (clients/python). It signs Intents and heartbeats with
 * the agent's key, sets the certificate headers, retries what is safe to retry
 * and turns every failure into a typed error.
 *
 * Retries: connection failures, timeouts and 5xx answers are retried up to
 * `max_retries` times (default 4, at most 10), sleeping a random time in
 * [0, min(backoff_cap_ms, backoff_base_ms · 2^n)] before retry n ("full jitter";
 * defaults 250 ms base, 5 s cap). A 4xx (401, 403, 409, 422, 429, …) is never
 * retried. A retried Intent resends the exact same signed bytes, so the nonce
 * makes it idempotent: the service answers the original decision.
 *
 * Casing, chosen once: every member a caller passes or reads (options and argument objects,
 * answers, error fields, an identity, a key's `public_key`) is snake_case, exactly as the wire
 * JSON, the docs and the Python client spell it, so nothing is renamed on the way in or out;
 * functions and methods are camelCase, as JavaScript names them.
 */

/** Options of a MandateClient. */
export interface MandateClientOptions {
  /** e.g. `http://127.0.0.1:8080` (the `/v1` prefix is added by the client). */
  base_url: string;
  /** An organization or sandbox API key, sent as `Authorization: Bearer`. */
  api_key?: string;
  /** The platform operator key (internal use); needs `organization_id` for organization-scoped calls. */
  operator_key?: string;
  organization_id?: string;
  /** Per-attempt timeout, default 10 000 ms. */
  timeout_ms?: number;
  /** Retries after the first attempt, default 4, clamped to 0..10. */
  max_retries?: number;
  /** Default 250 ms. */
  backoff_base_ms?: number;
  /** Default 5 000 ms. */
  backoff_cap_ms?: number;
  /** The fetch to use (tests count requests with it); defaults to the global fetch. */
  fetch?: typeof fetch;
}

/** Options of `MandateClient.watchEvents`. */
export interface WatchEventsOptions {
  /** Event names to receive; all when absent or empty. */
  types?: EventName[];
  /** Start after this event_id (the last one seen); from now when absent. */
  after?: string;
  /** Ends the iteration (quietly) when aborted. */
  signal?: AbortSignal;
  /**
   * Called each time a connection is listening (its first message, a heartbeat, arrived):
   * whatever is recorded after it reaches this iterator. Awaited before reading on; a caller
   * that started without `after` re-reads its state here after a reconnection.
   */
  on_listening?: () => void | Promise<void>;
  /** Connection attempts in a row that may fail (without listening) before the iterator throws; default 20. */
  max_reconnects?: number;
  /** A connection silent this long (no event, no heartbeat) is dropped and resumed; default 45 000 ms (three heartbeats). */
  idle_timeout_ms?: number;
}

/** Options of `MandateClient.waitForResolution`. */
export interface WaitForResolutionOptions {
  /** Default 60 000 ms; then ResolutionTimeoutError. */
  timeout_ms?: number;
  /** Polling interval when polling, default 1 000 ms. */
  interval_ms?: number;
  /** Read the decision as this agent (its own decisions only). */
  agent?: AgentIdentity;
  /** Wait on the event stream when the client has organization credentials (default true); false: poll. */
  stream?: boolean;
}

/** Hard upper bound on `max_retries`, whatever the caller asks for. */
export const MAX_RETRIES_LIMIT = 10;

/** An agent by id, or anything carrying its `agent_id` (an Agent, an AgentIdentity). */
type AgentRef = string | Pick<Agent, "agent_id">;

function agentIdOf(agent: AgentRef): string {
  return typeof agent === "string" ? agent : agent.agent_id;
}

/** Who authenticates one request: nobody, the client's organization credentials, or an agent's signature. */
export type RequestCredentials =
  | { kind: "none" }
  | { kind: "org" }
  /** Agent-signed: headers computed per attempt (a GET's signature covers a fresh timestamp). */
  | { kind: "agent"; headers: () => Promise<Record<string, string>> };

/** Options of `MandateClient.request`. */
export interface RequestOptions {
  body?: unknown;
  credentials?: RequestCredentials;
  query?: Record<string, string | number | undefined>;
  /** A Date.now() instant bounding the whole call: each attempt is cut to the time left, and no retry starts after it. */
  deadline?: number;
}

const seg = encodeURIComponent;

/** A client of one Mandate service; every method returns a promise and fails with a MandateError. */
export class MandateClient {
  readonly base_url: string;
  // A true private field: the API or operator key is never enumerated, so logging or
  // JSON.stringify of a client cannot print it.
  readonly #options: MandateClientOptions;
  private readonly timeoutMs: number;
  private readonly maxRetries: number;
  private readonly backoffBaseMs: number;
  private readonly backoffCapMs: number;
  private readonly fetchImpl: typeof fetch;

  constructor(options: MandateClientOptions) {
    this.#options = { ...options };
    this.base_url = options.base_url.replace(/\/+$/, "");
    this.timeoutMs = finiteOption("timeout_ms", options.timeout_ms ?? 10_000);
    // A NaN here (max_retries: Number(process.env.UNSET)) would otherwise retry forever.
    this.maxRetries = Math.max(0, Math.min(MAX_RETRIES_LIMIT, Math.floor(finiteOption("max_retries", options.max_retries ?? 4))));
    this.backoffBaseMs = options.backoff_base_ms ?? 250;
    this.backoffCapMs = options.backoff_cap_ms ?? 5_000;
    // A browser's fetch must be called on the window, never as a method of this client ("Illegal invocation").
    this.fetchImpl = options.fetch ?? ((input, init) => fetch(input, init));
  }

  /** The same client authenticating with `api_key` (e.g. the key a sandbox was created with). */
  withApiKey(apiKey: string): MandateClient {
    return new MandateClient({ ...this.#options, api_key: apiKey });
  }

  // --- organizations, keys, principals --------------------------------------

  /** Creates a sandbox organization (no authentication); use `withApiKey(sandbox.api_key)` next. */
  createSandbox(email: string): Promise<Sandbox> {
    return this.request("POST", "/v1/sandbox/organizations", { body: { email }, credentials: { kind: "none" } });
  }

  /** Creates a scoped API key of the caller's organization; the secret is in this answer only. */
  createApiKey(name: string, permissions: Permission[]): Promise<ApiKey> {
    return this.request("POST", "/v1/organization/api-keys", { body: { name, permissions } });
  }

  createPrincipal(options: { display_name: string; kind: PrincipalKind; external_ref?: string }): Promise<Principal> {
    return this.request("POST", "/v1/principals", {
      body: { display_name: options.display_name, kind: options.kind, ...(options.external_ref !== undefined && { external_ref: options.external_ref }) },
    });
  }

  getPrincipal(principalId: string): Promise<Principal> {
    return this.request("GET", `/v1/principals/${seg(principalId)}`);
  }

  // --- agents ---------------------------------------------------------------

  /**
   * Registers an agent under `principal_id` with `key`'s public key (the private
   * key never leaves this process). Idempotent per key: registering the same
   * key again in the same organization with the same name, principal and labels
   * answers the same agent; other ones are a ConflictError (`already_exists`).
   */
  registerAgent(options: { name: string; principal_id: string; key: AgentKey; owner?: string; business_unit?: string; environment?: string }): Promise<Agent> {
    const body: Record<string, string> = { name: options.name, acting_for_principal_id: options.principal_id, public_key: options.key.public_key };
    if (options.owner !== undefined) body.owner = options.owner;
    if (options.business_unit !== undefined) body.business_unit = options.business_unit;
    if (options.environment !== undefined) body.environment = options.environment;
    return this.request("POST", "/v1/agents", { body });
  }

  getAgent(agent: AgentRef): Promise<Agent> {
    return this.request("GET", `/v1/agents/${seg(agentIdOf(agent))}`);
  }

  /** registered → active. */
  activate(agent: AgentRef, reason?: string): Promise<Agent> {
    return this.transition(agent, "activate", reason);
  }

  /** active → suspended: its Intents go to human review until reactivated. */
  suspend(agent: AgentRef, reason?: string): Promise<Agent> {
    return this.transition(agent, "suspend", reason);
  }

  /** suspended → active. */
  reactivate(agent: AgentRef, reason?: string): Promise<Agent> {
    return this.transition(agent, "reactivate", reason);
  }

  /** → revoked (terminal): for a compromised key, from any non-terminal state. */
  revoke(agent: AgentRef, reason?: string): Promise<Agent> {
    return this.transition(agent, "revoke", reason);
  }

  /** → retired (terminal). */
  retire(agent: AgentRef, reason?: string): Promise<Agent> {
    return this.transition(agent, "retire", reason);
  }

  /** Replaces the agent's key: the answer carries the new certificate_id; the old one stops verifying at once. */
  rotateKey(agent: AgentRef, newKey: AgentKey): Promise<Agent> {
    return this.request("POST", `/v1/agents/${seg(agentIdOf(agent))}/rotate-key`, { body: { public_key: newKey.public_key } });
  }

  /** An agent-signed liveness signal (accepted while the agent is active). */
  async heartbeat(agent: AgentIdentity): Promise<Heartbeat> {
    const bytes = new TextEncoder().encode(JSON.stringify({ agent_id: agent.agent_id, sent_at: new Date().toISOString(), nonce: globalThis.crypto.randomUUID() }));
    const headers = await this.bodySignature(agent, bytes);
    return this.request("POST", `/v1/agents/${seg(agent.agent_id)}/heartbeat`, { body: bytes, credentials: { kind: "agent", headers: async () => headers } });
  }

  private transition(agent: AgentRef, op: string, reason?: string): Promise<Agent> {
    return this.request("POST", `/v1/agents/${seg(agentIdOf(agent))}/${op}`, { body: reason === undefined ? {} : { reason } });
  }

  // --- intents and decisions ------------------------------------------------

  /**
   * Signs and submits an Intent. ALLOW, DENY and HUMAN_REVIEW all resolve
   * (a decision is data); an error means evaluation did not complete.
   */
  async submitIntent(agent: AgentIdentity, intent: IntentFields): Promise<Decision> {
    const { requested_at, nonce, ...fields } = intent;
    const doc: Record<string, unknown> = { agent_id: agent.agent_id };
    for (const [k, v] of Object.entries(fields)) if (v !== undefined) doc[k] = v;
    doc.requested_at = requested_at === undefined ? new Date().toISOString() : typeof requested_at === "string" ? requested_at : requested_at.toISOString();
    doc.nonce = nonce ?? globalThis.crypto.randomUUID();
    // Serialised and signed once: every retry sends these exact bytes.
    const bytes = new TextEncoder().encode(JSON.stringify(doc));
    const headers = await this.bodySignature(agent, bytes);
    return this.request("POST", "/v1/intents", { body: bytes, credentials: { kind: "agent", headers: async () => headers } });
  }

  /** Reads a decision with the client's credentials, or, given `agent`, as that agent (its own decisions only). */
  getDecision(decisionId: string, options: { agent?: AgentIdentity; deadline?: number } = {}): Promise<Decision> {
    const path = `/v1/decisions/${seg(decisionId)}`;
    const { agent } = options;
    const credentials: RequestCredentials = agent
      ? {
          kind: "agent",
          headers: async () => {
            const timestamp = new Date().toISOString();
            return {
              "x-service-key-id": agent.certificate_id,
              "x-service-timestamp": timestamp,
              "x-service-signature": await agent.key.sign(`GET ${path}\n${timestamp}`),
            };
          },
        }
      : { kind: "org" };
    return this.request("GET", path, { credentials, ...(options.deadline !== undefined && { deadline: options.deadline }) });
  }

  /** The decision, read before `deadline`; a read the deadline cut off is the wait's ResolutionTimeoutError. */
  private async readBy(decisionId: string, agent: AgentIdentity | undefined, deadline: number): Promise<Decision> {
    try {
      return await this.getDecision(decisionId, { ...(agent && { agent }), deadline });
    } catch (err) {
      if (!(err instanceof TransportError || err instanceof ServerError) || Date.now() < deadline) throw err;
      throw new ResolutionTimeoutError({ status: 0, detail: "resolution_timeout", message: `Decision ${decisionId} could not be read before the wait ended: ${err.message}` });
    }
  }

  /**
   * Waits until a decision is final and answers it: at once for ALLOW and DENY, and for
   * HUMAN_REVIEW once its status is RESOLVED. With organization credentials (and `stream` not
   * false) it waits on the event stream for the decision's HumanReviewResolved, reading the
   * decision whenever the stream (re)starts listening so that nothing recorded in between is
   * missed; when the stream cannot be used (a key without EVENTS_READ, a service without the
   * stream, a connection that keeps failing) it polls every `interval_ms` (default 1 s) for the
   * time left. Throws ResolutionTimeoutError after `timeout_ms` (default 60 s).
   */
  async waitForResolution(decisionId: string, options: WaitForResolutionOptions = {}): Promise<Decision> {
    const deadline = Date.now() + (options.timeout_ms ?? 60_000);
    if (options.stream !== false && this.hasOrgCredentials()) {
      const found = await this.waitOnStream(decisionId, deadline, options.agent);
      if (found) return found;
    }
    return this.pollForResolution(decisionId, deadline, options.interval_ms ?? 1_000, options.agent);
  }

  /** The final decision, or undefined when the stream could not be used (then the caller polls); throws at the deadline. */
  private async waitOnStream(decisionId: string, deadline: number, agent: AgentIdentity | undefined): Promise<Decision | undefined> {
    const stop = new AbortController();
    let found: Decision | undefined;
    let last: Decision | undefined;
    let readError: unknown;
    const check = async () => {
      try {
        last = await this.readBy(decisionId, agent, deadline);
      } catch (err) {
        readError = err;
        stop.abort();
        return;
      }
      if (isFinal(last)) {
        found = last;
        stop.abort();
      }
    };
    const timer = setTimeout(() => stop.abort(), Math.max(0, deadline - Date.now()));
    try {
      for await (const e of this.watchEvents({ types: ["HumanReviewResolved"], signal: stop.signal, on_listening: check, max_reconnects: 3 })) {
        if (e.data.decision_id === decisionId) await check();
        if (found || readError !== undefined) break;
      }
    } catch (err) {
      // The stream refused (403 without EVENTS_READ, 404 from a service without it) or kept
      // failing: polling may still work, for the time left.
      if (!(err instanceof ApiError || err instanceof TransportError)) throw err;
      if (readError === undefined && Date.now() < deadline) return undefined;
    } finally {
      clearTimeout(timer);
    }
    if (readError !== undefined) throw readError;
    if (found) return found;
    throw new ResolutionTimeoutError({ status: 0, detail: "resolution_timeout", message: `Decision ${decisionId} was still ${last?.status ?? "PENDING"} when the wait ended.` });
  }

  private async pollForResolution(decisionId: string, deadline: number, interval: number, agent: AgentIdentity | undefined): Promise<Decision> {
    for (;;) {
      const decision = await this.readBy(decisionId, agent, deadline);
      if (isFinal(decision)) return decision;
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new ResolutionTimeoutError({ status: 0, detail: "resolution_timeout", message: `Decision ${decisionId} was still ${decision.status ?? "PENDING"} when the wait ended.` });
      }
      await sleep(Math.min(interval, left));
    }
  }

  /** Resolves a pending HUMAN_REVIEW (REVIEWER). The outcome keeps reading HUMAN_REVIEW. */
  reviewDecision(decisionId: string, resolution: ReviewResolution, reason: string): Promise<Decision> {
    return this.request("POST", `/v1/decisions/${seg(decisionId)}/review`, { body: { resolution, reason } });
  }

  // --- capabilities ---------------------------------------------------------

  /** Issues the single Capability of an ALLOW decision. */
  issueCapability(decisionId: string, options: IssueCapabilityOptions): Promise<CapabilityToken> {
    return this.request("POST", `/v1/decisions/${seg(decisionId)}/capability-token`, { body: capabilityBody(options) });
  }

  /** Issues the single Capability of a HUMAN_REVIEW decision resolved `approved`. */
  issueCapabilityFromReview(decisionId: string, options: IssueCapabilityOptions): Promise<CapabilityToken> {
    return this.request("POST", `/v1/decisions/${seg(decisionId)}/capability-token/from-review`, { body: capabilityBody(options) });
  }

  /**
   * Verifies and consumes a Capability (CAPABILITY_VERIFY). A mismatch is a
   * ConflictError with the token left unconsumed; a replay is a ConflictError
   * `capability_consumed`.
   */
  verifyCapability(options: VerifyCapabilityOptions): Promise<VerifiedCapability> {
    const { environment, ...rest } = options;
    return this.request("POST", "/v1/capability-tokens/verify", { body: environment === undefined ? rest : { ...rest, environment } });
  }

  /** A Capability's state, bound fields and `ttl_seconds`; never its token. */
  getCapability(capabilityId: string): Promise<Capability> {
    return this.request("GET", `/v1/capabilities/${seg(capabilityId)}`);
  }

  // --- governance (what the platform UI does) -------------------------------

  /**
   * Uploads a governance document (CSV, YAML or JSON), parsed at once: one that does not parse
   * is a ValidationError whose field errors carry the file line and column. `name` (the file
   * name, say) is unique in the organization; a second upload under it is a ConflictError.
   */
  uploadGovernanceDocument(name: string, kind: GovernanceDocument["kind"], format: GovernanceDocument["format"], content: string): Promise<GovernanceDocument> {
    return this.request("POST", "/v1/authority-graph/documents", { body: { name, kind, format, content } });
  }

  /** The uploaded governance documents, oldest first. */
  async listGovernanceDocuments(): Promise<GovernanceDocument[]> {
    return (await this.request<{ documents: GovernanceDocument[] }>("GET", "/v1/authority-graph/documents")).documents;
  }

  /** Deletes a governance document; graph versions generated from it keep their graph. */
  async deleteGovernanceDocument(documentId: string): Promise<void> {
    await this.request("DELETE", `/v1/authority-graph/documents/${seg(documentId)}`);
  }

  /** Generates a draft graph version from the uploaded documents (all of them unless named). */
  generateGraphVersion(documentIds: string[] = []): Promise<GraphVersionRef> {
    return this.request("POST", "/v1/authority-graph/versions:generate", { body: { document_ids: documentIds } });
  }

  /** Authors a draft graph version directly: `{roles, memberships, limits, delegations, approval_matrix}`. */
  createGraphVersion(graph: Record<string, unknown>): Promise<GraphVersionRef> {
    return this.request("POST", "/v1/authority-graph/versions", { body: { graph } });
  }

  /** draft → approved, by a POLICY_APPROVER other than the version's author. */
  approveGraphVersion(version: number): Promise<GraphVersionRef> {
    return this.request("POST", `/v1/authority-graph/versions/${version}/approve`, { body: {} });
  }

  /** Makes an approved graph version active (POLICY_APPROVER). */
  publishGraphVersion(version: number): Promise<GraphVersionRef> {
    return this.request("POST", `/v1/authority-graph/versions/${version}/publish`, { body: {} });
  }

  /** Every graph version (draft, approved, active, superseded), newest first, without graphs. */
  async listGraphVersions(): Promise<GraphVersion[]> {
    return (await this.request<{ versions: GraphVersion[] }>("GET", "/v1/authority-graph/versions")).versions;
  }

  /** One graph version with its graph, whatever its state. */
  getGraphVersion(version: number): Promise<GraphVersion> {
    return this.request("GET", `/v1/authority-graph/versions/${version}`);
  }

  /** Creates a policy with its first draft version from a runtime policy document (`{actions, rules}`). */
  createPolicy(policyKey: string, rules: Record<string, unknown>, description = ""): Promise<PolicyVersionRef> {
    return this.request("POST", "/v1/policies", { body: { policy_key: policyKey, description, source: { rules } } });
  }

  /** draft → in_review (POLICY_AUTHOR). */
  submitPolicyVersion(policyKey: string, version: number): Promise<PolicyVersionRef> {
    return this.request("POST", `/v1/policies/${seg(policyKey)}/versions/${version}/submit`, { body: {} });
  }

  /** in_review → approved, by a POLICY_APPROVER other than the author. */
  approvePolicyVersion(policyKey: string, version: number): Promise<PolicyVersionRef> {
    return this.request("POST", `/v1/policies/${seg(policyKey)}/versions/${version}/approve`, { body: {} });
  }

  /** approved → active (POLICY_APPROVER): compiles the organization's bundle. */
  publishPolicyVersion(policyKey: string, version: number): Promise<PolicyVersionRef> {
    return this.request("POST", `/v1/policies/${seg(policyKey)}/versions/${version}/publish`, { body: {} });
  }

  /** Reads an evidence record (EVIDENCE_READ). */
  getEvidence(evidenceId: string): Promise<Record<string, unknown>> {
    return this.request("GET", `/v1/evidence/${seg(evidenceId)}`);
  }

  // --- events and webhooks (early access, /v1alpha) -------------------------

  /**
   * The organization's events as they are recorded (EVENTS_READ), over Server-Sent Events
   * (`GET /v1alpha/events:watch`), oldest first after `after`, then live; heartbeats are not
   * yielded. A dropped connection (network failure, a 5xx, the service shutting down, a
   * connection silent for `idle_timeout_ms`) is resumed after the last event yielded, so the
   * iterator yields every event once: no gap, no duplicate (within the retention window).
   * Reconnections sleep a full-jitter backoff (`backoff_base_ms` · 2^n, capped at
   * `backoff_cap_ms`); after `max_reconnects` failed connections in a row it throws the last
   * failure (TransportError or ServerError). A 4xx is never retried: 403 without EVENTS_READ,
   * 422 for an unknown type or a cursor that is unknown or past the retention window
   * (`cursor_expired`: start again without `after`), 429 past the organization's open streams.
   *
   * Until the first event, a reconnection has no cursor and starts from now again: events
   * recorded while disconnected are not replayed (use `on_listening` to re-read state then).
   */
  async *watchEvents(options: WatchEventsOptions = {}): AsyncGenerator<EventEnvelope, void, undefined> {
    let cursor = options.after ?? "";
    const maxReconnects = Math.max(0, options.max_reconnects ?? 20);
    const idleMs = options.idle_timeout_ms ?? 45_000;
    let failures = 0;
    for (;;) {
      if (options.signal?.aborted) return;
      const params = new URLSearchParams();
      if (options.types?.length) params.set("types", options.types.join(","));
      if (cursor) params.set("after", cursor);
      const url = `${this.base_url}/v1alpha/events:watch${params.size ? `?${params}` : ""}`;
      const connection = new AbortController();
      const onAbort = () => connection.abort();
      options.signal?.addEventListener("abort", onAbort, { once: true });
      // Until the answer's headers: the per-request timeout; after them, the idle timer.
      let timer = setTimeout(() => connection.abort(new DOMException("timeout", "TimeoutError")), this.timeoutMs);
      let listening = false;
      // The caller's own on_listening failed: its error, never retried as a dropped connection.
      let callbackFailure: { err: unknown } | undefined;
      let failure: MandateError;
      try {
        const res = await this.fetchImpl(url, { method: "GET", headers: { accept: "text/event-stream", "user-agent": "mandate-client-ts/0.1", ...this.orgHeaders() }, signal: connection.signal });
        if (!res.ok || !res.body) {
          const text = await res.text();
          const err = errorFromResponse(res.status, parseBody(text), res.headers.get("x-request-id"));
          if (res.status < 500) throw err;
          failure = err;
        } else {
          const idle = () => {
            clearTimeout(timer);
            timer = setTimeout(() => connection.abort(new DOMException("idle", "TimeoutError")), idleMs);
          };
          idle();
          const parser = new SseParser();
          const decoder = new TextDecoder();
          const reader = res.body.getReader();
          try {
            for (;;) {
              const { done, value } = await reader.read();
              if (done) break;
              idle();
              for (const message of parser.push(decoder.decode(value, { stream: true }))) {
                if (!listening) {
                  listening = true;
                  failures = 0;
                  try {
                    await options.on_listening?.();
                  } catch (err) {
                    callbackFailure = { err };
                    throw err;
                  }
                  if (options.signal?.aborted) return;
                }
                if (message.kind !== "event") continue;
                const envelope = JSON.parse(message.data) as EventEnvelope;
                cursor = envelope.event_id;
                yield envelope;
                if (options.signal?.aborted) return;
              }
            }
          } finally {
            await reader.cancel().catch(() => undefined);
          }
          // The service ended the stream (it is shutting down): resume with the cursor.
          failure = new ServerError({ status: 503, detail: "unavailable", message: "The event stream ended; resuming." });
        }
      } catch (err) {
        if (callbackFailure) throw callbackFailure.err;
        if (options.signal?.aborted) return;
        if (err instanceof MandateError) throw err;
        failure = transportError(err, this.base_url, this.timeoutMs);
      } finally {
        clearTimeout(timer);
        options.signal?.removeEventListener("abort", onAbort);
        connection.abort();
      }
      if (!listening && ++failures > maxReconnects) throw failure;
      await sleep(Math.random() * Math.min(this.backoffCapMs, this.backoffBaseMs * 2 ** Math.max(0, failures - 1)), options.signal);
    }
  }

  /** Subscribes `url` to `events` (all when empty) from now on (ORG_ADMIN); the answer's `secret` is shown only here. */
  createWebhook(options: { url: string; events?: EventName[]; description?: string }): Promise<Webhook> {
    return this.request("POST", "/v1alpha/webhooks", { body: { url: options.url, events: options.events ?? [], description: options.description ?? "" } });
  }

  /** The organization's webhooks, never their secrets. */
  async listWebhooks(): Promise<Webhook[]> {
    return (await this.request<{ webhooks?: Webhook[] }>("GET", "/v1alpha/webhooks")).webhooks ?? [];
  }

  getWebhook(webhookId: string): Promise<Webhook> {
    return this.request("GET", `/v1alpha/webhooks/${seg(webhookId)}`);
  }

  /** Removes a webhook; its pending deliveries are dropped. */
  async deleteWebhook(webhookId: string): Promise<void> {
    await this.request("DELETE", `/v1alpha/webhooks/${seg(webhookId)}`);
  }

  /** A new signing secret, in this answer only; the old one signs nothing from now on. Clears `failing`. */
  rotateWebhookSecret(webhookId: string): Promise<Webhook> {
    return this.request("POST", `/v1alpha/webhooks/${seg(webhookId)}:rotate-secret`, { body: {} });
  }

  /** Deliveries with their attempts, newest event first; pass `next_page_token` back as `page_token`. */
  async listWebhookDeliveries(webhookId: string, options: { page_size?: number; page_token?: string } = {}): Promise<{ deliveries: WebhookDelivery[]; next_page_token?: string }> {
    const page = await this.request<{ deliveries?: WebhookDelivery[]; next_page_token?: string }>("GET", `/v1alpha/webhooks/${seg(webhookId)}/deliveries`, {
      query: { page_size: options.page_size, page_token: options.page_token },
    });
    return { deliveries: page.deliveries ?? [], ...(page.next_page_token ? { next_page_token: page.next_page_token } : {}) };
  }

  /** Sends a delivery's event again now, with the same `webhook-id`. */
  redeliverWebhookDelivery(webhookId: string, deliveryId: string): Promise<WebhookDelivery> {
    return this.request("POST", `/v1alpha/webhooks/${seg(webhookId)}/deliveries/${seg(deliveryId)}:redeliver`, { body: {} });
  }

  // --- transport --------------------------------------------------------------

  /**
   * Any /v1 call, with the client's credentials, retries and typed errors:
   * for endpoints without a method of their own. A string or byte body is sent
   * as is, anything else as JSON.
   */
  async request<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    const credentials = options.credentials ?? { kind: "org" };
    let url = `${this.base_url}${path}`;
    if (options.query) {
      const params = new URLSearchParams();
      for (const [k, v] of Object.entries(options.query)) if (v !== undefined) params.set(k, String(v));
      if (params.size) url += `?${params}`;
    }
    let body: string | Uint8Array<ArrayBuffer> | undefined;
    if (options.body !== undefined) {
      if (typeof options.body === "string") body = options.body;
      else if (options.body instanceof Uint8Array) body = new Uint8Array(options.body);
      else body = JSON.stringify(options.body);
    }
    for (let attempt = 0; ; attempt++) {
      const headers: Record<string, string> = { accept: "application/json", "user-agent": "mandate-client-ts/0.1" };
      if (body !== undefined) headers["content-type"] = "application/json";
      if (credentials.kind === "org") Object.assign(headers, this.orgHeaders());
      else if (credentials.kind === "agent") Object.assign(headers, await credentials.headers());

      let failure: MandateError;
      // The service's own Retry-After (sent with every 503) is the least wait before the next attempt.
      let serverWait = 0;
      const thisAttempt = options.deadline === undefined ? this.timeoutMs : Math.max(1, Math.min(this.timeoutMs, options.deadline - Date.now()));
      try {
        const res = await this.fetchImpl(url, { method, headers, body, signal: AbortSignal.timeout(thisAttempt) });
        const text = await res.text();
        const parsed = parseBody(text);
        if (res.ok) return parsed as T;
        failure = errorFromResponse(res.status, parsed, res.headers.get("x-request-id"));
        if (res.status < 500) throw failure;
        serverWait = retryAfterMs(res.headers.get("retry-after"));
      } catch (err) {
        if (err instanceof MandateError) throw err;
        failure = transportError(err, this.base_url, thisAttempt);
      }
      if (attempt >= this.maxRetries) throw failure;
      const delay = Math.max(serverWait, Math.random() * Math.min(this.backoffCapMs, this.backoffBaseMs * 2 ** attempt));
      if (options.deadline !== undefined && Date.now() + delay >= options.deadline) throw failure;
      await sleep(delay);
    }
  }

  private hasOrgCredentials(): boolean {
    return Boolean(this.#options.api_key || this.#options.operator_key);
  }

  private orgHeaders(): Record<string, string> {
    if (this.#options.api_key) return { authorization: `Bearer ${this.#options.api_key}` };
    if (this.#options.operator_key) {
      return {
        "x-service-operator-key": this.#options.operator_key,
        ...(this.#options.organization_id !== undefined && { "x-service-organization-id": this.#options.organization_id }),
      };
    }
    return {};
  }

  private async bodySignature(agent: AgentIdentity, bytes: Uint8Array): Promise<Record<string, string>> {
    return { "x-service-key-id": agent.certificate_id, "x-service-signature": await agent.key.sign(bytes) };
  }
}

/** `value`, or a TypeError naming `name` when it is not a finite number. */
function finiteOption(name: string, value: number): number {
  if (!Number.isFinite(value)) throw new TypeError(`MandateClient: ${name} must be a finite number, not ${String(value)}`);
  return value;
}

/** A Retry-After header's delay in ms (seconds, or an HTTP date), capped at a minute; 0 without one. */
function retryAfterMs(header: string | null): number {
  if (header === null) return 0;
  const seconds = /^\d+$/.test(header.trim()) ? Number(header.trim()) : (Date.parse(header) - Date.now()) / 1000;
  return Number.isFinite(seconds) && seconds > 0 ? Math.min(seconds * 1000, 60_000) : 0;
}

function parseBody(text: string): unknown {
  if (text === "") return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return text; // not JSON (a proxy's error page): kept for the error message
  }
}

/** A fetch failure as a TransportError: a timeout, or a connection that failed. */
function transportError(err: unknown, baseUrl: string, timeoutMs: number): TransportError {
  const e = err instanceof Error ? err : new Error(String(err));
  const timedOut = e.name === "TimeoutError" || e.name === "AbortError";
  const cause = (e as { cause?: { code?: string; message?: string } }).cause;
  return new TransportError({
    status: 0,
    detail: timedOut ? "timeout" : "connection_failed",
    message: timedOut ? `No answer from ${baseUrl} within ${timeoutMs} ms.` : `Could not reach ${baseUrl}: ${cause?.code ?? cause?.message ?? e.message}`,
    cause: err,
  });
}

function capabilityBody(options: IssueCapabilityOptions): Record<string, unknown> {
  return { audience: options.audience, issued_by: options.issued_by, ...(options.ttl_seconds !== undefined && { ttl_seconds: options.ttl_seconds }) };
}

/** A decision that will not change: ALLOW or DENY, or a HUMAN_REVIEW that was resolved. */
function isFinal(decision: Decision): boolean {
  return decision.outcome !== "HUMAN_REVIEW" || decision.status === "RESOLVED";
}

/** Sleeps `ms`, or less when `signal` aborts first. */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}
