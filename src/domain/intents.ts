import { hash } from "node:crypto";
import type { Limits } from "./limits.js";
import type { DecisionRow, DecisionStore, IntentContext, IntentLookup, NewDecision } from "../storage/decisions.js";
import type { DecisionRecording, Ledger } from "../storage/ledger.js";
import { BatchedReads } from "./batched-reads.js";
import { MandateError, organizationSuspended, validationFailed, type FieldError } from "../base/errors.js";
import { newId } from "./ids.js";
import { parseJsonObject } from "../base/text.js";
import { describeDeclaration, valueFits, type FieldDeclaration } from "../policy/field-types.js";
import type { Evaluation, EvaluationInput, PolicyEvaluation } from "./policy-evaluation.js";
import { AgentSignatures, requireLiveSigner, type SignerIdentity } from "./signatures.js";

/**
 * The decision was evaluated against a policy head or integration contract that has changed
 * since: it is not recorded, and the Intent must be evaluated again (Intents does so).
 */
class StaleContext extends MandateError {
  constructor() {
    super("unavailable", "The organization's policy or integration contract changed while the Intent was evaluated; submit it again.");
  }
}

/** A decision to record, without the evidence id the ledger assigns. */
type DecisionDraft = Omit<NewDecision, "evidence_id">;

/** The decision as recorded: `d` with its evidence id and no review yet. Built whole, member by member (see Intents.record). */
function recordedDecision(d: DecisionDraft, evidenceId: string): DecisionRow {
  return {
    decision_id: d.decision_id,
    organization_id: d.organization_id,
    agent_id: d.agent_id,
    nonce: d.nonce,
    body_sha256: d.body_sha256,
    intent: d.intent,
    action: d.action,
    outcome: d.outcome,
    reason: d.reason,
    status: d.status,
    evidence_id: evidenceId,
    policy_versions: d.policy_versions,
    graph_version: d.graph_version,
    bundle_digest: d.bundle_digest,
    integration_id: d.integration_id,
    contract_version: d.contract_version,
    evaluated_at: d.evaluated_at,
    resolution: null,
    approvals: [],
  };
}

/** A validated Intent document. */
export interface Intent {
  agent_id: string;
  action: string;
  amount?: number;
  currency?: string;
  counterparty?: string;
  resource?: string;
  context?: Record<string, string | number | boolean>;
  requested_at: string;
  nonce: string;
}

/** How long a context read for one Intent is reused for the next ones of the same certificate and action. */
const CONTEXT_REUSE_MS = 1000;
const MAX_REUSED_CONTEXTS = 10_000;

const FIELDS = new Set(["agent_id", "action", "amount", "currency", "counterparty", "resource", "context", "requested_at", "nonce"]);
const ACTION = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;
const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
const CURRENCY = /^[A-Z]{3}$/;
const RESOURCE = /^[A-Za-z0-9_.-]{1,64}:\S{1,512}$/;
const UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$/;
const CONTEXT_KEY = /^[A-Za-z_][A-Za-z0-9_.-]{0,63}$/;
const AGENT_ID = /^\S{1,64}$/;
const COUNTERPARTY = /^[^\u0000-\u001f]{1,256}$/;

/** The formats parseIntent checks, for documents that describe the Intent (the OpenAPI schema) and must not drift from it. */
export const INTENT_FORMATS = {
  agent_id: AGENT_ID,
  action: ACTION,
  currency: CURRENCY,
  counterparty: COUNTERPARTY,
  resource: RESOURCE,
  requested_at: UTC,
  nonce: UUID,
  context_key: CONTEXT_KEY,
} as const;

/**
 * Reads the field a contract's path names out of an Intent document: `context.<key>` is a key of
 * the flat `context` map, whole (a context key may hold dots itself, as `erp.ref` does), and any
 * other path a top-level field. Own members only, never an inherited name such as `constructor`:
 * the same reading `undeclaredFields` applies, so a field the contract names is the field it binds.
 */
export function valueAt(intent: Record<string, unknown>, path: string): unknown {
  const [holder, key] = path.startsWith("context.") ? [intent.context, path.slice("context.".length)] : [intent, path];
  return holder && typeof holder === "object" && Object.hasOwn(holder, key) ? (holder as Record<string, unknown>)[key] : undefined;
}

