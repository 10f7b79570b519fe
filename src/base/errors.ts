/**
 * The closed set of error codes a caller can see (docs/architecture.md, Error model). Every failure the
 * service reports is one of these; anything else is a bug and becomes `internal`.
 */
export type ErrorCode =
  | "signature_invalid"
  | "unknown_key"
  | "missing_credentials"
  | "permission_denied"
  | "agent_not_active"
  | "agent_revoked"
  | "agent_retired"
  | "organization_suspended"
  | "capability_dependency_inactive"
  | "not_found"
  | "method_not_allowed"
  | "nonce_reused"
  | "already_exists"
  | "capability_already_issued"
  | "capability_constraint_mismatch"
  | "capability_audience_mismatch"
  | "capability_action_mismatch"
  | "capability_resource_mismatch"
  | "capability_consumed"
  | "decision_not_allowed"
  | "review_not_approved"
  | "review_already_resolved"
  | "invalid_transition"
  | "capability_expired"
  | "payload_too_large"
  | "validation_failed"
  | "request_expired"
  | "undeclared_field"
  | "duplicate_key"
  | "imprecise_number"
  | "capability_token_invalid"
  | "policy_compile_failed"
  | "policy_runtime_error"
  | "invalid_policy_input"
  | "rate_limited"
  | "evaluation_unavailable"
  | "unavailable"
  | "internal";

/** One problem with one field of a request. */
export interface FieldError {
  field: string;
  code: string;
  message: string;
  /** Position in a source text (policy modules, governance documents), when known. */
  line?: number;
  column?: number;
}

/** A failure with a stable code; converted to a /v1 body or a gRPC status at one boundary. */
export class MandateError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly fieldErrors: readonly FieldError[] = [],
    /** For `rate_limited`: whole seconds until the limit lets the caller in again (the answer's Retry-After). */
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
    this.name = "MandateError";
  }
}

/** 429 `rate_limited`, saying when to try again: `retryAfterSeconds` is rounded up, and at least 1. */
export function rateLimited(message: string, retryAfterSeconds: number): MandateError {
  const seconds = Number.isFinite(retryAfterSeconds) ? Math.max(1, Math.ceil(retryAfterSeconds)) : 1;
  return new MandateError("rate_limited", message, [], seconds);
}

/** 422 `validation_failed` carrying field errors. */
export function validationFailed(errors: readonly FieldError[], message = "The request is invalid."): MandateError {
  return new MandateError("validation_failed", message, errors);
}

/** 403 for every credential of an organization the platform operator has suspended (its keys, its agents' certificates). */
export function organizationSuspended(): MandateError {
  return new MandateError("organization_suspended", "The organization is suspended.");
}

/** 404 that never says whether the thing exists in another organization. */
export function notFound(what: string): MandateError {
  return new MandateError("not_found", `${what} not found.`);
}
