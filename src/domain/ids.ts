import { randomBase32 } from "../base/random.js";

/** A new opaque id such as `agt_5x2k…`: a type prefix and 26 random base32 characters (130 bits), so ids are unguessable. */
export function newId(prefix: string): string {
  return `${prefix}_${randomBase32(26)}`;
}
