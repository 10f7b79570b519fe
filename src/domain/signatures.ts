import { createPublicKey, verify, type KeyObject } from "node:crypto";
import type { AgentStore, CertificateRow } from "../storage/agents.js";
import { MandateError, organizationSuspended, validationFailed } from "../base/errors.js";

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

/**
 * `signatureValid` on libuv's thread pool. Verifying is the largest CPU cost of
 * a signed request (docs/performance.md, CPU per request); off the event loop it
 * runs beside other requests' work instead of in front of it.
 */
function signatureValidOffLoop(key: KeyObject, signature: string, bytes: Uint8Array): Promise<boolean> {
  const sig = decodeSignature(signature);
  if (sig === null) return Promise.resolve(false);
  return new Promise((resolve, reject) => verify(null, bytes, key, sig, (err, valid) => (err ? reject(err) : resolve(valid))));
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
  /** What never changes about a certificate: its key, agent, organization and acting principal. */
  private readonly identities = new Map<string, SignerIdentity>();

  constructor(private readonly agents: Pick<AgentStore, "certificate">) {}

  /**
   * Verifies `bytes` against the certificate's key and returns the signer's
   * immutable identity, cached per certificate. It says nothing about the
   * certificate's or agent's current state: callers read that live (the
   * Intent path does, in its one query) before acting on the request.
   */
  async verifyIdentity(keyId: string, signature: string, bytes: Uint8Array): Promise<SignerIdentity> {
    let identity = this.identities.get(keyId);
    if (!identity) {
      const cert = keyId.length <= 64 ? await this.agents.certificate(keyId) : null;
      if (!cert || cert.state === "replaced") throw new MandateError("unknown_key", "The certificate is unknown or was replaced by key rotation.");
      identity = {
        certificate_id: cert.certificate_id,
        agent_id: cert.agent_id,
        organization_id: cert.organization_id,
        acting_for_principal_id: cert.acting_for_principal_id,
        principal_external_ref: cert.principal_external_ref,
        principal_kind: cert.principal_kind,
        key: parsePublicKey(cert.public_key),
      };
      if (this.identities.size > 50_000) this.identities.clear();
      this.identities.set(keyId, identity);
    }
    if (!(await signatureValidOffLoop(identity.key, signature, bytes))) {
      // A certificate rotated away since it was cached answers unknown_key, as an uncached one would.
      const cert = await this.agents.certificate(keyId);
      if (!cert || cert.state === "replaced") {
        this.identities.delete(keyId);
        throw new MandateError("unknown_key", "The certificate is unknown or was replaced by key rotation.");
      }
      throw new MandateError("signature_invalid", "The signature does not verify over the request body.");
    }
    return identity;
  }

  /**
   * Verifies an agent-signed request other than an Intent (a heartbeat, a read) and returns
   * the signing certificate read live, with its agent's state: 401 `unknown_key` for an
   * unknown or rotated-away certificate, 401 `signature_invalid` for a bad signature, then 403
   * when the signer may not act now. A revoked, retired or rotated-out certificate
   * authenticates nothing, reads included (docs/architecture.md, Authentication); a suspended
   * agent's is accepted only with `allowSuspended`. Then, as in the Intent path (step 5), 403
   * `organization_suspended` while its organization is suspended.
   */
  async verifyLive(keyId: string, signature: string, bytes: Uint8Array, allowSuspended: boolean): Promise<CertificateRow> {
    const cert = await this.verify(keyId, signature, bytes);
    requireSigningState(cert, allowSuspended);
    if (cert.state !== "active") throw new MandateError("agent_revoked", "The certificate is revoked.");
    if (cert.organization_state !== "active") throw organizationSuspended();
    return cert;
  }

  /**
   * Returns the certificate (with its agent's state) whose key signed `bytes`.
   * 401 `unknown_key` for an unknown or rotated-away certificate, 401
   * `signature_invalid` for a bad signature. It says nothing about the signer's
   * state: `verifyLive` checks it.
   */
  private async verify(keyId: string, signature: string, bytes: Uint8Array): Promise<CertificateRow> {
    const cert = keyId.length <= 64 ? await this.agents.certificate(keyId) : null;
    if (!cert || cert.state === "replaced") throw new MandateError("unknown_key", "The certificate is unknown or was replaced by key rotation.");
    let key = this.keys.get(cert.certificate_id);
    if (!key) {
      key = parsePublicKey(cert.public_key);
      if (this.keys.size > 50_000) this.keys.clear();
      this.keys.set(cert.certificate_id, key);
    }
    if (!(await signatureValidOffLoop(key, signature, bytes))) {
      throw new MandateError("signature_invalid", "The signature does not verify over the request body.");
    }
    return cert;
  }
}

/** The parts of a certificate that never change. */
export interface SignerIdentity {
  certificate_id: string;
  agent_id: string;
  organization_id: string;
  acting_for_principal_id: string;
  principal_external_ref: string | null;
  principal_kind: string;
  key: KeyObject;
}

/** 401 for a certificate rotated away since it was cached; 403 for an agent that may not sign (docs/architecture.md, The Intent path, steps 2 and 4). */
export function requireLiveSigner(state: { cert_state: string; agent_state: string }, allowSuspended: boolean): void {
  if (state.cert_state === "replaced") throw new MandateError("unknown_key", "The certificate was replaced by key rotation.");
  requireSigningState(state, allowSuspended);
}

/** 403 for an agent that may not sign actions: registered, revoked or retired (docs/architecture.md, The Intent path, step 4). */
export function requireSigningState(cert: Pick<CertificateRow, "agent_state"> | { agent_state: string }, allowSuspended: boolean): void {
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
