import { createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify } from "node:crypto";
import type { KeyObject } from "node:crypto";
import { calculateJwkThumbprint } from "jose";

/**
 * The public half of an evidence key as published in the JWKS; exactly these members, never
 * `d`. A type alias, not an interface, so it is assignable to `Record<string, unknown>`.
 */
export type EvidencePublicJwk = {
  kty: "OKP";
  crv: "Ed25519";
  /** base64url of the 32-byte Ed25519 public key (RFC 8037). */
  x: string;
  kid: string;
  alg: "EdDSA";
  use: "sig";
};

/** A freshly generated evidence key, in the form storage keeps it. */
export interface GeneratedEvidenceKey {
  /** RFC 7638 JWK thumbprint (SHA-256, base64url) of the public key. */
  kid: string;
  /** PKCS#8 PEM of the private key. */
  privateKeyPem: string;
  publicJwk: EvidencePublicJwk;
}

/** One stored evidence key, as storage reads it; retired keys may keep only the public part. */
export interface EvidenceKeyRow {
  kid: string;
  private_key_pem?: string | null;
  /** Needs `kty: "OKP"`, `crv: "Ed25519"` and `x`; other members are ignored, `d` is refused. */
  public_jwk: Readonly<Record<string, unknown>>;
  active: boolean;
}

/** A detached Ed25519 signature and the key that made it. */
export interface EvidenceSignature {
  kid: string;
  /** base64url (no padding) of the 64-byte Ed25519 signature. */
  signature: string;
}

/** Creates a new Ed25519 evidence key; async only because jose's thumbprint is. */
export async function generateEvidenceKey(): Promise<GeneratedEvidenceKey> {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519");
  const x = ed25519PublicX(publicKey);
  const kid = await calculateJwkThumbprint({ kty: "OKP", crv: "Ed25519", x }, "sha256");
  return {
    kid,
    privateKeyPem: privateKey.export({ format: "pem", type: "pkcs8" }).toString(),
    publicJwk: publicEvidenceJwk(kid, x),
  };
}

/**
 * The RFC 7638 thumbprint (SHA-256, base64url) of a public JWK, computed from its key members
 * (for Ed25519: crv, kty, x), so it names the key itself whatever its `kid` says; null when the
 * JWK lacks the members its type requires. For the service's evidence keys it equals the kid.
 */
export async function jwkThumbprint(jwk: Readonly<Record<string, unknown>>): Promise<string | null> {
  try {
    return await calculateJwkThumbprint(jwk as Parameters<typeof calculateJwkThumbprint>[0], "sha256");
  } catch {
    return null;
  }
}

/**
 * Imports the public key of an Ed25519 JWK so that signatures can be checked without the
 * keyring, as the offline verifier does. Throws a TypeError describing what is wrong.
 */
export function importEd25519PublicJwk(jwk: Readonly<Record<string, unknown>>): KeyObject {
  if (jwk.kty !== "OKP" || jwk.crv !== "Ed25519") throw new TypeError('not an Ed25519 key (want kty "OKP", crv "Ed25519")');
  if ("d" in jwk) throw new TypeError("a private JWK (with d) where a public one belongs");
  if (typeof jwk.x !== "string" || !isBase64Url(jwk.x, 32)) throw new TypeError("x is not the base64url of 32 bytes");
  return createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: jwk.x }, format: "jwk" });
}

/** Ed25519-verifies `data` against a base64url signature; false for any malformed signature, never a throw. */
export function verifyEd25519(publicKey: KeyObject, data: Uint8Array, signature: string): boolean {
  if (!isBase64Url(signature, 64)) return false;
  return verify(null, data, publicKey, Buffer.from(signature, "base64url"));
}

/**
 * The service's evidence signing keys: signs with the single active key and verifies with any
 * key it was built from, so records signed before a rotation keep verifying.
 *
 * Built once from the stored rows and kept for the life of the process (or until the next
 * rotation): every PEM and JWK is parsed in the constructor, none per signature.
 */
export class EvidenceKeyring {
  /** kid of the key new signatures are made with. */
  readonly activeKid: string;
  readonly #activePrivateKey: KeyObject;
  readonly #publicKeys: ReadonlyMap<string, KeyObject>;
  readonly #jwks: readonly EvidencePublicJwk[];

