import { chmod, readFile, writeFile } from "node:fs/promises";
import * as ed from "@noble/ed25519";

/*
 * An agent's Ed25519 key, generated locally: only the public key ever leaves
 * the machine. Saved as a standard PKCS#8 PEM file with 0600 permissions (the
 * same file the Python client writes and OpenSSL reads), so one private key
 * means one agent identity whichever client registers it.
 */

/** DER prefix of a PKCS#8 Ed25519 private key (RFC 8410); the 32-byte seed follows. */
const PKCS8_PREFIX = Uint8Array.from([0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20]);

function toBase64(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString("base64");
}

function fromPem(pem: string): Uint8Array {
  const m = /-----BEGIN PRIVATE KEY-----([\s\S]+?)-----END PRIVATE KEY-----/.exec(pem);
  if (!m) throw new Error("not a PKCS#8 PEM private key (-----BEGIN PRIVATE KEY-----)");
  const der = Buffer.from(m[1]!.replace(/\s+/g, ""), "base64");
  if (der.length !== PKCS8_PREFIX.length + 32 || !PKCS8_PREFIX.every((b, i) => der[i] === b)) {
    throw new Error("the PEM file does not hold an Ed25519 private key");
  }
  return new Uint8Array(der.subarray(PKCS8_PREFIX.length));
}

/** An Ed25519 key pair held by an agent; sign with it, upload only `publicKey`. */
export class AgentKey {
  private constructor(
    private readonly seed: Uint8Array,
    /** The raw 32-byte public key. */
    readonly publicKeyBytes: Uint8Array,
  ) {}

  /** A fresh key from the operating system's CSPRNG. */
  static generate(): Promise<AgentKey> {
    return AgentKey.fromSeed(ed.utils.randomPrivateKey());
  }

  /** The key whose 32-byte private seed is `seed`. */
  static async fromSeed(seed: Uint8Array): Promise<AgentKey> {
    if (seed.length !== 32) throw new Error("an Ed25519 private key seed is 32 bytes");
    return new AgentKey(Uint8Array.from(seed), await ed.getPublicKeyAsync(seed));
  }

  /** Reads a key saved by `save` (PKCS#8 PEM, also what `openssl genpkey -algorithm ed25519` writes). */
  static async load(path: string): Promise<AgentKey> {
    return AgentKey.fromSeed(fromPem(await readFile(path, "utf8")));
  }

  /** Loads the key at `path`, or generates and saves one there: the same file always means the same agent. */
  static async loadOrCreate(path: string): Promise<AgentKey> {
    try {
      return await AgentKey.load(path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    }
    const key = await AgentKey.generate();
    try {
      await key.save(path);
      return key;
    } catch (err) {
      // Another process created it first: use theirs.
      if ((err as NodeJS.ErrnoException).code === "EEXIST") return AgentKey.load(path);
      throw err;
    }
  }

  /** The public key in the wire form `ed25519:base64:<standard base64 of 32 bytes>`. */
  get publicKey(): string {
    return `ed25519:base64:${toBase64(this.publicKeyBytes)}`;
  }

  /** The private key as PKCS#8 PEM. Treat it as a secret. */
  toPem(): string {
    const der = new Uint8Array(PKCS8_PREFIX.length + 32);
    der.set(PKCS8_PREFIX);
    der.set(this.seed, PKCS8_PREFIX.length);
    const b64 = toBase64(der).replace(/.{1,64}/g, "$&\n");
    return `-----BEGIN PRIVATE KEY-----\n${b64}-----END PRIVATE KEY-----\n`;
  }

  /** Writes the private key to a new file readable by its owner only (0600); never overwrites unless told. */
  async save(path: string, options: { overwrite?: boolean } = {}): Promise<void> {
    await writeFile(path, this.toPem(), { mode: 0o600, flag: options.overwrite ? "w" : "wx" });
    // `mode` applies only when the file is created: an overwritten file is narrowed here.
    if (options.overwrite) await chmod(path, 0o600);
  }

  /** Standard base64 of the 64-byte Ed25519 signature over `message` (a string is signed as UTF-8). */
  async sign(message: Uint8Array | string): Promise<string> {
    const bytes = typeof message === "string" ? new TextEncoder().encode(message) : message;
    return toBase64(await ed.signAsync(bytes, this.seed));
  }
}
