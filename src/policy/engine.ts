import { createHash } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { loadPolicy, type LoadedPolicy } from "@open-policy-agent/opa-wasm";
import { EvaluationError, EvaluationTimeoutError, PolicyRuntimeError, evaluationFailure } from "./errors.js";
import { EvaluationLane, type IsolatedBundle } from "./isolation.js";
import { ENTRYPOINT, EXPLAIN_ENTRYPOINT, HANDWRITTEN_METADATA, LEGACY_ENTRYPOINT } from "./opa.js";
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

/** Why a bundle was quarantined: an evaluation past the limit, or slow evaluations adding up to it. */
export interface QuarantineEvent {
  digest: string;
  reason: "timeout" | "slow";
  /** The evaluation that tipped it (ms); for a timeout, at least the limit. */
  ms: number;
  limitMs: number;
  /** Where that evaluation ran. */
  where: "in_process" | "worker";
}

/** Tuning for PolicyEngine. */
export interface PolicyEngineOptions {
  /** Bundles kept instantiated at once; the least recently used is dropped first. */
  capacity?: number;
  /** The per-evaluation time limit (MANDATE_EVALUATION_TIMEOUT_MS); default 50 ms. */
  timeoutMs?: number;
  /** Told once per bundle quarantined (the service logs it). */
  onQuarantine?: (event: QuarantineEvent) => void;
}

/** Default per-evaluation time limit. */
export const DEFAULT_EVALUATION_TIMEOUT_MS = 50;

/** What the engine counts, for /metrics. */
export interface EngineStats {
  quarantined: number;
  timeouts: number;
  isolatedEvaluations: number;
  workersTerminated: number;
  /** Evaluations that failed with a located Rego error, by the policy key it was located in ("" outside any policy). */
  policyFailures: ReadonlyMap<string, number>;
}

interface Loaded extends IsolatedBundle {
  policy: LoadedPolicy;
  /** The explain entrypoint's number; null in bundles built before it existed. */
  explainEntrypoint: number | null;
  /** It holds hand-written Rego: evaluated in a worker always (opa.ts, HANDWRITTEN_METADATA). */
  handwritten: boolean;
  /** An evaluation of it finished in the worker, fast: from then on it is evaluated in-process. */
  proven: boolean;
  /** The evaluation on probation in flight: concurrent ones wait for it instead of queueing. */
  probe: Promise<unknown> | null;
}

// Quarantined digests remembered at most (the oldest forgotten first): far more than the bundles in use.
const MAX_QUARANTINED = 10_000;
// Slow evaluations (over a fifth of the limit) are added up over this window.
const SLOW_WINDOW_MS = 60_000;
// After a quarantined bundle's evaluation is stopped at the limit, its next ones arriving within
// this long are refused when it has passed (503 carries Retry-After: 1): a tenant resubmitting to
// a policy that never finishes neither keeps a core busy and the worker restarting nor, answered
// at once, turns its one-at-a-time retries into a flood that other tenants' requests queue behind.
const COOL_DOWN_MS = 1_000;

/**
 * Evaluates intents against compiled bundles, keyed by digest. Loading is async (compiling
 * WebAssembly); evaluation is deterministic and fails closed: any problem is an
 * EvaluationError, never a decision.
 *
 * Time limit and isolation (`decide`, docs/architecture.md, Policies): a bundle compiled only
 * from rules documents is evaluated in-process (synchronously, on the event loop: the hot path)
 * once it is known fast; its cost per input is bounded by construction. Until then (its first
 * evaluation after loading), always when it holds hand-written Rego (whose cost may depend on
 * the input without bound), and once quarantined, it is evaluated in a worker thread under a hard
 * deadline, the limit: past it the worker is terminated and replaced and the evaluation fails
 * with EvaluationTimeoutError. Each kind waits in its own lane, so a slow tenant delays a lane
 * it shares with others at most once per bundle, by at most the limit. Every evaluation is
 * timed; one past the limit, or slow ones (over a fifth of the limit) adding up to the limit
 * within a minute, quarantine the bundle's digest. Quarantine lasts as long as the process (a new
 * publication is a new digest); evaluations of a quarantined bundle arriving in the second after
 * one was stopped at the limit are held to the end of that second and refused.
 */
