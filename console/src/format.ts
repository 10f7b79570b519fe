import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import type { JsonValue } from "@bufbuild/protobuf";

/** A timestamp in the reader's locale, with its UTC form on hover (callers use <time>). */
export function formatTime(ts: Timestamp | undefined): string {
  if (!ts) return "";
  return timestampDate(ts).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" });
}

/** ISO 8601 of a timestamp, for <time dateTime>. */
export function isoTime(ts: Timestamp | undefined): string {
  return ts ? timestampDate(ts).toISOString() : "";
}

/** An amount with its currency as the Intent gave them ("12,000 USD"), or "" without one. */
export function formatAmount(intent: Record<string, JsonValue> | undefined): string {
  const amount = intent?.amount;
  if (typeof amount !== "number" && typeof amount !== "string") return "";
  const currency = typeof intent?.currency === "string" ? intent.currency : "";
  const n = typeof amount === "number" ? amount.toLocaleString(undefined, { maximumFractionDigits: 20 }) : amount;
  return currency ? `${n} ${currency}` : String(n);
}

/** The Intent document's members in its own order (docs/architecture.md, The Intent path); any other member after them. */
const INTENT_ORDER = ["agent_id", "action", "amount", "currency", "counterparty", "resource", "context", "requested_at", "nonce"];

/**
 * A recorded Intent as indented JSON, its members in the Intent's own order and its context keys
 * sorted: the API returns it as stored, whose member order is the database's (shortest name
 * first), not the order anyone wrote or signed. The exact signed bytes are pinned by the evidence
 * record's intent_sha256.
 */
export function intentText(intent: Record<string, JsonValue> | undefined): string {
  const doc = intent ?? {};
  const ordered: Record<string, JsonValue> = {};
  for (const key of [...INTENT_ORDER, ...Object.keys(doc).filter((k) => !INTENT_ORDER.includes(k))]) {
    if (!Object.hasOwn(doc, key)) continue;
    const value = doc[key]!;
    ordered[key] = key === "context" && value !== null && typeof value === "object" && !Array.isArray(value)
      ? Object.fromEntries(Object.keys(value).sort().map((k) => [k, value[k]!]))
      : value;
  }
  return JSON.stringify(ordered, null, 2);
}
