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
