import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorDetailSchema, type FieldError } from "../../../src/gen/mandate/v1/errors_pb.js";

/** What the console shows of a failed call: the API's own code, message and field errors. */
export interface ApiFailure {
  code: string;
  message: string;
  requestId: string;
  fields: FieldError[];
}

/**
 * Reads the mandate.v1.ErrorDetail every API error carries (docs/architecture.md, Error model);
 * a failure without one (the network, a proxy) keeps connect's code and message.
 */
export function describeFailure(err: unknown): ApiFailure {
  const ce = ConnectError.from(err);
  const [detail] = ce.findDetails(ErrorDetailSchema);
  if (detail) return { code: detail.detail, message: detail.message, requestId: detail.requestId, fields: detail.errors };
  const network = ce.code === Code.Unknown || ce.code === Code.Unavailable;
  return {
    code: Code[ce.code] ?? "unknown",
    message: network ? `The service could not be reached (${ce.rawMessage}).` : ce.rawMessage,
    requestId: "",
    fields: [],
  };
}

/** The API's code of a failure ("permission_denied", "not_found", …). */
export function failureCode(err: unknown): string {
  return describeFailure(err).code;
}
