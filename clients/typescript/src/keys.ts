import * as ed from "@noble/ed25519";

/*
 * An agent's Ed25519 key, generated locally: only the public key ever leaves
 * the machine. Its private form is a standard PKCS#8 PEM (the file the Python
 * client writes and OpenSSL reads), so one private key means one agent identity
 * whichever client registers it. Browser-safe: WebCrypto randomness and noble's
 * Ed25519; reading and writing key files is in node.ts (`@mandate/client/node`).
 */

/** DER prefix of a PKCS#8 Ed25519 private key (RFC 8410); the 32-byte seed follows. */
const PKCS8_PREFIX = Uint8Array.from([0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20]);

/** Standard base64 with btoa, which browsers and Node both have (Buffer is Node's only). */
function toBase64(bytes: Uint8Array): string {
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary);
}

function fromPem(pem: string): Uint8Array {
  const m = /-----BEGIN PRIVATE KEY-----([\s\S]+?)-----END PRIVATE KEY-----/.exec(pem);
  if (!m) throw new Error("not a PKCS#8 PEM private key (-----BEGIN PRIVATE KEY-----)");
  let binary: string;
  try {
    binary = atob(m[1]!.replace(/\s+/g, ""));
  } catch {
    throw new Error("the PEM file's body is not base64");
  }
  const der = Uint8Array.from(binary, (c) => c.charCodeAt(0));
  if (der.length !== PKCS8_PREFIX.length + 32 || !PKCS8_PREFIX.every((b, i) => der[i] === b)) {
    throw new Error("the PEM file does not hold an Ed25519 private key");
  }
  return new Uint8Array(der.subarray(PKCS8_PREFIX.length));
}

/** An Ed25519 key pair held by an agent; sign with it, upload only `public_key`. */
export class AgentKey {
  // A true private field: never enumerated, so logging or JSON.stringify of a key (or of an
  // identity holding one) cannot print the seed.
  readonly #seed: Uint8Array;

  private constructor(
    seed: Uint8Array,
    /** The raw 32-byte public key. */
    readonly public_key_bytes: Uint8Array,
  ) {
    this.#seed = seed;
  }

  /** A fresh key from the operating system's CSPRNG. */
  static generate(): Promise<AgentKey> {
    return AgentKey.fromSeed(ed.utils.randomPrivateKey());
  }

  /** The key whose 32-byte private seed is `seed`. */
  static async fromSeed(seed: Uint8Array): Promise<AgentKey> {
    if (seed.length !== 32) throw new Error("an Ed25519 private key seed is 32 bytes");
    return new AgentKey(Uint8Array.from(seed), await ed.getPublicKeyAsync(seed));
  }

  /** The key in a PKCS#8 PEM (what `toPem` and `openssl genpkey -algorithm ed25519` write). */
  static async fromPem(pem: string): Promise<AgentKey> {
    return AgentKey.fromSeed(fromPem(pem));
  }

  /** The public key in the wire form `ed25519:base64:<standard base64 of 32 bytes>`. */
  get public_key(): string {
    return `ed25519:base64:${toBase64(this.public_key_bytes)}`;
  }

  /** The private key as PKCS#8 PEM. Treat it as a secret. */
  toPem(): string {
    const der = new Uint8Array(PKCS8_PREFIX.length + 32);
    der.set(PKCS8_PREFIX);
    der.set(this.#seed, PKCS8_PREFIX.length);
    const b64 = toBase64(der).replace(/.{1,64}/g, "$&\n");
    return `-----BEGIN PRIVATE KEY-----\n${b64}-----END PRIVATE KEY-----\n`;
  }

  /** Standard base64 of the 64-byte Ed25519 signature over `message` (a string is signed as UTF-8). */
  async sign(message: Uint8Array | string): Promise<string> {
    const bytes = typeof message === "string" ? new TextEncoder().encode(message) : message;
    return toBase64(await ed.signAsync(bytes, this.#seed));
  }
}