/** The optional top-level fields an integration contract must name for an Intent to carry them. */
const CONTRACT_FIELDS = ["amount", "currency", "counterparty", "resource"] as const;

/**
 * The fields of `intent` an integration contract does not name, as field paths (`amount`,
 * `context.discount`), top-level fields first (docs/architecture.md, The Intent path, step 8).
 * The contract names the field its `resource_path` points at, every field a `context_bindings`
 * path points at (both are bound to the Capability), and by each binding's key the context key of
 * that name and, for `amount`, `currency` or `counterparty`, the top-level field. Names are the
 * contract's own keys and values only, never an inherited property such as `constructor`.
 */
function undeclaredFields(intent: Intent, resourcePath: string, bindings: Record<string, string>): string[] {
  const named = new Set<string>([resourcePath]);
  for (const [key, path] of Object.entries(bindings)) {
    named.add(path);
    named.add(`context.${key}`);
    if (key !== "resource") named.add(key);
  }
  const undeclared: string[] = CONTRACT_FIELDS.filter((f) => Object.hasOwn(intent, f) && !named.has(f));
  if (intent.context) for (const key of Object.keys(intent.context)) if (!named.has(`context.${key}`)) undeclared.push(`context.${key}`);
  return undeclared;
}

/**
 * The fields of `intent` that do not have the type its integration contract declares, or that
 * are missing (absent or null) though declared required, as field errors naming each field.
 * Like undeclared fields they are refused before evaluation, so nothing is recorded for them.
 */
function mistypedFields(intent: Intent, fieldTypes: Record<string, FieldDeclaration>): FieldError[] {
  const errors: FieldError[] = [];
  for (const [field, declaration] of Object.entries(fieldTypes)) {
    const value = valueAt(intent as unknown as Record<string, unknown>, field);
    if (value === undefined || value === null) {
      if (declaration.required) errors.push({ field, code: "required", message: `declared required (${describeDeclaration(declaration)}) by the active integration contract` });
    } else if (!valueFits(declaration, value)) {
      errors.push({ field, code: "invalid_type", message: `the active integration contract declares it ${describeDeclaration(declaration)}` });
    }
  }
  // By field, not in the stored declaration's key order (jsonb's own), so the answer reads predictably.
  return errors.sort((a, b) => (a.field < b.field ? -1 : a.field > b.field ? 1 : 0));
}

/**
 * The Intent path's step 8 (docs/architecture.md, The Intent path), for an Intent whose action an
 * active integration contract covers (`bindings` and `fieldTypes` null without one): 422
 * `undeclared_field` naming every field the contract does not name, then 422
 * `invalid_policy_input` naming every declared field missing or of another type. Dry runs apply
 * it too (domain/policy-trials.ts).
 */
export function requireContractFields(
  intent: Intent,
  resourcePath: string,
  bindings: Record<string, string> | null,
  fieldTypes: Record<string, FieldDeclaration> | null,
): void {
  if (bindings) {
    const undeclared = undeclaredFields(intent, resourcePath, bindings);
    if (undeclared.length) {
      throw new MandateError(
        "undeclared_field",
        "The Intent carries fields its integration contract does not name.",
        undeclared.map((field) => ({ field, code: "undeclared_field", message: "not named by the active integration contract" })),
      );
    }
  }
  if (fieldTypes) {
    const mistyped = mistypedFields(intent, fieldTypes);
    if (mistyped.length) {
      throw new MandateError("invalid_policy_input", "The Intent's fields do not have the types its integration contract declares.", mistyped);
    }
  }
}

