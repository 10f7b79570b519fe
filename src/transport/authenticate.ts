import type { Caller } from "../base/caller.js";
import type { Credentials } from "../domain/credentials.js";
import { MandateError } from "../base/errors.js";
import type { Access } from "./access.js";

/** Reads one header (a Headers object, or headerReader's view of Node's headers). */
export type HeaderSource = { get(name: string): string | null };

/**
 * Establishes the caller of one request from its headers, the same way for
 * /v1 and for gRPC/Connect, and enforces the method's access rule.
 */
export async function authenticate(credentials: Credentials, access: Access, headers: HeaderSource, clientAddress: string): Promise<Caller> {
  if (access.mode === "public") return { kind: "anonymous", clientAddress };

  const operatorKey = headers.get("x-service-operator-key");
  const authorization = headers.get("authorization");
  const keyId = headers.get("x-service-key-id");

  // Signed-only methods ignore administrative headers a client may set globally;
  // where either is accepted, an administrative credential takes precedence.
  const signedCall = access.mode === "agent" || (access.mode === "org_or_agent" && operatorKey === null && authorization === null);
  if (signedCall && keyId !== null) {
    const signature = headers.get("x-service-signature");
    if (!signature) throw new MandateError("missing_credentials", "X-Service-Signature is required with X-Service-Key-Id.");
    return { kind: "agent_signed", keyId, signature, timestamp: headers.get("x-service-timestamp") ?? undefined, clientAddress };
  }
  if (access.mode === "agent") {
    throw new MandateError("missing_credentials", "This request must be signed by the agent (X-Service-Key-Id, X-Service-Signature).");
  }

  if (operatorKey !== null) {
    if (!credentials.isOperatorKey(operatorKey)) throw new MandateError("unknown_key", "The operator key is not valid.");
    const organizationId = headers.get("x-service-organization-id");
    if (access.mode === "platform") return { kind: "platform_operator", identity: "operator", clientAddress };
    if (!organizationId) {
      throw new MandateError("missing_credentials", "The operator key must name its organization in X-Service-Organization-Id.");
    }
    return credentials.operatorFor(organizationId, clientAddress);
  }
  if (access.mode === "platform" || access.mode === "operator") {
    throw new MandateError("missing_credentials", "This platform-internal operation needs the operator key.");
  }
  if (authorization === null) throw new MandateError("missing_credentials", "Authorization: Bearer <key> is required.");
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  if (!match) throw new MandateError("missing_credentials", "The Authorization header must be `Bearer <key>`.");
  const caller = await credentials.bearer(match[1]!, clientAddress);
  const needed = access.permission === undefined ? [] : typeof access.permission === "string" ? [access.permission] : access.permission;
  if (needed.length > 0 && !needed.some((p) => caller.permissions.has(p))) {
    throw new MandateError("permission_denied", `This operation needs the ${needed.join(" or ")} permission.`);
  }
  return caller;
}
