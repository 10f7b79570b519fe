import { Code, ConnectError } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { MandateError, type ErrorCode, type FieldError } from "../base/errors.js";
import { ErrorDetailSchema } from "../gen/mandate/v1/errors_pb.js";
import { isNestedTooDeeplyText } from "./node-internals.js";

/** HTTP status and gRPC code of every error code (docs/architecture.md, "Error model"); the one place they are decided. */
const STATUS: Record<ErrorCode, [number, Code]> = {
  signature_invalid: [401, Code.Unauthenticated],
  unknown_key: [401, Code.Unauthenticated],
  missing_credentials: [401, Code.Unauthenticated],
  permission_denied: [403, Code.PermissionDenied],
  agent_not_active: [403, Code.PermissionDenied],
  agent_revoked: [403, Code.PermissionDenied],
  agent_retired: [403, Code.PermissionDenied],
  organization_suspended: [403, Code.PermissionDenied],
  capability_dependency_inactive: [403, Code.PermissionDenied],
  not_found: [404, Code.NotFound],
  method_not_allowed: [405, Code.Unimplemented],
  nonce_reused: [409, Code.AlreadyExists],
  already_exists: [409, Code.AlreadyExists],
  capability_already_issued: [409, Code.AlreadyExists],
  capability_constraint_mismatch: [409, Code.FailedPrecondition],
  capability_audience_mismatch: [409, Code.FailedPrecondition],
  capability_action_mismatch: [409, Code.FailedPrecondition],
  capability_resource_mismatch: [409, Code.FailedPrecondition],
  capability_consumed: [409, Code.FailedPrecondition],
  decision_not_allowed: [409, Code.FailedPrecondition],
  review_not_approved: [409, Code.FailedPrecondition],
  review_already_resolved: [409, Code.FailedPrecondition],
  invalid_transition: [409, Code.FailedPrecondition],
  capability_expired: [410, Code.FailedPrecondition],
  payload_too_large: [413, Code.ResourceExhausted],
  validation_failed: [422, Code.InvalidArgument],
  request_expired: [422, Code.InvalidArgument],
  undeclared_field: [422, Code.InvalidArgument],
  duplicate_key: [422, Code.InvalidArgument],
  imprecise_number: [422, Code.InvalidArgument],
  capability_token_invalid: [422, Code.InvalidArgument],
  policy_compile_failed: [422, Code.InvalidArgument],
  policy_runtime_error: [422, Code.InvalidArgument],
  invalid_policy_input: [422, Code.InvalidArgument],
  rate_limited: [429, Code.ResourceExhausted],
  evaluation_unavailable: [503, Code.Unavailable],
  unavailable: [503, Code.Unavailable],
  internal: [500, Code.Internal],
};

/** The error as callers see it: code, human message and field errors. Unknown exceptions become `internal`. */
export function describeError(err: unknown): { code: ErrorCode; message: string; errors: readonly FieldError[]; status: number; grpc: Code; retryAfterSeconds?: number } {
  if (err instanceof MandateError) {
    const [status, grpc] = STATUS[err.code];
    return { code: err.code, message: err.message, errors: err.fieldErrors, status, grpc, retryAfterSeconds: err.retryAfterSeconds };
  }
  if (err instanceof ConnectError) {
    // Raised by connect itself before our code ran (bad protobuf, oversized message, …). An
    // undecodable message, which connect reports as INTERNAL, arrives here as INVALID_ARGUMENT
    // already: connect-errors.ts and the pipeline recognise it by where it arose.
    const code: ErrorCode =
      err.code === Code.ResourceExhausted
        ? "payload_too_large"
        : err.code === Code.InvalidArgument
          ? "validation_failed"
          : err.code === Code.Unimplemented
            ? "not_found"
            : err.code === Code.Unauthenticated
              ? "missing_credentials"
              : err.code === Code.DeadlineExceeded || err.code === Code.Canceled || err.code === Code.Unavailable
                ? "unavailable"
                : "internal";
    const [status, grpc] = STATUS[code];
    // connect's JSON decoder recurses: a document nested thousands deep overflows the stack there or
    // meets the decoder's depth limit, and only that text comes through (checked at start-up in
    // node-internals.ts).
    if (code === "validation_failed" && isNestedTooDeeplyText(err.rawMessage)) {
      return { code, message: "The message is nested too deeply.", errors: [{ field: "(body)", code: "too_deep", message: "nested too deeply" }], status, grpc };
    }
    return { code, message: code === "internal" ? "Internal error." : err.rawMessage, errors: [], status, grpc };
  }
  return { code: "internal", message: "Internal error.", errors: [], status: 500, grpc: Code.Internal };
}

/** Seconds a client is asked to wait before trying a 503 again. */
export const RETRY_AFTER_SECONDS = 1;

/** Seconds a 429 asks for when its limit does not know when it frees (an event stream closing). */
export const RATE_LIMIT_RETRY_AFTER_SECONDS = 5;

/**
 * The response headers by which an answer of `status` says when to try again, in seconds: every
 * 503 (a dependency down or too slow) and every 429 (when the limit's window frees, when the
 * limit knows; `retryAfterSeconds`).
 */
export function retryHeaders(status: number, retryAfterSeconds?: number): Record<string, string> {
  if (status === 503) return { "retry-after": String(RETRY_AFTER_SECONDS) };
  if (status === 429) return { "retry-after": String(retryAfterSeconds ?? RATE_LIMIT_RETRY_AFTER_SECONDS) };
  return {};
}

/** The /v1 JSON body of an error. */
export function errorBody(err: unknown, requestId: string): { status: number; body: Record<string, unknown>; headers: Record<string, string> } {
  const d = describeError(err);
  const body: Record<string, unknown> = { detail: d.code, message: d.message, request_id: requestId };
  if (d.errors.length > 0 || d.code === "validation_failed") body.errors = d.errors;
  return { status: d.status, body, headers: retryHeaders(d.status, d.retryAfterSeconds) };
}

/** The same error as a ConnectError carrying an ErrorDetail, for gRPC, gRPC-Web and Connect. */
export function toConnectError(err: unknown, requestId: string): ConnectError {
  const d = describeError(err);
  const detail = create(ErrorDetailSchema, { detail: d.code, message: d.message, requestId, errors: d.errors.map((e) => ({ ...e, line: e.line ?? 0, column: e.column ?? 0 })) });
  // A 503's retry hint travels in the metadata (trailers on gRPC, headers on Connect): Retry-After as
  // on /v1, and grpc-retry-pushback-ms, which gRPC clients with a retry policy honour.
  const retry = retryHeaders(d.status, d.retryAfterSeconds);
  const metadata: Record<string, string> = { "x-request-id": requestId, ...retry };
  if (retry["retry-after"]) metadata["grpc-retry-pushback-ms"] = String(Number(retry["retry-after"]) * 1000);
  return new ConnectError(d.message, d.grpc, metadata, [{ desc: ErrorDetailSchema, value: detail }]);
}
