import { createContextKey, type HandlerContext } from "@connectrpc/connect";
import type { Caller, OrgCaller } from "../base/caller.js";
import { MandateError } from "../base/errors.js";

/** The authenticated caller, set by authentication before any handler runs. */
export const callerKey = createContextKey<Caller>({ kind: "anonymous", clientAddress: "" }, { description: "caller" });

/** The request id, echoed in every error body and log line. */
export const requestIdKey = createContextKey<string>("", { description: "request id" });

/** The caller of a method whose access mode guarantees an organization. */
export function orgCaller(ctx: HandlerContext): OrgCaller {
  const caller = ctx.values.get(callerKey);
  if (caller.kind !== "key" && caller.kind !== "operator") {
    throw new MandateError("missing_credentials", "This operation needs an organization's credentials.");
  }
  return caller;
}

/** The caller, whatever its kind. */
export function anyCaller(ctx: HandlerContext): Caller {
  return ctx.values.get(callerKey);
}

/**
 * A `/v1` request's body as received, for methods whose whole body is the message: what a dry
 * run checks for duplicate member names and imprecise numbers, as a signed Intent's bytes are
 * checked (its parsed message can no longer show them). Unset on gRPC and Connect.
 */
export const rawJsonBodyKey = createContextKey<Uint8Array | undefined>(undefined, { description: "raw JSON body" });

/** The peer address, captured by the node adapter before interceptors run. */
export const clientAddressKey = createContextKey<string>("", { description: "client address" });
