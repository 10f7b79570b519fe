/*
 * Typed failures of the client. Every HTTP failure carries the service's error
 * body (docs/architecture.md, Error model: `detail`, `message`, `request_id`, `errors`) and its status;
 * network failures and timeouts are a TransportError. A decision (ALLOW, DENY,
 * HUMAN_REVIEW) is never an error.
 */

/** One problem with one request field, as a 422 lists it. */
export interface FieldError {
  field: string;
  code: string;
  message: string;
  line?: number;
  column?: number;
}

/** What an error answer carried, plus where it came from. */
export interface ErrorInit {
  status: number;
  detail: string;
  message: string;
  request_id?: string;
  errors?: FieldError[];
  cause?: unknown;
}

/** Base class of every failure the client raises: catch this to catch them all. */
export class MandateError extends Error {
  /** HTTP status, or 0 when no answer arrived (TransportError, ResolutionTimeoutError). */
  readonly status: number;
  /** Stable snake_case code, e.g. `signature_invalid`, `capability_consumed`. */
  readonly detail: string;
  /** The service's request id, for its logs; undefined when no answer arrived. */
  readonly request_id: string | undefined;
  /** Field errors (422). */
  readonly errors: FieldError[];

  constructor(init: ErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = new.target.name;
    this.status = init.status;
    this.detail = init.detail;
    this.request_id = init.request_id;
    this.errors = init.errors ?? [];
  }
}

/** The service answered with an error status; the base of the per-status classes below. */
export class ApiError extends MandateError {}
/** 401: missing or unknown credentials, or a signature that does not verify. Never retried. */
export class AuthenticationError extends ApiError {}
/** 403: the credential lacks a permission, the agent is not active, or the organization is suspended (`organization_suspended`). */
export class PermissionDeniedError extends ApiError {}
/** 404: no such resource in the caller's organization. */
export class NotFoundError extends ApiError {}
/** 409: a state conflict (nonce reused, capability consumed or mismatched, invalid transition…). */
export class ConflictError extends ApiError {}
/** 410: the capability expired unconsumed. */
export class GoneError extends ApiError {}
/** 413: the body is larger than the service accepts. */
export class PayloadTooLargeError extends ApiError {}
/** 422: the request failed validation; `errors` lists the fields. */
export class ValidationError extends ApiError {}
/** 429: rate-limited (sandbox creation). Not retried automatically. */
export class RateLimitedError extends ApiError {}
/** 5xx: the service could not complete the request (retried before this is raised). */
export class ServerError extends ApiError {}
/** No answer: connection refused or reset, DNS failure, or a timeout (retried before this is raised). */
export class TransportError extends MandateError {}
/** waitForResolution gave up before the review was resolved. */
export class ResolutionTimeoutError extends MandateError {}
/**
 * verifyWebhook refused a delivery (status 0): `detail` is `webhook_headers_missing`,
 * `webhook_timestamp_stale` or `webhook_signature_invalid`. Answer it with a 4xx and drop it.
 */
export class WebhookVerificationError extends MandateError {}

const BY_STATUS: Record<number, typeof ApiError> = {
  401: AuthenticationError,
  403: PermissionDeniedError,
  404: NotFoundError,
  409: ConflictError,
  410: GoneError,
  413: PayloadTooLargeError,
  422: ValidationError,
  429: RateLimitedError,
};

/** The typed error for an error answer with `status` and (parsed, if JSON) `body`. */
export function errorFromResponse(status: number, body: unknown, requestIdHeader: string | null): ApiError {
  const b = (typeof body === "object" && body !== null ? body : {}) as Record<string, unknown>;
  const Class = BY_STATUS[status] ?? (status >= 500 ? ServerError : ApiError);
  return new Class({
    status,
    detail: typeof b.detail === "string" ? b.detail : `http_${status}`,
    message: typeof b.message === "string" ? b.message : typeof body === "string" && body ? body.slice(0, 500) : `HTTP ${status}`,
    request_id: typeof b.request_id === "string" ? b.request_id : (requestIdHeader ?? undefined),
    errors: Array.isArray(b.errors) ? (b.errors as FieldError[]) : [],
  });
}
