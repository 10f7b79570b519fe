import { validationFailed } from "./errors.js";
import { parseInstant } from "./instants.js";
import { findUnstorableText } from "./text.js";

/** A keyset position: rows are ordered by (created_at, id). */
export interface Cursor {
  createdAt: Date;
  id: string;
}

/** Page size from a request: default when 0, else 1..max (422 outside). */
export function pageSize(requested: number, max = 500, fallback = 100): number {
  if (requested === 0) return fallback;
  if (requested < 1 || requested > max) {
    throw validationFailed([{ field: "page_size", code: "out_of_range", message: `must be between 1 and ${max}` }]);
  }
  return requested;
}

/** Encodes the position after the last row of a page. */
export function encodeCursor(c: Cursor): string {
  return Buffer.from(JSON.stringify([c.createdAt.toISOString(), c.id])).toString("base64url");
}

/** Decodes a page token; "" means the first page; anything malformed is a 422. */
export function decodeCursor(token: string): Cursor | null {
  if (token === "") return null;
  try {
    const [t, id] = JSON.parse(Buffer.from(token, "base64url").toString("utf8")) as [unknown, unknown];
    // Only what encodeCursor writes: an instant Postgres can compare, and an id.
    const createdAt = parseInstant(t);
    if (!createdAt || typeof id !== "string" || id.length > 64 || findUnstorableText(id)) throw new Error("bad");
    return { createdAt, id };
  } catch {
    throw validationFailed([{ field: "page_token", code: "invalid_format", message: "not a page token from this API" }]);
  }
}
