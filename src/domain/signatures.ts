import { createPublicKey, verify, type KeyObject } from "node:crypto";
import type { Database } from "../storage/postgres/database.js";
import { agentStore, type CertificateRow } from "../storage/postgres/agents.js";
import { MandateError, validationFailed } from "./errors.js";

const PUBLIC_KEY = /^ed25519:base64:([A-Za-z0-9+/]{43}=)$/;

/** Parses `ed25519:base64:<standard base64 of 32 bytes>`; 422 on anything else. */
export function parsePublicKey(text: string, field = "public_key"): KeyObject {
  const m = PUBLIC_KEY.exec(text);
  const raw = m ? Buffer.from(m[1]!, "base64") : null;
  if (!raw || raw.length !== 32 || raw.toString("base64") !== m![1]) {
    throw validationFailed([{ field, code: "invalid_format", message: "must be ed25519:base64:<standard base64 of 32 bytes>" }]);
  }
  return createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: raw.toString("base64url") }, format: "jwk" });
}

/** Whether `signature` (standard base64 or unpadded base64url) is `key`'s Ed25519 signature of `bytes`. */
export function signatureValid(key: KeyObject, signature: string, bytes: Uint8Array): boolean {
  const sig = decodeSignature(signature);
  return sig !== null && verify(null, bytes, key, sig);
}

/** Decodes a signature in standard base64 or unpadded base64url; null unless it is 64 bytes. */
function decodeSignature(text: string): Buffer | null {
  if (!/^[A-Za-z0-9+/]{86}==$/.test(text) && !/^[A-Za-z0-9_-]{86}$/.test(text)) return null;
  const bytes = Buffer.from(text, text.includes("-") || text.includes("_") || !text.endsWith("=") ? "base64url" : "base64");
  return bytes.length === 64 ? bytes : null;
}

/**
 * Verifies agent signatures: the one routine behind Intents, heartbeats and
 * agent-signed reads, on every transport. Keys are parsed once per certificate.
 */
export class AgentSignatures {
  private readonly keys = new Map<string, KeyObject>();

  constructor(private readonly db: Database) {}

  /**
   * Returns the certificate (with its agent's state) whose key signed `bytes`.
   * 401 `unknown_key` for an unknown or rotated-away certificate, 401
   * `signature_invalid` for a bad signature. A revoked certificate still
   * verifies here so the caller can answer 403 `agent_revoked`.
   */
  async verify(keyId: string, signature: string, bytes: Uint8Array): Promise<CertificateRow> {
    const cert = keyId.length <= 64 ? await agentStore.certificate(this.db.pool, keyId) : null;
    if (!cert || cert.state === "replaced") throw new MandateError("unknown_key", "The certificate is unknown or was replaced by key rotation.");
    let key = this.keys.get(cert.certificate_id);
    if (!key) {
      key = parsePublicKey(cert.public_key);
      if (this.keys.size > 50_000) this.keys.clear();
      this.keys.set(cert.certificate_id, key);
    }
    if (!signatureValid(key, signature, bytes)) {
      throw new MandateError("signature_invalid", "The signature does not verify over the request body.");
    }
    return cert;
  }
}

/** 403 for an agent that may not sign actions: registered, revoked or retired (DESIGN §2 step 4). */
export function requireSigningState(cert: CertificateRow, allowSuspended: boolean): void {
  switch (cert.agent_state) {
    case "revoked":
      throw new MandateError("agent_revoked", "The agent is revoked.");
    case "retired":
      throw new MandateError("agent_retired", "The agent is retired.");
    case "registered":
      throw new MandateError("agent_not_active", "The agent is not active yet.");
    case "suspended":
      if (!allowSuspended) throw new MandateError("agent_not_active", "The agent is suspended.");
  }
}