/** Parses and validates the signed bytes as an Intent; 422 listing every problem. */
export function parseIntent(bytes: Uint8Array): Intent {
  const d = parseJsonObject(bytes);
  const errors: FieldError[] = [];
  const bad = (field: string, code: string, message: string) => errors.push({ field, code, message });
  for (const key of Object.keys(d)) if (!FIELDS.has(key)) bad(key, "unknown_field", "unknown field");
  const str = (key: string, re: RegExp, what: string, required: boolean) => {
    const v = d[key];
    if (v === undefined || v === null) {
      if (required) bad(key, "required", `${what} is required`);
    } else if (typeof v !== "string") bad(key, "invalid_type", `expected a string (${what})`);
    else if (!re.test(v)) bad(key, "invalid_format", `must be ${what}`);
  };
  str("agent_id", AGENT_ID, "the agent's id", true);
  str("action", ACTION, "an action name (letters, digits, _ . : -)", true);
  str("currency", CURRENCY, "an ISO 4217 code such as USD", false);
  str("counterparty", COUNTERPARTY, "1..256 printable characters", false);
  str("resource", RESOURCE, "<kind>:<identifier>", false);
  str("requested_at", UTC, "an ISO 8601 UTC timestamp", true);
  str("nonce", UUID, "a UUID", true);
  if (d.amount !== undefined && d.amount !== null) {
    if (typeof d.amount !== "number" || !Number.isFinite(d.amount)) bad("amount", "invalid_type", "expected a number");
    else if (d.amount < 0) bad("amount", "out_of_range", "must not be negative");
  }
  if (d.context !== undefined && d.context !== null) {
    if (typeof d.context !== "object" || Array.isArray(d.context)) bad("context", "invalid_type", "expected an object");
    else
      for (const [k, v] of Object.entries(d.context as Record<string, unknown>)) {
        if (!CONTEXT_KEY.test(k)) bad(`context.${k}`, "invalid_format", "context keys are identifiers");
        if (!["string", "number", "boolean"].includes(typeof v) || (typeof v === "number" && !Number.isFinite(v))) {
          bad(`context.${k}`, "invalid_type", "context values are strings, numbers or booleans");
        }
      }
  }
  if (typeof d.requested_at === "string" && UTC.test(d.requested_at) && Number.isNaN(Date.parse(d.requested_at))) {
    bad("requested_at", "invalid_format", "not a real time");
  }
  if (errors.length) throw validationFailed(errors);
  return d as unknown as Intent;
}

/**
 * The single endpoint's pipeline, in the order of docs/architecture.md, The Intent path.
 * Nothing is recorded before the signature verifies and the agent may sign; a 200 means the
 * decision and its evidence are committed together.
 */
export class Intents {
  /** Live signer state, policy head, prior decision for the nonce and contract, for concurrent Intents in one query. */
  private readonly contexts: BatchedReads<IntentLookup, IntentContext | null>;
  /** Contexts of active signers by certificate and action, with when they were read (see recentContext). */
  private readonly recent = new Map<string, { context: IntentContext; at: number }>();

  constructor(
    private readonly decisions: DecisionStore,
    private readonly ledger: Ledger,
    private readonly signatures: AgentSignatures,
    private readonly evaluation: PolicyEvaluation,
    private readonly limits: Limits,
  ) {
    this.contexts = new BatchedReads((lookups) => decisions.intentContexts(lookups));
  }

  /** Verifies, validates, evaluates and records one signed Intent; returns its decision (the original one on a replayed nonce). */
  async submit(keyId: string, signature: string, bytes: Uint8Array): Promise<DecisionRow> {
    if (bytes.length > this.limits.intentBodyBytes) {
      throw new MandateError("payload_too_large", `An Intent is at most ${this.limits.intentBodyBytes} bytes.`);
    }
    const signer = await this.signatures.verifyIdentity(keyId, signature, bytes);
    let intent: Intent;
    try {
      intent = parseIntent(bytes);
    } catch (err) {
      // The agent's state is reported before validation (docs/architecture.md, The Intent path, steps 4 and 5).
      const live = await this.contexts.get({ certificateId: signer.certificate_id, nonce: "", action: "" });
      if (!live) throw new MandateError("unknown_key", "The certificate is unknown.");
      requireLiveSigner(live, true);
      throw err;
    }
    const key = `${signer.certificate_id} ${intent.action}`;
    const reused = this.recentContext(key);
    if (reused) {
      try {
        return await this.decide(signer, intent, bytes, reused, null);
      } catch (err) {
        // A policy that could not be evaluated is not a question of the context's age: evaluating
        // it again would cost a second time limit (a slow tenant's attempt counted twice).
        if (!(err instanceof MandateError) || err.code === "evaluation_unavailable") throw err;
        // Whatever else a reused context led to refusing is decided again on a fresh read: that
        // context skipped the nonce lookup (a replay is answered before later checks) and may
        // be out of date (the commit found the policy, contract or agent changed).
        this.recent.delete(key);
      }
    }
    for (let attempt = 1; ; attempt++) {
      // One round trip (shared with concurrent Intents): live signer state, policy head, prior decision for the nonce, contract.
      const context = await this.contexts.get({ certificateId: signer.certificate_id, nonce: intent.nonce, action: intent.action });
      if (!context) throw new MandateError("unknown_key", "The certificate is unknown.");
      try {
        return await this.decide(signer, intent, bytes, context, key);
      } catch (err) {
        // A policy published (or a contract approved) between the read and the commit: evaluate again.
        if (err instanceof StaleContext && attempt < 3) continue;
        throw err;
      }
    }
  }

