/** A problem found in a policy source, located as precisely as the source allows. */
export interface SourceProblem {
  /** JSON-ish path inside a rules document (`rules[2].when.amount.lte`). */
  field?: string;
  line?: number;
  column?: number;
  message: string;
}

/** A problem the opa compiler reported, located in the bundle's files. */
export interface CompileProblem {
  /** Path inside the bundle, e.g. `policies/payments.rego` or `library/main.rego`. */
  file?: string;
  /** The runtime policy the file belongs to, when it is one. */
  policy_key?: string;
  line?: number;
  column?: number;
  /** opa's error code, e.g. `rego_parse_error`, `rego_type_error`. */
  code?: string;
  message: string;
}

/** Thrown when a rules document or hand-written module is rejected before opa sees it, so authors get every problem at once. */
export class PolicySourceError extends Error {
  override readonly name = "PolicySourceError";
  constructor(readonly errors: SourceProblem[]) {
    super(summarise("invalid policy source", errors));
  }
}

/** Thrown when opa refuses to compile the library plus the given modules, carrying opa's located errors. */
export class PolicyCompileError extends Error {
  override readonly name = "PolicyCompileError";
  constructor(readonly errors: CompileProblem[]) {
    super(summarise("policy compilation failed", errors));
  }
}

/** Thrown when a bundle cannot produce a well-formed decision: the caller must answer evaluation_unavailable, never ALLOW. */
export class EvaluationError extends Error {
  override readonly name: string = "EvaluationError";
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/**
 * Thrown when a policy's Rego fails while it is evaluated (opa-wasm aborts with a located message
 * such as `policies/payments.rego:7:1: var assignment conflict`): the decision could not be
 * evaluated. `policy_key` names the runtime policy whose module the location is in, when it is
 * one (the bundle holds each policy as `policies/<policy_key>.rego`, src/policy/build.ts).
 */
export class PolicyRuntimeError extends EvaluationError {
  override readonly name = "PolicyRuntimeError";
  constructor(
    readonly problem: CompileProblem,
    options?: { cause?: unknown },
  ) {
    super(`policy runtime error at ${problem.file ?? "?"}:${problem.line ?? "?"}:${problem.column ?? "?"}: ${problem.message}`, options);
  }

  /** The runtime policy that failed, when the location is in one's module. */
  get policyKey(): string | undefined {
    return this.problem.policy_key;
  }
}

/**
 * What an evaluation that threw becomes: a PolicyRuntimeError when opa-wasm's message is located
 * (`<file>:<line>:<col>: <message>`, how its opa_abort reports a Rego runtime error), else an
 * EvaluationError carrying the message.
 */
export function evaluationFailure(cause: unknown): EvaluationError {
  const text = cause instanceof Error ? cause.message : String(cause);
  const located = /^(\S+\.rego):(\d+):(\d+): (.+)$/s.exec(text);
  if (!located) return new EvaluationError(`evaluation failed: ${text}`, { cause });
  const file = located[1]!.replace(/^\.?\//, "");
  const key = /^policies\/([a-z][a-z0-9_-]*)\.rego$/.exec(file)?.[1];
  return new PolicyRuntimeError({ file, ...(key ? { policy_key: key } : {}), line: Number(located[2]), column: Number(located[3]), message: located[4]! }, { cause });
}

function summarise(what: string, errors: { line?: number; message: string }[]): string {
  const first = errors[0];
  if (!first) return what;
  const where = first.line === undefined ? "" : ` (line ${first.line})`;
  const more = errors.length > 1 ? ` and ${errors.length - 1} more` : "";
  return `${what}: ${first.message}${where}${more}`;
}

/**
 * Thrown when an evaluation could not finish within the per-evaluation time limit: it ran past it
 * (`timeout`; the bundle is quarantined from then on, see src/policy/engine.ts), or it was not
 * started because its bundle's isolated queue was full (`queue_full`) or the quarantined bundle
 * timed out under a second ago (`cooling_down`). The caller answers evaluation_unavailable
 * naming the bundle's policies.
 */
export class EvaluationTimeoutError extends EvaluationError {
  override readonly name = "EvaluationTimeoutError";
  constructor(
    readonly digest: string,
    readonly limitMs: number,
    readonly kind: "timeout" | "queue_full" | "cooling_down",
    message: string,
  ) {
    super(message);
  }
}
