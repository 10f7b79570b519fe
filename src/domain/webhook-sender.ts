import http from "node:http";
import https from "node:https";
import { Webhook } from "standardwebhooks";
import { guardedLookup, refusedLiteral } from "./webhook-targets.js";

/** One delivery attempt to make. */
export interface OutgoingDelivery {
  url: string;
  secret: string;
  /** The `webhook-id` header: the delivery's id, the same on every attempt. */
  deliveryId: string;
  /** The envelope JSON, exactly the bytes signed. */
  body: string;
}

/** How one attempt went. */
export interface AttemptResult {
  /** 2xx: acknowledged. */
  acknowledged: boolean;
  /** The receiver's status; 0 when it gave none. */
  status: number;
  latencyMs: number;
  /** Why it failed ("" when acknowledged). */
  error: string;
}

/** Sends one attempt; never throws (a failure is a result). */
export interface WebhookSender {
  send(delivery: OutgoingDelivery): Promise<AttemptResult>;
  close(): void;
}

/** What the HTTP sender is bounded by. */
export interface HttpSenderOptions {
  /** From sending to the end of the receiver's answer (MANDATE_WEBHOOK_TIMEOUT_MS). */
  timeoutMs: number;
  /** Refuse internal targets (production without MANDATE_WEBHOOKS_ALLOW_PRIVATE=1). */
  refuseInternal: boolean;
  /** Sockets per receiver host: as many as attempts in flight, so none waits for a socket inside its timeout. */
  maxSockets: number;
}

/** How much of an answer is read: a receiver's body is never kept, only drained up to this. */
const MAX_RESPONSE_BYTES = 64 * 1024;

/**
 * POSTs signed deliveries as the Standard Webhooks specification describes: `webhook-id`,
 * `webhook-timestamp` (seconds) and `webhook-signature` (`v1,<base64 HMAC-SHA256>`) from the
 * `standardwebhooks` package. No redirect is followed (a 3xx is a failed attempt: the receiver
 * moved, and following would reach a URL nobody subscribed). Connections are kept alive.
 */
export class HttpWebhookSender implements WebhookSender {
  private readonly httpAgent: http.Agent;
  private readonly httpsAgent: https.Agent;
  private readonly signers = new Map<string, Webhook>();

  constructor(private readonly options: HttpSenderOptions) {
    const lookup = guardedLookup(options.refuseInternal);
    this.httpAgent = new http.Agent({ keepAlive: true, maxSockets: options.maxSockets, lookup } as http.AgentOptions);
    this.httpsAgent = new https.Agent({ keepAlive: true, maxSockets: options.maxSockets, lookup } as https.AgentOptions);
  }

  private signer(secret: string): Webhook {
    let signer = this.signers.get(secret);
    if (!signer) {
      // Bounded: secrets are few (at most the webhooks of every organization), and rotate rarely.
      if (this.signers.size > 10_000) this.signers.clear();
      signer = new Webhook(secret);
      this.signers.set(secret, signer);
    }
    return signer;
  }

  send(delivery: OutgoingDelivery): Promise<AttemptResult> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const failed = (status: number, error: string): AttemptResult => ({ acknowledged: false, status, latencyMs: elapsed(), error });
    let url: URL;
    try {
      url = new URL(delivery.url);
    } catch {
      return Promise.resolve(failed(0, "invalid URL"));
    }
    const literal = refusedLiteral(url, this.options.refuseInternal);
    if (literal) return Promise.resolve(failed(0, `refused: ${literal} is an internal address`));
    const now = new Date();
    const body = Buffer.from(delivery.body, "utf8");
    const headers = {
      "content-type": "application/json",
      "content-length": String(body.length),
      "user-agent": "Mandate-Webhooks/1",
      "webhook-id": delivery.deliveryId,
      "webhook-timestamp": String(Math.floor(now.getTime() / 1000)),
      "webhook-signature": this.signer(delivery.secret).sign(delivery.deliveryId, now, delivery.body),
    };
    const secure = url.protocol === "https:";
    return new Promise<AttemptResult>((resolve) => {
      let settled = false;
      const finish = (r: AttemptResult) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(r);
      };
      let req: http.ClientRequest;
      try {
        req = (secure ? https : http).request(url, { method: "POST", headers, agent: secure ? this.httpsAgent : this.httpAgent }, (res) => {
          const status = res.statusCode ?? 0;
          let read = 0;
          res.on("data", (chunk: Buffer) => {
            read += chunk.length;
            // Enough to end the answer normally for a receiver that says a little; a larger body is cut.
            if (read > MAX_RESPONSE_BYTES) res.destroy();
          });
          const done = () => finish(status >= 200 && status < 300 ? { acknowledged: true, status, latencyMs: elapsed(), error: "" } : failed(status, `HTTP ${status}`));
          res.on("end", done);
          // A body cut past the bound still carries the status the receiver chose.
          res.on("close", done);
          res.on("error", () => done());
        });
      } catch (err) {
        // Node refuses some requests before sending (a header or path it will not write).
        return resolve(failed(0, `not sent: ${String(err).slice(0, 200)}`));
      }
      const timer = setTimeout(() => {
        req.destroy();
        finish(failed(0, `timeout after ${this.options.timeoutMs} ms`));
      }, this.options.timeoutMs);
      req.on("error", (err: NodeJS.ErrnoException) => finish(failed(0, err.code === "EINTERNALTARGET" ? err.message : `${err.code ?? "error"}: ${err.message}`.slice(0, 300))));
      req.end(body);
    });
  }

  close(): void {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }
}
