import { Counter, Gauge, type Registry } from "prom-client";
import type { WebhookDelivery } from "./webhook-delivery.js";

/** Exposes this process's webhook attempts in `registry` (GET /metrics), read at each scrape: an endpoint failing shows before its webhook is marked failing. */
export function registerWebhookMetrics(registry: Registry, delivery: Pick<WebhookDelivery, "stats">): void {
  const reported = { delivered: 0, retry: 0, failed: 0 };
  new Counter({
    name: "mandate_webhook_attempts_total",
    help: "Webhook delivery attempts by how they ended: delivered (2xx), retry (another attempt is scheduled), failed (the last attempt; the webhook is marked failing).",
    labelNames: ["outcome"],
    registers: [registry],
    collect() {
      const attempts = delivery.stats().attempts;
      for (const outcome of ["delivered", "retry", "failed"] as const) {
        this.inc({ outcome }, attempts[outcome] - reported[outcome]);
        reported[outcome] = attempts[outcome];
      }
    },
  });
  let unrecorded = 0;
  new Counter({
    name: "mandate_webhook_attempts_unrecorded_total",
    help: "Webhook attempts whose result could not be recorded (the database was unreachable, or the lease had lapsed); the delivery is attempted again.",
    registers: [registry],
    collect() {
      const value = delivery.stats().unrecorded;
      this.inc(value - unrecorded);
      unrecorded = value;
    },
  });
  new Gauge({
    name: "mandate_webhook_attempts_in_flight",
    help: "Webhook delivery attempts in flight in this process.",
    registers: [registry],
    collect() {
      this.set(delivery.stats().inFlight);
    },
  });
}