  /**
   * The context read for an earlier Intent of the same certificate and action, if it is under
   * CONTEXT_REUSE_MS old. Reusing it saves a round trip per Intent; it is safe because the
   * commit checks, in the same statement, everything it supplied: the signer is still active,
   * the policy head and integration contract are still the ones evaluated against, and the
   * nonce is unused (the unique key).
   */
  private recentContext(key: string): IntentContext | null {
    const recent = this.recent.get(key);
    return recent && performance.now() - recent.at < CONTEXT_REUSE_MS ? recent.context : null;
  }

  /**
   * The Intent path (docs/architecture.md) from the agent-state check on, given the context;
   * `remember` is the key under which a freshly read context of an active signer may be reused
   * (null when it is itself reused).
   */
  private async decide(signer: SignerIdentity, intent: Intent, bytes: Uint8Array, context: IntentContext, remember: string | null): Promise<DecisionRow> {
    requireLiveSigner(context, true);
    if (intent.agent_id !== signer.agent_id) {
      throw validationFailed([{ field: "agent_id", code: "mismatch", message: "must be the id of the agent whose certificate signed the Intent" }]);
    }
    const skew = Math.abs(Date.now() - Date.parse(intent.requested_at));
    if (skew > this.limits.requestedAtSkewSeconds * 1000) {
      throw new MandateError("request_expired", `requested_at must be within ${this.limits.requestedAtSkewSeconds} s of server time.`);
    }
    // docs/architecture.md, The Intent path, step 5: nothing is recorded, nor a replay answered, for a suspended organization.
    if (context.organization_state !== "active") throw organizationSuspended();
    const bodySha = hash("sha256", bytes, "buffer");
    if (context.prior) return this.replay(context.prior, bodySha);
    if (remember && context.cert_state === "active" && context.agent_state === "active") {
      if (this.recent.size >= MAX_REUSED_CONTEXTS) this.recent.clear();
      this.recent.set(remember, { context, at: performance.now() });
    }

    // The contract applies to a suspended agent's Intent too (docs/architecture.md, step 7): a
    // reviewer must never approve a field that no Capability will bind.
    requireContractFields(intent, context.resource_path ?? "", context.context_bindings, context.field_types);
    let evaluation: Evaluation | null = null;
    if (context.agent_state !== "suspended") {
      if (!context.bundle_digest) throw new MandateError("evaluation_unavailable", "The organization has no policy bundle.");
      const input: EvaluationInput = {
        intent,
        agent: { agent_id: signer.agent_id, state: context.agent_state },
        principal: { principal_id: signer.acting_for_principal_id, external_ref: signer.principal_external_ref, kind: signer.principal_kind },
        now: new Date().toISOString(),
      };
      const result = await this.evaluation.evaluateBundle(context.bundle_digest, input, context.policy_versions ?? {});
      // Spelled out, not `{ ...result, policyVersions, … }`: see record().
      evaluation = {
        outcome: result.outcome,
        reason: result.reason,
        trace: result.trace,
        policyVersions: context.policy_versions ?? {},
        graphVersion: context.graph_version ?? 0,
        bundleDigest: context.bundle_digest,
        input,
      };
    }
    return this.record(signer, intent, bodySha, evaluation, context.integration_id, context.contract_version);
  }

  /** The original decision for a repeated nonce with identical bytes; 409 `nonce_reused` for different bytes. */
  private replay(prior: DecisionRow, bodySha: Buffer): DecisionRow {
    if (!prior.body_sha256.equals(bodySha)) throw new MandateError("nonce_reused", "This nonce was already used with a different Intent.");
    return prior;
  }

