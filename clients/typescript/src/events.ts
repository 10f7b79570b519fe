import { Webhook, WebhookVerificationError as LibraryVerificationError } from "standardwebhooks";
import { WebhookVerificationError } from "./errors.js";
import type { EventEnvelope } from "./types.js";

/*
 * Events (early access, docs/events.md) on the client side, browser-safe (no node:* import):
 * verifying a webhook delivery (Standard Webhooks, with the `standardwebhooks` package the
 * service signs with) and parsing the Server-Sent Events of `GET /v1alpha/events:watch`.
 *
 * Why SSE rather than Connect server streaming for `watchEvents`: the client speaks /v1 JSON
 * with fetch only and may not import the generated protobuf code (dependency-cruiser's
 * client-self-contained rule); SSE over fetch needs nothing more, reads the same envelope a
 * webhook body carries, and works unchanged in Node 20 and in browsers (where `EventSource`
 * itself could not send the `Authorization` header, hence fetch and a parser here).
 */

/** Seconds a delivery's `webhook-timestamp` may differ from now (the Standard Webhooks tolerance). */
export const WEBHOOK_TOLERANCE_SECONDS = 5 * 60;

/** Headers as a receiver has them: a fetch `Headers`, or Node's `req.headers` (names in any case). */
export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;

/**
 * Verifies one webhook delivery and answers its envelope: `body` exactly as received (the raw
 * bytes or their text, never re-serialised JSON), its headers, and the webhook's `whsec_…`
 * secret. Throws WebhookVerificationError with `detail`:
 * `webhook_headers_missing` (no webhook-id, webhook-timestamp or webhook-signature),
 * `webhook_timestamp_stale` (the timestamp is more than 5 minutes from now, either way: a replay
 * or a skewed clock) or `webhook_signature_invalid` (no signature matches; a wrong secret, or a
 * body or id that changed). Duplicates are the receiver's to drop, by `webhook-id`.
 */
export function verifyWebhook(body: string | Uint8Array, headers: WebhookHeaders, secret: string): EventEnvelope {
  const h = lowerCased(headers);
  const id = h["webhook-id"];
  const timestamp = h["webhook-timestamp"];
  const signature = h["webhook-signature"];
  if (!id || !timestamp || !signature) {
    throw new WebhookVerificationError({ status: 0, detail: "webhook_headers_missing", message: "The webhook-id, webhook-timestamp and webhook-signature headers are all required." });
  }
  const seconds = /^\d{1,15}$/.test(timestamp) ? Number(timestamp) : NaN;
  if (!Number.isFinite(seconds) || Math.abs(Date.now() / 1000 - seconds) > WEBHOOK_TOLERANCE_SECONDS) {
    throw new WebhookVerificationError({
      status: 0,
      detail: "webhook_timestamp_stale",
      message: `webhook-timestamp ${timestamp} is not within ${WEBHOOK_TOLERANCE_SECONDS} s of now.`,
    });
  }
  const text = typeof body === "string" ? body : new TextDecoder("utf-8", { fatal: false }).decode(body);
  let parsed: unknown;
  try {
    parsed = new Webhook(secret).verify(text, { "webhook-id": id, "webhook-timestamp": timestamp, "webhook-signature": signature });
  } catch (err) {
    if (!(err instanceof LibraryVerificationError)) {
      // A secret that is not `whsec_<base64>`, or a signed body that is no JSON: still a delivery to refuse.
      throw new WebhookVerificationError({ status: 0, detail: "webhook_signature_invalid", message: `The delivery could not be verified: ${(err as Error).message}`, cause: err });
    }
    const stale = /timestamp/i.test(err.message);
    throw new WebhookVerificationError({
      status: 0,
      detail: stale ? "webhook_timestamp_stale" : "webhook_signature_invalid",
      message: stale ? `webhook-timestamp ${timestamp} is not within ${WEBHOOK_TOLERANCE_SECONDS} s of now.` : "No webhook-signature matches the body with this secret.",
      cause: err,
    });
  }
  if (typeof parsed !== "object" || parsed === null || typeof (parsed as EventEnvelope).event !== "string" || typeof (parsed as EventEnvelope).event_id !== "string") {
    throw new WebhookVerificationError({ status: 0, detail: "webhook_signature_invalid", message: "The signed body is not an event envelope." });
  }
  return parsed as EventEnvelope;
}

function lowerCased(headers: WebhookHeaders): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  if (typeof Headers !== "undefined" && headers instanceof Headers) {
    headers.forEach((value, key) => (out[key.toLowerCase()] = value));
    return out;
  }
  for (const [key, value] of Object.entries(headers as Record<string, string | string[] | undefined>)) {
    out[key.toLowerCase()] = Array.isArray(value) ? value.join(" ") : value;
  }
  return out;
}

/** One message of a Server-Sent Events stream: an event, or a comment (the stream's heartbeat). */
export type SseMessage = { kind: "event"; id: string | undefined; event: string; data: string } | { kind: "comment"; text: string };

/**
 * An incremental parser of `text/event-stream` (the WHATWG rules this API uses: lines end with
 * LF, CRLF or CR; `field: value`; `data` lines joined with LF; a blank line dispatches; a line
 * starting with `:` is a comment). Feed it decoded text as it arrives; it answers the complete
 * messages so far and keeps the rest.
 */
export class SseParser {
  private buffer = "";
  private id: string | undefined;
  private event = "";
  private data: string[] = [];
  private pendingCR = false;

  push(text: string): SseMessage[] {
    let chunk = text;
    // A CR that ended the previous chunk may be the first half of a CRLF.
    if (this.pendingCR && chunk.startsWith("\n")) chunk = chunk.slice(1);
    this.pendingCR = false;
    this.buffer += chunk;
    const out: SseMessage[] = [];
    for (;;) {
      const m = /\r\n|\n|\r/.exec(this.buffer);
      if (!m) break;
      if (m[0] === "\r" && m.index === this.buffer.length - 1) {
        this.pendingCR = true;
      }
      const line = this.buffer.slice(0, m.index);
      this.buffer = this.buffer.slice(m.index + m[0].length);
      const message = this.line(line);
      if (message) out.push(message);
    }
    return out;
  }

  private line(line: string): SseMessage | undefined {
    if (line === "") {
      if (this.data.length === 0 && this.event === "") return undefined;
      const message: SseMessage = { kind: "event", id: this.id, event: this.event || "message", data: this.data.join("\n") };
      this.event = "";
      this.data = [];
      return message;
    }
    if (line.startsWith(":")) return { kind: "comment", text: line.slice(1).trimStart() };
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") this.data.push(value);
    else if (field === "event") this.event = value;
    else if (field === "id" && !value.includes("\0")) this.id = value;
    return undefined;
  }
}
