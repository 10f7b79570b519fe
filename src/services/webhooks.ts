import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { DeliveryRow, WebhookView, Webhooks } from "../domain/webhooks.js";
import type { WebhookService } from "../gen/mandate/v1alpha/events_pb.js";
import { orgCaller } from "./context.js";
import { enumCodec, ts } from "./convert.js";

const states = enumCodec(["active", "failing"] as const, "webhook state");
const deliveryStates = enumCodec(["pending", "delivered", "failed"] as const, "delivery state");

const webhookMessage = (w: WebhookView) => ({
  webhookId: w.webhook_id,
  url: w.url,
  events: w.events,
  description: w.description,
  state: states.toProto(w.state),
  secret: w.secret ?? "",
  createdAt: ts(w.created_at),
});

const deliveryMessage = (d: DeliveryRow) => ({
  deliveryId: d.delivery_id,
  webhookId: d.webhook_id,
  eventId: d.event_id,
  event: d.event,
  state: deliveryStates.toProto(d.state),
  attempts: d.attempts.map((a) => ({ attemptedAt: ts(new Date(a.attempted_at)), status: a.status, latencyMs: a.latency_ms, error: a.error })),
  nextAttemptAt: ts(d.next_attempt_at),
  createdAt: ts(d.created_at),
});

/** WebhookService (early access): subscriptions and their deliveries (docs/webhooks.md). */
export class WebhookServiceImpl implements ServiceImpl<typeof WebhookService> {
  constructor(private readonly webhooks: Webhooks) {}

  async createWebhook(req: { url: string; events: string[]; description: string }, ctx: HandlerContext) {
    return webhookMessage(await this.webhooks.create(orgCaller(ctx), req));
  }

  async listWebhooks(_req: unknown, ctx: HandlerContext) {
    return { webhooks: (await this.webhooks.list(orgCaller(ctx))).map(webhookMessage) };
  }

  async getWebhook(req: { webhookId: string }, ctx: HandlerContext) {
    return webhookMessage(await this.webhooks.get(orgCaller(ctx), req.webhookId));
  }

  async deleteWebhook(req: { webhookId: string }, ctx: HandlerContext) {
    await this.webhooks.delete(orgCaller(ctx), req.webhookId);
    return {};
  }

  async rotateWebhookSecret(req: { webhookId: string }, ctx: HandlerContext) {
    return webhookMessage(await this.webhooks.rotateSecret(orgCaller(ctx), req.webhookId));
  }

  async listWebhookDeliveries(req: { webhookId: string; pageSize: number; pageToken: string }, ctx: HandlerContext) {
    const page = await this.webhooks.deliveries(orgCaller(ctx), req.webhookId, req.pageSize, req.pageToken);
    return { deliveries: page.deliveries.map(deliveryMessage), nextPageToken: page.nextPageToken };
  }

  async redeliverWebhookDelivery(req: { webhookId: string; deliveryId: string }, ctx: HandlerContext) {
    return deliveryMessage(await this.webhooks.redeliver(orgCaller(ctx), req.webhookId, req.deliveryId));
  }
}
