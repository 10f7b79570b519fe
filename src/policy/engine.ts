import { createHash } from "node:crypto";
import { loadPolicy, type LoadedPolicy } from "@open-policy-agent/opa-wasm";
import { EvaluationError } from "./errors.js";
import { ENTRYPOINT } from "./opa.js";
import { OUTCOMES, REASON_PATTERN, type Outcome } from "./rules.js";
import { readTarGz } from "./tar.js";

/** The Intent as policies see it (the signed document's fields). */
export interface IntentInput {
  agent_id: string;
  action: string;
  amount?: number;
  currency?: string;
  counterparty?: string;
  resource?: string;
  context?: Record<string, unknown>;
  requested_at: string;
  nonce: string;
}

/** The input document of mandate/main/decision. `now` (ISO 8601 UTC) is supplied by the service so expiry never reads a clock inside the policy. */
export interface DecisionInput {
  intent: IntentInput;
  agent: { agent_id: string; state: string };
  principal: { principal_id: string; external_ref: string | null; kind: string };
  now: string;
}

/** One step of a decision's trace: a rule that fired, or (rule, outcome and reason null) a covering policy that abstained. */
export interface TraceEntry {
  policy: string;
  rule: string | null;
  outcome: Outcome | null;
  reason: string | null;
  /** What the rule compared, e.g. an authority check's limit, chain and band; null for plain rules. */
  detail: unknown;
}

/** A completed evaluation: one of three outcomes, a stable reason code, and how it was reached. */
export interface Decision {
  outcome: Outcome;
  reason: string;
  trace: TraceEntry[];
}

/** Tuning for PolicyEngine. */
export interface PolicyEngineOptions {
  /** Bundles kept instantiated at once; the least recently used is dropped first. */
  capacity?: number;
}

/**
 * Evaluates intents in-process against compiled bundles, keyed by digest. Loading is async
 * (compiling WebAssembly); evaluation is synchronous, deterministic and fails closed: any
 * problem is an EvaluationError, never a decision.
 */
export class PolicyEngine {
  private readonly capacity: number;
  // Insertion order doubles as recency order: a hit is moved to the end.
  private readonly bundles = new Map<string, { policy: LoadedPolicy; entrypoint: number }>();
  private readonly loading = new Map<string, Promise<void>>();

  constructor(options: PolicyEngineOptions = {}) {
    this.capacity = Math.max(1, options.capacity ?? 64);
  }

  /** Whether a bundle is ready to evaluate without loading. */
  has(digest: string): boolean {
    return this.bundles.has(digest);
  }

  /**
   * Makes a bundle ready to evaluate. Idempotent and shared between concurrent callers; a
   * bundle whose sha256 is not `digest`, or that lacks the entrypoint, is refused with an
   * EvaluationError so a cache entry can never hold the wrong policy.
   */
  load(digest: string, bundle: Uint8Array): Promise<void> {
    if (this.bundles.has(digest)) {
      this.touch(digest);
      return Promise.resolve();
    }
    let pending = this.loading.get(digest);
    if (!pending) {
      pending = this.instantiate(digest, bundle).finally(() => this.loading.delete(digest));
      this.loading.set(digest, pending);
    }
    return pending;
  }

  /** Evaluates an intent against a loaded bundle; throws EvaluationError when the bundle is not loaded (load it again: a bundle that trapped is dropped) or does not yield a well-formed decision. */
  evaluate(digest: string, input: DecisionInput): Decision {
    const loaded = this.bundles.get(digest);
    if (!loaded) throw new EvaluationError(`bundle ${digest} is not loaded`);
    this.touch(digest);
    let resultSet: unknown;
    try {
      resultSet = loaded.policy.evaluate(input, loaded.entrypoint);
    } catch (cause) {
      // A trap may leave the instance's memory in any state: drop it, so the next load
      // instantiates the bundle afresh.
      this.bundles.delete(digest);
      throw new EvaluationError(`evaluation failed: ${describe(cause)}`, { cause });
    }
    return readDecision(resultSet);
  }

  private async instantiate(digest: string, bundle: Uint8Array): Promise<void> {
    const actual = createHash("sha256").update(bundle).digest("hex");
    if (actual !== digest) throw new EvaluationError(`bundle digest mismatch: expected ${digest}, got ${actual}`);
    let loaded: { policy: LoadedPolicy; entrypoint: number };
    try {
      const files = readTarGz(bundle);
      const wasm = files.get("policy.wasm");
      if (!wasm) throw new Error("the bundle has no policy.wasm");
      const dataFile = files.get("data.json") ?? Buffer.from("{}");
      // Copied into its own ArrayBuffer: opa-wasm reads an ArrayBuffer whole, while a
      // Buffer may be a view into a larger shared pool.
      const data = new Uint8Array(dataFile).buffer;
      const module = await WebAssembly.compile(new Uint8Array(wasm));
      const policy = await loadPolicy(module);
      const entrypoint: unknown = policy.entrypoints[ENTRYPOINT];
      if (typeof entrypoint !== "number") throw new Error(`the bundle has no ${ENTRYPOINT} entrypoint`);
      policy.setData(data);
      loaded = { policy, entrypoint };
    } catch (cause) {
      throw new EvaluationError(`cannot load bundle ${digest}: ${describe(cause)}`, { cause });
    }
    this.bundles.set(digest, loaded);
    while (this.bundles.size > this.capacity) {
      this.bundles.delete(this.bundles.keys().next().value as string);
    }
  }

  private touch(digest: string): void {
    const loaded = this.bundles.get(digest);
    if (loaded && this.bundles.size > 1) {
      this.bundles.delete(digest);
      this.bundles.set(digest, loaded);
    }
  }
}

// Checks the result set against the decision contract; anything else is an error, so a
// broken or tampered bundle can never yield an ALLOW.
function readDecision(resultSet: unknown): Decision {
  if (!Array.isArray(resultSet) || resultSet.length === 0) {
    throw new EvaluationError("the bundle produced no decision");
  }
  const result: unknown = resultSet[0]?.result;
  if (!isRecord(result)) throw new EvaluationError("the decision is not an object");
  if (isRecord(result.error)) {
    throw new EvaluationError(`policy error ${String(result.error.code)}: ${JSON.stringify(result.error.policies ?? [])}`);
  }
  const { outcome, reason, trace } = result;
  if (!isOutcome(outcome)) throw new EvaluationError(`the decision has no valid outcome: ${JSON.stringify(outcome)}`);
  if (!isReason(reason)) throw new EvaluationError(`the decision's reason is not a snake_case code: ${JSON.stringify(reason)}`);
  if (!Array.isArray(trace) || !trace.every(isTraceEntry)) throw new EvaluationError("the decision's trace is malformed");
  return { outcome, reason, trace };
}

function isTraceEntry(entry: unknown): entry is TraceEntry {
  return (
    isRecord(entry) &&
    typeof entry.policy === "string" &&
    (entry.rule === null || typeof entry.rule === "string") &&
    (entry.outcome === null || isOutcome(entry.outcome)) &&
    (entry.reason === null || isReason(entry.reason))
  );
}

function isOutcome(value: unknown): value is Outcome {
  return OUTCOMES.includes(value as Outcome);
}

function isReason(value: unknown): value is string {
  return typeof value === "string" && REASON_PATTERN.test(value);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

// opa-wasm throws strings as well as Errors.
function describe(cause: unknown): string {
  return cause instanceof Error ? cause.message : String(cause);
}