  /**
   * Throws a TypeError unless exactly one row is active, the active row carries its private
   * key, that private key matches its public JWK, kids are unique, and every public JWK is an
   * Ed25519 key (see {@link importEd25519PublicJwk}).
   */
  constructor(rows: readonly EvidenceKeyRow[]) {
    const publicKeys = new Map<string, KeyObject>();
    const jwks: EvidencePublicJwk[] = [];
    let active: { kid: string; privateKey: KeyObject } | undefined;

    for (const row of rows) {
      if (typeof row.kid !== "string" || row.kid === "") throw new TypeError("evidence key row without a kid");
      if (publicKeys.has(row.kid)) throw new TypeError(`evidence key ${row.kid} appears twice`);
      if (row.active && active) throw new TypeError(`more than one active evidence key (${active.kid}, ${row.kid})`);
      const { publicKey, privateKey } = loadKeyRow(row);
      if (privateKey) active = { kid: row.kid, privateKey };
      publicKeys.set(row.kid, publicKey);
      jwks.push(publicEvidenceJwk(row.kid, row.public_jwk.x as string));
    }
    if (!active) throw new TypeError("no active evidence key");

    this.activeKid = active.kid;
    this.#activePrivateKey = active.privateKey;
    this.#publicKeys = publicKeys;
    this.#jwks = jwks;
  }

  /** Signs `data` with the active key. */
  sign(data: Uint8Array): EvidenceSignature {
    return { kid: this.activeKid, signature: sign(null, data, this.#activePrivateKey).toString("base64url") };
  }

  /** {@link sign} on libuv's thread pool, leaving the event loop free meanwhile. */
  signOffLoop(data: Uint8Array): Promise<EvidenceSignature> {
    const kid = this.activeKid;
    return new Promise((resolve, reject) =>
      sign(null, data, this.#activePrivateKey, (err, signature) => (err ? reject(err) : resolve({ kid, signature: signature.toString("base64url") }))),
    );
  }

  /** True when `signature` is a valid signature of `data` by key `kid`; false for an unknown kid. */
  verify(kid: string, data: Uint8Array, signature: string): boolean {
    const publicKey = this.#publicKeys.get(kid);
    return publicKey !== undefined && verifyEd25519(publicKey, data, signature);
  }

  /** The JWKS to publish at /.well-known/jwks.json: every key, retired ones included. */
  jwks(): { keys: EvidencePublicJwk[] } {
    return { keys: this.#jwks.map((jwk) => ({ ...jwk })) };
  }

  /**
   * The active private key for other signers that must use the same published key, such as
   * jose's `SignJWT(...).sign(key)` with `alg: "EdDSA"` and `kid: activeKid` for capability tokens.
   */
  privateKeyObject(): KeyObject {
    return this.#activePrivateKey;
  }
}

/** Parses one row; the private key is returned (and checked) only for the active row. */
function loadKeyRow(row: EvidenceKeyRow): { publicKey: KeyObject; privateKey?: KeyObject } {
  try {
    const publicKey = importEd25519PublicJwk(row.public_jwk);
    if (!row.active) return { publicKey };
    if (!row.private_key_pem) throw new TypeError("it is active but has no private key");
    const privateKey = createPrivateKey(row.private_key_pem);
    // A private key that does not match the published JWK would sign what nobody can verify.
    if (privateKey.asymmetricKeyType !== "ed25519" || ed25519PublicX(createPublicKey(privateKey)) !== row.public_jwk.x) {
      throw new TypeError("private key does not match its public JWK");
    }
    return { publicKey, privateKey };
  } catch (error) {
    throw new TypeError(`evidence key ${row.kid}: ${(error as Error).message}`, { cause: error });
  }
}

function publicEvidenceJwk(kid: string, x: string): EvidencePublicJwk {
  return { kty: "OKP", crv: "Ed25519", x, kid, alg: "EdDSA", use: "sig" };
}

function ed25519PublicX(publicKey: KeyObject): string {
  return publicKey.export({ format: "jwk" }).x as string;
}

/** Strict unpadded base64url of exactly `bytes` bytes, in its one canonical spelling. */
function isBase64Url(text: string, bytes: number): boolean {
  if (text.length !== Math.ceil((bytes * 4) / 3) || !/^[A-Za-z0-9_-]*$/.test(text)) return false;
  // Node ignores non-zero trailing bits; re-encoding rejects the alternative spellings they allow.
  return Buffer.from(text, "base64url").toString("base64url") === text;
}
