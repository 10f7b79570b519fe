import { randomBytes } from "node:crypto";
import type { OrgCaller } from "../base/caller.js";
import { notFound, validationFailed, type FieldError } from "../base/errors.js";
import { pageSize } from "../base/pagination.js";
import type { DeliveryRow, WebhookRow, WebhookStore } from "../storage/webhooks.js";
import { isEventType } from "./events.js";
import { newId } from "./ids.js";
import { parseWebhookUrl, targetProblem } from "./webhook-targets.js";

export type { AttemptRow, DeliveryRow } from "../storage/webhooks.js";

/** A webhook as the API shows it: the secret only in the answers that create or rotate it. */
export type WebhookView = Omit<WebhookRow, "secret"> & { secret?: string };

/** What bounds webhook subscriptions (docs/webhooks.md). */
export interface WebhookLimits {
  /** Webhooks per organization; one more is 422 `validation_failed`. */
  maxPerOrganization: number;
  /** Refuse loopback, private and other internal targets (production, unless MANDATE_WEBHOOKS_ALLOW_PRIVATE=1). */
  refuseInternal: boolean;
}

const MAX_DESCRIPTION = 500;
const MAX_DELIVERY_PAGE = 100;
const DEFAULT_DELIVERY_PAGE = 50;

/**
 * A new `whsec_` secret: base64 of 32 random bytes, the form Standard Webhooks libraries accept
 * (24 to 64 bytes).
 */
function newSecret(): string {
  return `whsec_${randomBytes(32).toString("base64")}`;
}

const view = (row: WebhookRow, showSecret = false): WebhookView => {
  const { secret, ...rest } = row;
  return showSecret ? { ...rest, secret } : rest;
};

/** A page token of the deliveries listing: the last event id shown. */
function encodeToken(eventId: string): string {
  return Buffer.from(eventId, "utf8").toString("base64url");
}

function decodeToken(token: string): string | undefined {
  if (token === "") return undefined;
  const eventId = Buffer.from(token, "base64url").toString("utf8");
  if (!/^evt_[0-9a-z_]{1,80}$/.test(eventId)) throw validationFailed([{ field: "page_token", code: "invalid_format", message: "not a page token from this API" }]);
  return eventId;
}

/**
 * Webhook subscriptions of an organization (ORG_ADMIN): create, list, get, delete, rotate the
 * secret, list deliveries and redeliver. Delivery itself is WebhookDelivery's
 * (domain/webhook-delivery.ts).
 */
export class Webhooks {
  constructor(
    private readonly store: WebhookStore,
    private readonly limits: WebhookLimits,
    /** Told when an organization gains a webhook or a redelivery, so this process's deliverer acts at once. */
    private readonly onChange: (organizationId: string) => void = () => undefined,
  ) {}

  /**
   * Subscribes `url` to `events` (all when empty) from now on. 422 `validation_failed` for a URL
   * that is not http(s) or, when internal targets are refused, resolves to one (`url`); an unknown
   * event name (`events[i]`); a description over 500 characters; or the organization's limit of
   * webhooks reached (`url`). The answer holds the secret, which is never shown again.
   */
  async create(caller: OrgCaller, request: { url: string; events: readonly string[]; description: string }): Promise<WebhookView> {
    const errors: FieldError[] = [];
    const url = parseWebhookUrl(request.url);
    if (!(url instanceof URL)) errors.push(url);
    request.events.forEach((e, i) => {
      if (!isEventType(e)) errors.push({ field: `events[${i}]`, code: "invalid_enum", message: `unknown event name ${JSON.stringify(e.slice(0, 64))}` });
    });
    if (request.description.length > MAX_DESCRIPTION) errors.push({ field: "description", code: "too_long", message: `at most ${MAX_DESCRIPTION} characters` });
    if (errors.length) throw validationFailed(errors);
    const target = url as URL;
    const problem = await targetProblem(target, this.limits.refuseInternal);
    if (problem) throw validationFailed([{ field: "url", code: "internal_target", message: problem }]);
    const row = await this.store.create(
      {
        webhook_id: newId("whk"),
        organization_id: caller.organizationId,
        url: target.toString(),
        events: [...new Set(request.events)],
        description: request.description,
        secret: newSecret(),
      },
      this.limits.maxPerOrganization,
    );
    if (!row) throw validationFailed([{ field: "url", code: "limit_reached", message: `an organization has at most ${this.limits.maxPerOrganization} webhooks` }]);
    this.onChange(caller.organizationId);
    return view(row, true);
  }

  /** The organization's webhooks, oldest first, without secrets. */
  async list(caller: OrgCaller): Promise<WebhookView[]> {
    return (await this.store.list(caller.organizationId)).map((r) => view(r));
  }

  /** One webhook, without its secret; 404 when absent or another organization's. */
  async get(caller: OrgCaller, webhookId: string): Promise<WebhookView> {
    const row = await this.store.get(caller.organizationId, webhookId);
    if (!row) throw notFound("Webhook");
    return view(row);
  }

  /** Deletes a webhook; its pending deliveries are never attempted. 404 when absent. */
  async delete(caller: OrgCaller, webhookId: string): Promise<void> {
    if (!(await this.store.delete(caller.organizationId, webhookId))) throw notFound("Webhook");
  }

  /** A new secret, shown in this answer only; the webhook is active again. The old secret signs only attempts already in flight. */
  async rotateSecret(caller: OrgCaller, webhookId: string): Promise<WebhookView> {
    const row = await this.store.rotateSecret(caller.organizationId, webhookId, newSecret());
    if (!row) throw notFound("Webhook");
    return view(row, true);
  }

  /** The webhook's deliveries with their attempts, newest event first; pages of 1..100 (default 50). */
  async deliveries(caller: OrgCaller, webhookId: string, requestedPageSize: number, pageToken: string): Promise<{ deliveries: DeliveryRow[]; nextPageToken: string }> {
    const size = pageSize(requestedPageSize, MAX_DELIVERY_PAGE, DEFAULT_DELIVERY_PAGE);
    const after = decodeToken(pageToken);
    if (!(await this.store.get(caller.organizationId, webhookId))) throw notFound("Webhook");
    const rows = await this.store.deliveries(caller.organizationId, webhookId, size + 1, after);
    const page = rows.slice(0, size);
    return { deliveries: page, nextPageToken: rows.length > size ? encodeToken(page[page.length - 1]!.event_id) : "" };
  }

  /**
   * Sends a delivery's event again, now, with the same webhook-id: a delivered or failed delivery
   * gets one attempt outside the retry schedule; a pending one is attempted now and keeps its
   * schedule. 404 when the webhook or delivery is absent.
   */
  async redeliver(caller: OrgCaller, webhookId: string, deliveryId: string): Promise<DeliveryRow> {
    const row = await this.store.redeliver(caller.organizationId, webhookId, deliveryId);
    if (!row) throw notFound("Delivery");
    this.onChange(caller.organizationId);
    return row;
  }
}