export class PolicyEngine {
  private readonly capacity: number;
  readonly timeoutMs: number;
  private readonly slowMs: number;
  private readonly onQuarantine: (event: QuarantineEvent) => void;
  // Insertion order doubles as recency order: a hit is moved to the end.
  private readonly bundles = new Map<string, Loaded>();
  private readonly loading = new Map<string, Promise<void>>();
  // Insertion order is age: the oldest is forgotten first past MAX_QUARANTINED.
  private readonly quarantine = new Set<string>();
  private readonly slow = new Map<string, { since: number; ms: number }>();
  private readonly coolingDown = new Map<string, number>();
  // Bundles on probation, hand-written bundles and quarantined bundles wait in separate lanes, so
  // a slow tenant's evaluations never delay another organization's for long.
  private readonly probation: EvaluationLane;
  private readonly handwritten: EvaluationLane;
  private readonly quarantined: EvaluationLane;
  private timeouts = 0;
  private isolated = 0;
  private readonly policyFailures = new Map<string, number>();

  constructor(options: PolicyEngineOptions = {}) {
    this.capacity = Math.max(1, options.capacity ?? 64);
    this.timeoutMs = Math.max(1, options.timeoutMs ?? DEFAULT_EVALUATION_TIMEOUT_MS);
    this.slowMs = this.timeoutMs / 5;
    this.onQuarantine = options.onQuarantine ?? (() => undefined);
    // Probes are fast and one per new bundle: a deep queue, for the burst after a restart.
    this.probation = new EvaluationLane("probation", this.timeoutMs, 1024);
    this.handwritten = new EvaluationLane("hand-written", this.timeoutMs, 1024);
    this.quarantined = new EvaluationLane("quarantine", this.timeoutMs, 64);
  }

  /** Whether evaluations of this bundle run in a worker thread from now on. */
  isQuarantined(digest: string): boolean {
    return this.quarantine.has(digest);
  }

  /** Counters for /metrics. */
  stats(): EngineStats {
    return {
      quarantined: this.quarantine.size,
      timeouts: this.timeouts,
      isolatedEvaluations: this.isolated,
      workersTerminated: this.probation.terminated + this.handwritten.terminated + this.quarantined.terminated,
      policyFailures: this.policyFailures,
    };
  }

