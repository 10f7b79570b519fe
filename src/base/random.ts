import { randomBytes, randomFillSync } from "node:crypto";

/** Crockford base32, lower case: no i, l, o or u. */
const CROCKFORD_BASE32 = "0123456789abcdefghjkmnpqrstvwxyz";

/** Random bytes fetched 4 KiB at a time, as Node's randomUUID does; `used` of them are spent. */
const pool = Buffer.allocUnsafe(4096);
let used = pool.length;

/**
 * `length` lower-case Crockford base32 characters from the CSPRNG, 5 random bits each: the body
 * of every id (`newId`, `newEvidenceId`). Bytes come from the pool: a randomBytes call per id
 * (an OpenSSL call and a job object) costs many times a share of the pool (docs/performance.md,
 * CPU per request).
 */
export function randomBase32(length: number): string {
  if (length > pool.length) return base32(randomBytes(length), 0, length);
  if (used + length > pool.length) {
    randomFillSync(pool);
    used = 0;
  }
  used += length;
  return base32(pool, used - length, used);
}

function base32(bytes: Buffer, from: number, to: number): string {
  let out = "";
  // 256 is a multiple of 32, so masking each byte keeps the characters uniform.
  for (let i = from; i < to; i++) out += CROCKFORD_BASE32[bytes[i]! & 31];
  return out;
}