  private async record(
    cert: SignerIdentity,
    intent: Intent,
    bodySha: Buffer,
    evaluation: Evaluation | null,
    integrationId: string | null,
    contractVersion: number | null,
  ): Promise<DecisionRow> {
    const evaluatedAt = new Date();
    // Built whole, member by member: in this V8 an object spread followed by members its source
    // lacks gets a hidden class (map) of its own per object, and maps live in the old generation
    // (docs/performance.md, Garbage collection).
    const decision = this.draft(newId("dec"), cert, intent, bodySha, evaluatedAt, evaluation, integrationId, contractVersion);
    const payload = this.payload(cert, decision, bodySha, evaluation);
    // A suspended agent's action is preserved and sent to review with no rule evaluated; if the
    // agent is found suspended only at commit, that is what is recorded instead (built only then).
    let suspended: DecisionDraft | null = null;
    const ifSuspended = () => {
      suspended = this.draft(decision.decision_id, cert, intent, bodySha, evaluatedAt, null, integrationId, contractVersion);
      return { decision: suspended, payload: this.payload(cert, suspended, bodySha, null) };
    };
    const result: DecisionRecording = await this.ledger.recordDecision({
      decision,
      payload,
      certificateId: cert.certificate_id,
      ifSuspended: evaluation ? ifSuspended : null,
    });
    if ("recorded" in result) return recordedDecision(result.recorded === "decision" ? decision : suspended!, result.evidenceId);
    if (result.refused === "signer_inactive") {
      requireLiveSigner({ cert_state: result.certState, agent_state: result.agentState }, true);
      throw new Error(`the ledger refused a signer in states ${result.certState}/${result.agentState}`);
    }
    if (result.refused === "stale_context") throw new StaleContext();
    // Suspended after the context was read: the ledger checked it where the decision would have committed.
    if (result.refused === "organization_suspended") throw organizationSuspended();
    // The same nonce raced in concurrently: answer exactly as for a replay.
    const prior = await this.decisions.byNonce(cert.agent_id, intent.nonce);
    if (!prior) throw new Error("the ledger refused a nonce no decision holds");
    return this.replay(prior, bodySha);
  }

  /** The decision of `evaluation`, or with none, a suspended agent's: HUMAN_REVIEW `agent_suspended`. */
  private draft(
    decisionId: string,
    cert: SignerIdentity,
    intent: Intent,
    bodySha: Buffer,
    evaluatedAt: Date,
    evaluation: Evaluation | null,
    integrationId: string | null,
    contractVersion: number | null,
  ): DecisionDraft {
    const outcome = evaluation?.outcome ?? "HUMAN_REVIEW";
    return {
      decision_id: decisionId,
      organization_id: cert.organization_id,
      agent_id: cert.agent_id,
      nonce: intent.nonce,
      body_sha256: bodySha,
      intent: intent as unknown as Record<string, unknown>,
      action: intent.action,
      outcome,
      reason: evaluation?.reason ?? "agent_suspended",
      status: outcome === "HUMAN_REVIEW" ? "PENDING" : null,
      policy_versions: evaluation?.policyVersions ?? {},
      graph_version: evaluation?.graphVersion ?? 0,
      bundle_digest: evaluation?.bundleDigest ?? "",
      integration_id: integrationId,
      contract_version: contractVersion,
      evaluated_at: evaluatedAt,
    };
  }

  /**
   * The `decision` evidence payload of a draft. Beside the Intent it holds the rest of the
   * evaluation's input (`now`, the agent and principal attributes; null when nothing was
   * evaluated), so the decision can be evaluated again exactly: replayed against other versions,
   * or reproduced offline from its bundle (docs/architecture.md, Policies).
   */
  private payload(cert: SignerIdentity, d: DecisionDraft, bodySha: Buffer, evaluation: Evaluation | null): Record<string, unknown> {
    const input = evaluation?.input;
    return {
      decision_id: d.decision_id,
      agent_id: cert.agent_id,
      principal_id: cert.acting_for_principal_id,
      certificate_id: cert.certificate_id,
      intent: d.intent,
      intent_sha256: bodySha.toString("hex"),
      outcome: d.outcome,
      reason: d.reason,
      status: d.status,
      policy_versions: d.policy_versions,
      graph_version: d.graph_version,
      bundle_digest: d.bundle_digest,
      trace: (evaluation?.trace ?? []) as unknown[],
      evaluated_at: d.evaluated_at.toISOString(),
      now: input?.now ?? null,
      agent: input ? { agent_id: input.agent.agent_id, state: input.agent.state } : null,
      principal: input ? { principal_id: input.principal.principal_id, external_ref: input.principal.external_ref, kind: input.principal.kind } : null,
    };
  }
}