  /** Stops the worker threads. */
  async close(): Promise<void> {
    await Promise.all([this.probation.close(), this.handwritten.close(), this.quarantined.close()]);
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

  /**
   * Evaluates an intent against a loaded bundle under the time limit: in-process when the bundle
   * is compiled from rules documents and known fast, else in a worker thread (see the class comment). Throws EvaluationTimeoutError
   * past the limit, EvaluationError as `evaluate` does.
   */
  decide(digest: string, input: DecisionInput): Decision | Promise<Decision> {
    const loaded = this.bundles.get(digest);
    if (loaded?.proven && !loaded.handwritten && !this.quarantine.has(digest)) return this.evaluate(digest, input);
    if (!loaded) throw new EvaluationError(`bundle ${digest} is not loaded`);
    this.touch(digest);
    return this.isolate(loaded, input);
  }

  /**
   * Evaluates an intent in-process against a loaded bundle, timed: one past the limit quarantines
   * the bundle and throws EvaluationTimeoutError (its result is not used). Throws EvaluationError
   * when the bundle is not loaded (load it again: a bundle that trapped is dropped) or does not
   * yield a well-formed decision. It runs where it is called, quarantined or not: the service
   * calls `decide`; this is the in-process path it takes (and what the bench measures).
   */
  evaluate(digest: string, input: DecisionInput): Decision {
    const loaded = this.bundles.get(digest);
    if (!loaded) throw new EvaluationError(`bundle ${digest} is not loaded`);
    this.touch(digest);
    let resultSet: unknown;
    const started = performance.now();
    try {
      resultSet = loaded.policy.evaluate(input, loaded.entrypoint);
    } catch (cause) {
      const failure = evaluationFailure(cause);
      // A trap may leave the instance's memory in any state: drop it, so the next load
      // instantiates the bundle afresh. A located Rego error (opa_abort) is not a trap: the next
      // evaluation starts again from the instance's fixed heap pointer, so the instance stays
      // and the bundle's other actions keep their fast path.
      if (failure instanceof PolicyRuntimeError) this.countFailure(failure);
      else this.bundles.delete(digest);
      throw failure;
    }
    const ms = performance.now() - started;
    if (ms > this.slowMs) this.tooSlow(digest, ms, "in_process");
    return readDecision(resultSet);
  }

  /**
   * The per-rule explanation of the policies covering the input's action (the bundle's
   * mandate/bundle/explain entrypoint; policies/bundle.rego): `{policy_key: [...]}` for each
   * covering policy that defines `explain`. For the dry run only, so always in a worker thread,
   * under the time limit, in the lane the bundle's evaluations use: a policy's `explain` may be
   * hand-written Rego of any cost, and a dry run is no hot path. Throws EvaluationError when the
   * bundle is not loaded or predates the entrypoint, PolicyRuntimeError or
   * EvaluationTimeoutError as `decide` does.
   */
  async explain(digest: string, input: DecisionInput): Promise<Record<string, unknown>> {
    const loaded = this.bundles.get(digest);
    if (!loaded) throw new EvaluationError(`bundle ${digest} is not loaded`);
    if (loaded.explainEntrypoint === null) throw new EvaluationError(`bundle ${digest} was built without the ${EXPLAIN_ENTRYPOINT} entrypoint`);
    this.touch(digest);
    const lane = this.quarantine.has(digest) ? this.quarantined : this.probation;
    this.isolated++;
    let result;
    try {
      result = await lane.run({ ...loaded, entrypoint: loaded.explainEntrypoint }, input);
    } catch (err) {
      if (err instanceof PolicyRuntimeError) this.countFailure(err);
      throw err;
    }
    const set = result.resultSet;
    const value: unknown = Array.isArray(set) ? (set[0] as { result?: unknown } | undefined)?.result : undefined;
    return isRecord(value) ? value : {};
  }

  private async isolate(loaded: Loaded, input: DecisionInput): Promise<Decision> {
    const { digest } = loaded;
    const quarantined = this.quarantine.has(digest);
    if (quarantined) {
      const until = this.coolingDown.get(digest);
      if (until !== undefined && performance.now() < until) {
        await sleep(until - performance.now());
        throw new EvaluationTimeoutError(digest, this.timeoutMs, "cooling_down", `its last evaluation was stopped at the ${this.timeoutMs} ms limit under ${COOL_DOWN_MS} ms ago`);
      }
    } else if (loaded.probe && !loaded.handwritten) {
      // Wait for the probe's verdict, then go where it sends this bundle.
      await loaded.probe.catch(() => undefined);
      return this.decide(digest, input);
    }
    this.isolated++;
    const lane = quarantined ? this.quarantined : loaded.handwritten ? this.handwritten : this.probation;
    const running = lane.run(loaded, input);
    if (lane === this.probation) loaded.probe = running;
    let result;
    try {
      result = await running;
    } catch (err) {
      if (err instanceof PolicyRuntimeError) this.countFailure(err);
      if (err instanceof EvaluationTimeoutError && err.kind === "timeout") {
        this.timeouts++;
        this.coolingDown.set(digest, performance.now() + COOL_DOWN_MS);
        this.quarantineBundle({ digest, reason: "timeout", ms: this.timeoutMs, limitMs: this.timeoutMs, where: "worker" });
      }
      throw err;
    } finally {
      if (loaded.probe === running) loaded.probe = null;
    }
    if (result.ms > this.slowMs) this.tooSlow(digest, result.ms, "worker");
    else if (!this.quarantine.has(digest)) loaded.proven = true;
    return readDecision(result.resultSet);
  }

  // An evaluation over a fifth of the limit: past the limit, quarantine and fail; else add it up.
  private tooSlow(digest: string, ms: number, where: QuarantineEvent["where"]): void {
    if (ms > this.timeoutMs) {
      this.timeouts++;
      this.quarantineBundle({ digest, reason: "timeout", ms, limitMs: this.timeoutMs, where });
      throw new EvaluationTimeoutError(digest, this.timeoutMs, "timeout", `the evaluation took ${Math.round(ms)} ms`);
    }
    const now = performance.now();
    let slow = this.slow.get(digest);
    if (!slow || now - slow.since > SLOW_WINDOW_MS) {
      if (this.slow.size >= MAX_QUARANTINED) this.slow.clear();
      slow = { since: now, ms: 0 };
      this.slow.set(digest, slow);
    }
    slow.ms += ms;
    if (slow.ms >= this.timeoutMs) this.quarantineBundle({ digest, reason: "slow", ms, limitMs: this.timeoutMs, where });
  }

  private quarantineBundle(event: QuarantineEvent): void {
    this.slow.delete(event.digest);
    if (this.quarantine.has(event.digest)) return;
    if (this.quarantine.size >= MAX_QUARANTINED) this.quarantine.delete(this.quarantine.values().next().value as string);
    this.quarantine.add(event.digest);
    if (this.coolingDown.size >= MAX_QUARANTINED) this.coolingDown.clear();
    const loaded = this.bundles.get(event.digest);
    if (loaded) loaded.proven = false;
    this.onQuarantine(event);
  }

  private async instantiate(digest: string, bundle: Uint8Array): Promise<void> {
    const actual = createHash("sha256").update(bundle).digest("hex");
    if (actual !== digest) throw new EvaluationError(`bundle digest mismatch: expected ${digest}, got ${actual}`);
    let loaded: Loaded;
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
      const entrypoint: unknown = policy.entrypoints[ENTRYPOINT] ?? policy.entrypoints[LEGACY_ENTRYPOINT];
      if (typeof entrypoint !== "number") throw new Error(`the bundle has no ${ENTRYPOINT} entrypoint`);
      const explainEntrypoint: unknown = policy.entrypoints[EXPLAIN_ENTRYPOINT];
      policy.setData(data);
      loaded = { digest, policy, entrypoint, explainEntrypoint: typeof explainEntrypoint === "number" ? explainEntrypoint : null, module, data, handwritten: listsHandwritten(files.get(".manifest")), proven: false, probe: null };
    } catch (cause) {
      throw new EvaluationError(`cannot load bundle ${digest}: ${describe(cause)}`, { cause });
    }
    this.bundles.set(digest, loaded);
    while (this.bundles.size > this.capacity) {
      this.bundles.delete(this.bundles.keys().next().value as string);
    }
  }

  private countFailure(failure: PolicyRuntimeError): void {
    const key = failure.policyKey ?? "";
    this.policyFailures.set(key, (this.policyFailures.get(key) ?? 0) + 1);
  }

  private touch(digest: string): void {
    const loaded = this.bundles.get(digest);
    if (loaded && this.bundles.size > 1) {
      this.bundles.delete(digest);
      this.bundles.set(digest, loaded);
    }
  }
}

// Whether the bundle's manifest names hand-written policies; a bundle without one has none.
function listsHandwritten(manifest: Buffer | undefined): boolean {
  if (!manifest) return false;
  const metadata: unknown = (JSON.parse(manifest.toString("utf8")) as { metadata?: unknown }).metadata;
  const listed = isRecord(metadata) ? metadata[HANDWRITTEN_METADATA] : undefined;
  return Array.isArray(listed) && listed.length > 0;
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
