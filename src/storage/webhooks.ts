/*
 * Webhook subscriptions and their deliveries (docs/webhooks.md). Events are not stored here: they
 * are projected from the evidence log (storage/events.ts); this store keeps, per webhook, how far
 * into that log deliveries were made, and the deliveries themselves as a queue that any number of
 * replicas work on at once without sending anything twice.
 */
import type { EvidenceEntry } from "./evidence.js";

/** A subscription as stored (its secret included: only the domain decides when to show it). */
export interface WebhookRow {
  webhook_id: string;
  organization_id: string;
  url: string;
  /** Event names delivered; empty: every event. */
  events: string[];
  description: string;
  secret: string;
  state: "active" | "failing";
  created_at: Date;
}

/** One recorded attempt. */
export interface AttemptRow {
  /** ISO 8601 UTC with three fractional digits. */
  attempted_at: string;
  /** The receiver's HTTP status; 0 when it gave none. */
  status: number;
  latency_ms: number;
  error: string;
}

/** A delivery as listed. */
export interface DeliveryRow {
  delivery_id: string;
  webhook_id: string;
  event_id: string;
  event: string;
  state: "pending" | "delivered" | "failed";
  attempts: AttemptRow[];
  /** Null once the delivery is delivered or failed. */
  next_attempt_at: Date | null;
  created_at: Date;
}

/** A delivery to insert: one event for one webhook. */
export interface NewDelivery {
  delivery_id: string;
  event_id: string;
  event: string;
  occurred_at: Date;
  /** The envelope JSON every attempt sends, byte for byte. */
  body: string;
}

/** A webhook claimed for enqueueing, with where its cursor stands. */
export interface ClaimedCursor {
  webhook_id: string;
  events: string[];
  cursor_seq: number;
}

/** What enqueueing decided for one claimed webhook: its new deliveries and its new cursor. */
export interface CursorAdvance {
  webhook_id: string;
  cursor_seq: number;
  deliveries: NewDelivery[];
}

/** A delivery leased to this process for one attempt. */
export interface LeasedDelivery {
  delivery_id: string;
  lease_id: string;
  webhook_id: string;
  organization_id: string;
  url: string;
  secret: string;
  event_id: string;
  body: string;
  /** Attempts made on the schedule before this one. */
  scheduled_attempts: number;
  redelivery: boolean;
}

/** How an attempt ends the lease. */
export type AttemptOutcome =
  | { kind: "delivered" }
  | { kind: "retry"; at: Date }
  /** The last attempt failed: the delivery is failed and its webhook failing; `evidence` is appended when the webhook was active until now. */
  | { kind: "failed"; evidence: EvidenceEntry }
  /** A redelivery that failed: back to failed, nothing else changes. */
  | { kind: "redelivery_failed" };

/**
 * Webhooks and their deliveries.
 *
 * Guarantees, for any implementation:
 * - **Once per event and webhook.** At most one delivery exists for a (webhook, event_id), however
 *   many processes enqueue at once.
 * - **No skipped event.** A cursor moves only in the same atomic step that inserts the deliveries
 *   of every record it passes, and only the process holding the webhook's claim moves it.
 * - **One holder per delivery.** A leased delivery is not leased again until its lease lapses;
 *   an attempt's result is recorded only by the holder of the current lease.
 * - **Bounded in flight.** At most `maxInFlight` deliveries of one webhook are leased at a time.
 *
 * Every method throws UnavailableError (storage/errors.ts) when the store cannot be reached.
 */
export interface WebhookStore {
  /**
   * Creates a webhook whose cursor starts at the organization's evidence head now (it receives
   * events recorded from now on). Returns null, writing nothing, when the organization already
   * has `maxPerOrganization` webhooks.
   */
  create(row: Omit<WebhookRow, "state" | "created_at">, maxPerOrganization: number): Promise<WebhookRow | null>;
  /** The organization's webhooks, oldest first (deleted ones never). */
  list(organizationId: string): Promise<WebhookRow[]>;
  /** One webhook of the organization; null when absent, deleted or another organization's. */
  get(organizationId: string, webhookId: string): Promise<WebhookRow | null>;
  /** Marks the webhook deleted (its pending deliveries are never attempted); false when it was not there. */
  delete(organizationId: string, webhookId: string): Promise<boolean>;
  /** Sets a new secret and the state `active`; null when absent. */
  rotateSecret(organizationId: string, webhookId: string, secret: string): Promise<WebhookRow | null>;

  /** Organizations that have a webhook whose cursor is behind their evidence head. */
  behind(): Promise<string[]>;
  /** Organizations that have at least one webhook. */
  organizations(): Promise<string[]>;
  /**
   * Claims the organization's webhooks that no other process is enqueueing for (the others are
   * skipped, not waited for) and reads the organization's evidence head once they are claimed;
   * when a claimed cursor is behind that head, calls `plan` with them and the head (every record
   * up to it has committed), then in the same atomic step inserts the planned deliveries (an
   * existing one for the same webhook and event is kept) and moves each cursor forward. `plan`
   * may read other stores; nothing is written if it throws. Returns how many deliveries were
   * inserted.
   */
  enqueue(organizationId: string, plan: (claimed: ClaimedCursor[], head: number) => Promise<CursorAdvance[]>): Promise<number>;

  /**
   * Leases up to `limit` due deliveries (pending, next attempt now or past, not leased, webhook
   * not deleted) for `leaseMs`, each webhook's oldest events first, never more than
   * `maxInFlight` of one webhook nor `maxInFlightPerOrganization` of one organization leased at a
   * time, so one organization's unanswering receivers cannot take every attempt. The webhook
   * bound is strict across replicas (a webhook is leased by one at a time); the organization's is
   * a fairness bound that two replicas leasing at the same instant may each fill.
   */
  lease(limit: number, leaseMs: number, maxInFlight: number, maxInFlightPerOrganization: number): Promise<LeasedDelivery[]>;
  /**
   * Records an attempt and its outcome, if `lease_id` still holds the delivery (false, writing
   * nothing, when the lease lapsed and another process may have taken it). A `failed` outcome
   * marks the webhook failing and, if it was active, appends `evidence` in the same step; a
   * `delivered` one sets a failing webhook active again, so its next outage is told again.
   */
  record(deliveryId: string, leaseId: string, attempt: AttemptRow, outcome: AttemptOutcome): Promise<boolean>;

  /** The webhook's deliveries, newest event first, after `afterEventId` when given. */
  deliveries(organizationId: string, webhookId: string, limit: number, afterEventId?: string): Promise<DeliveryRow[]>;
  /**
   * Makes the delivery due now: a pending one keeps its schedule; a delivered or failed one gets
   * one more attempt outside the schedule. Null when the delivery (or its webhook) is absent.
   */
  redeliver(organizationId: string, webhookId: string, deliveryId: string): Promise<DeliveryRow | null>;
  /** Deletes delivered and failed deliveries created before `before` (never one still pending); returns how many. */
  trim(before: Date, limit: number): Promise<number>;
}
