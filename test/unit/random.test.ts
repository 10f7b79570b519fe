import { afterEach, describe, expect, it, vi } from "vitest";
import { newId } from "../../src/domain/ids.js";
import { randomBase32 } from "../../src/base/random.js";

/*
 * The distribution check runs on a seeded byte source, so its verdict is the same on
 * every run: what it tests is how bytes become characters (a skew there shows with any
 * uniform source), not the CSPRNG. Every other test here draws from the real one.
 */
const source = vi.hoisted(() => ({ next: undefined as (() => number) | undefined }));
vi.mock("node:crypto", async (importOriginal) => {
  const real = await importOriginal<typeof import("node:crypto")>();
  const fill = <T extends NodeJS.ArrayBufferView>(buffer: T): T => {
    if (!source.next) return real.randomFillSync(buffer);
    const bytes = new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
    for (let i = 0; i < bytes.length; i++) bytes[i] = source.next();
    return buffer;
  };
  return { ...real, randomFillSync: fill, randomBytes: (n: number) => (source.next ? fill(Buffer.alloc(n)) : real.randomBytes(n)) };
});

/** mulberry32: a small seeded generator, one byte per call. */
function seededBytes(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) & 0xff;
  };
}

afterEach(() => {
  source.next = undefined;
});

describe("randomBase32", () => {
  it("gives lower-case Crockford base32 of the asked length, never repeating across pool refills", () => {
    // 26 characters a call: 10,000 calls span about 63 refills of the 4 KiB pool.
    const seen = new Set<string>();
    for (let i = 0; i < 10_000; i++) {
      const s = randomBase32(26);
      expect(s).toMatch(/^[0-9a-hjkmnp-tv-z]{26}$/);
      seen.add(s);
    }
    expect(seen.size).toBe(10_000);
  });

  it("spreads characters evenly over all 32 (chi-square far below what a skew would give; seeded bytes)", () => {
    source.next = seededBytes(0x5eed);
    // Spend what is left of the pool, so every character below comes from the seeded source.
    randomBase32(4096);
    const counts = new Map<string, number>();
    const text = Array.from({ length: 4_000 }, () => randomBase32(25)).join("");
    for (const c of text) counts.set(c, (counts.get(c) ?? 0) + 1);
    expect(counts.size).toBe(32);
    const expected = text.length / 32;
    const chiSquare = [...counts.values()].reduce((sum, n) => sum + (n - expected) ** 2 / expected, 0);
    // 31 degrees of freedom: 99.99th percentile is about 70. One character never drawn scores over 3,000.
    expect(chiSquare).toBeLessThan(70);
  });

  it("serves lengths that do not divide the pool, longer than what is left in it, and longer than the pool", () => {
    for (const n of [1, 7, 26, 100, 4_000, 3, 5_000]) {
      const s = randomBase32(n);
      expect(s).toMatch(new RegExp(`^[0-9a-hjkmnp-tv-z]{${n}}$`));
      // A read past the pool would yield "0"s (undefined & 31): no run of 40 in a row by chance.
      expect(s).not.toMatch(/0{40}/);
    }
  });
});

describe("newId", () => {
  it("is the prefix, an underscore and 26 random base32 characters", () => {
    expect(newId("dec")).toMatch(/^dec_[0-9a-hjkmnp-tv-z]{26}$/);
    expect(newId("agt")).not.toBe(newId("agt"));
  });
});
