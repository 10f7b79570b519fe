import type { EventLogStore, EventNotifications } from "../storage/events.js";
import type { AttemptOutcome, ClaimedCursor, CursorAdvance, LeasedDelivery, WebhookStore } from "../storage/webhooks.js";
import { kindsOf, projectEvents, type EventType } from "./events.js";
import { newId } from "./ids.js";
import type { WebhookSender } from "./webhook-sender.js";

/**
 * The Standard Webhooks retry schedule: the delay before each attempt, the first immediate, then
 * about 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h. After the eighth attempt fails the delivery is
 * failed.
 */
export const RETRY_SCHEDULE_MS: readonly number[] = [0, 5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000];

/** Each delay is spread by up to this fraction either way, so endpoints that failed together are not retried together. */
const JITTER = 0.2;

/**
 * The delay before the next scheduled attempt after `failedAttempts` (1..) attempts failed, scaled
 * by `scale` (MANDATE_WEBHOOK_RETRY_SCALE; 1 in production) and jittered; null when the schedule
 * is exhausted.
 */
export function retryDelayMs(failedAttempts: number, scale: number, random: () => number = Math.random): number | null {
  const base = RETRY_SCHEDULE_MS[failedAttempts];
  if (base === undefined) return null;
  return Math.round(base * scale * (1 - JITTER + 2 * JITTER * random()));
}

/** How deliveries run (docs/webhooks.md). */
export interface DeliveryOptions {
  /** Events older than this are never enqueued, and deliveries older than this are trimmed (MANDATE_EVENT_RETENTION_DAYS). */
  retentionDays: number;
  /** Scales the retry schedule (MANDATE_WEBHOOK_RETRY_SCALE): 1 in production, small in tests. */
  retryScale: number;
  /** Deliveries of one webhook in flight at a time, across every replica (MANDATE_WEBHOOK_MAX_IN_FLIGHT). */
  maxInFlightPerWebhook: number;
  /** Deliveries of one organization in flight at a time, across every replica: what the others are always left. */
  maxInFlightPerOrganization: number;
  /** Attempts in flight in this process, over every webhook. */
  maxInFlight: number;
  /** How long a leased delivery is held: past the attempt timeout, so only a process that died loses it. */
  leaseMs: number;
  /** The safety net: how often every organization behind is enqueued and due deliveries leased without a wake-up (a lost NOTIFY, another replica's webhook or retries, a replica that died). */
  sweepMs: number;
  /** Evidence records read per enqueue step. */
  pageSize: number;
}

/** Counts since start, for GET /metrics (domain/webhook-metrics.ts). */
export interface DeliveryStats {
  /** Attempts by how they ended: acknowledged (2xx), to be retried, or the last one failed. */
  attempts: { delivered: number; retry: number; failed: number };
  /** Attempts whose result could not be recorded (made again when their lease lapses). */
  unrecorded: number;
  /** Attempts in flight in this process now. */
  inFlight: number;
}

const DAY_MS = 86_400_000;
/** How often old deliveries are trimmed, and how many per statement. */
const TRIM_EVERY_MS = 600_000;
const TRIM_BATCH = 1_000;

/** Runs `pass` when kicked, one pass at a time; kicks during a pass make one more pass after it. */
class Coalesced {
  private running: Promise<void> | null = null;
  private again = false;
  closed = false;

  constructor(private readonly pass: () => Promise<void>) {}

  kick(): void {
    if (this.closed) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = (async () => {
      do {
        this.again = false;
        await this.pass();
      } while (this.again && !this.closed);
    })().finally(() => (this.running = null));
  }

  /** Resolves once no pass is running. */
  async idle(): Promise<void> {
    await this.running;
  }
}

/**
 * Delivers the organizations' events to their webhooks, in every replica at once without sending
 * twice (docs/webhooks.md, Delivery):
 * 1. **Enqueue.** Woken by the event notifications (a commit in this process at once, another
 *    replica's through NOTIFY) for an organization that has webhooks, or by the sweep, it claims
 *    that organization's webhook cursors (FOR UPDATE SKIP LOCKED: a replica
 *    that finds them claimed leaves them to the one that has them), reads the evidence records
 *    after the lowest cursor, projects them to events (domain/events.ts), and in the same
 *    transaction inserts one delivery per subscribed event (unique per webhook and event) and
 *    moves each cursor.
 * 2. **Lease and send.** It leases due deliveries (each webhook's oldest first, at most
 *    `maxInFlightPerWebhook` of one webhook in flight across replicas), POSTs each, and records
 *    the attempt with its outcome: delivered (2xx), retry at the schedule's next time, or failed
 *    after the last, which marks the webhook failing and appends `webhook.failing` evidence in
 *    the same transaction, so a WebhookFailing event tells the organization.
 * At least once: an attempt whose result could not be recorded (a crash, a lapsed lease) is made
 * again with the same `webhook-id`, which receivers use to drop duplicates.
 * The two steps run as two loops, so freeing a slot leases the next delivery without waiting
 * behind an enqueue, and steady traffic never delays a lease.
 */
export class WebhookDelivery {
  /** Organizations with webhooks, as last read (the sweep refreshes it; a creation here adds at once). */
  private watched = new Set<string>();
  private readonly dirty = new Set<string>();
  private sweepAll = true;
  private closed = false;
  private readonly enqueuing = new Coalesced(() => this.enqueuePass());
  private readonly leasing = new Coalesced(() => this.leasePass());
  private sweepTimer: NodeJS.Timeout | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private retryAt = 0;
  private trimTimer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;
  private readonly inFlight = new Set<Promise<void>>();
  private readonly counts = { delivered: 0, retry: 0, failed: 0, unrecorded: 0 };

  constructor(
    private readonly store: WebhookStore,
    private readonly log: EventLogStore,
    private readonly notifications: EventNotifications,
    private readonly sender: WebhookSender,
    private readonly options: DeliveryOptions,
    private readonly onError: (err: unknown, what: string) => void = () => undefined,
  ) {}

  /** Starts listening and delivering. */
  start(): void {
    this.unsubscribe = this.notifications.subscribeAll((organizationId) => {
      if (organizationId === null) this.sweepAll = true;
      else if (this.watched.has(organizationId)) this.dirty.add(organizationId);
      else return;
      this.enqueuing.kick();
    });
    // Its own interval, never pushed back by wake-ups: a busy organization must not starve the sweep.
    this.sweepTimer = setInterval(() => {
      this.sweepAll = true;
      this.enqueuing.kick();
      this.leasing.kick();
    }, this.options.sweepMs);
    this.sweepTimer.unref();
    // Once soon after start (a replica may not live 10 minutes), then every 10 minutes.
    this.trimTimer = setTimeout(() => {
      void this.trim();
      this.trimTimer = setInterval(() => void this.trim(), TRIM_EVERY_MS);
      this.trimTimer.unref();
    }, this.options.sweepMs);
    this.trimTimer.unref();
    this.enqueuing.kick();
    // Deliveries already due (retries, leases a previous process left) need no new event.
    this.leasing.kick();
  }

  /** An organization gained a webhook or a redelivery here: act now rather than at the next sweep. */
  touch(organizationId: string): void {
    this.watched.add(organizationId);
    this.dirty.add(organizationId);
    this.enqueuing.kick();
    this.leasing.kick();
  }

  /** What this process has done so far. */
  stats(): DeliveryStats {
    const { delivered, retry, failed, unrecorded } = this.counts;
    return { attempts: { delivered, retry, failed }, unrecorded, inFlight: this.inFlight.size };
  }

  /** Stops waking, then waits for the attempts in flight to be recorded (each is bounded by the attempt timeout). */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.sweepTimer);
    clearTimeout(this.retryTimer);
    // clearInterval clears a timeout too (one id space).
    clearInterval(this.trimTimer);
    this.unsubscribe?.();
    this.enqueuing.closed = true;
    this.leasing.closed = true;
    await Promise.all([this.enqueuing.idle(), this.leasing.idle()]);
    await Promise.all([...this.inFlight]);
    this.sender.close();
  }

  /** Enqueues for the organizations woken (all behind ones on a sweep), then has what it enqueued leased. */
  private async enqueuePass(): Promise<void> {
    try {
      if (this.sweepAll) {
        this.sweepAll = false;
        this.watched = new Set(await this.store.organizations());
        for (const id of await this.store.behind()) this.dirty.add(id);
      }
      const orgs = [...this.dirty];
      this.dirty.clear();
      let enqueued = 0;
      for (const organizationId of orgs) {
        if (this.closed) return;
        enqueued += await this.enqueue(organizationId);
      }
      if (enqueued > 0) this.leasing.kick();
    } catch (err) {
      // The store is unreachable or a statement failed: the sweep tries again.
      this.onError(err, "enqueueing webhook deliveries");
    }
  }

  private async leasePass(): Promise<void> {
    try {
      await this.leaseAndSend();
    } catch (err) {
      this.onError(err, "leasing webhook deliveries");
    }
  }

  /** Wakes at `at` (a retry recorded here falls due then), unless an earlier wake is already set. */
  private wakeAt(at: Date): void {
    if (this.closed) return;
    const when = at.getTime();
    if (this.retryTimer !== undefined && this.retryAt <= when) return;
    clearTimeout(this.retryTimer);
    this.retryAt = when;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      this.leasing.kick();
    }, Math.max(0, when - Date.now()));
    this.retryTimer.unref();
  }

  /** Enqueues the organization's new events for its webhooks, going on while pages are full; returns how many deliveries it inserted. */
  private async enqueue(organizationId: string): Promise<number> {
    let full = true;
    let inserted = 0;
    while (full && !this.closed) {
      full = false;
      inserted += await this.store.enqueue(organizationId, async (claimed, head) => {
        const plan = await this.plan(organizationId, claimed, head);
        full = plan.full;
        return plan.advances;
      });
    }
    return inserted;
  }

  /** `head` was read before the records: every record up to it has committed, so the read below sees them all. */
  private async plan(organizationId: string, claimed: ClaimedCursor[], head: number): Promise<{ advances: CursorAdvance[]; full: boolean }> {
    const from = Math.min(...claimed.map((c) => c.cursor_seq));
    if (head <= from) return { advances: [], full: false };
    const wantsAll = claimed.some((c) => c.events.length === 0);
    const kinds = wantsAll ? undefined : kindsOf(new Set(claimed.flatMap((c) => c.events as EventType[])));
    const since = new Date(Date.now() - this.options.retentionDays * DAY_MS);
    const records = await this.log.after(organizationId, from, since, this.options.pageSize, kinds);
    const full = records.length === this.options.pageSize;
    // A short page read everything up to the head (records of other kinds, or past retention, are
    // passed over); a full one only up to its last record.
    const reached = full ? records[records.length - 1]!.seq : Math.max(head, records[records.length - 1]?.seq ?? 0);
    const events = records.map((r) => ({ seq: r.seq, events: projectEvents(r) }));
    const advances = claimed.map((c) => ({
      webhook_id: c.webhook_id,
      cursor_seq: Math.max(c.cursor_seq, reached),
      deliveries: events
        .filter((r) => r.seq > c.cursor_seq && r.seq <= reached)
        .flatMap((r) => r.events)
        .filter((e) => c.events.length === 0 || c.events.includes(e.event))
        .map((e) => ({ delivery_id: newId("msg"), event_id: e.event_id, event: e.event, occurred_at: new Date(e.occurred_at), body: JSON.stringify(e) })),
    }));
    return { advances, full };
  }

  /** Leases what is due and sends it, until nothing more can be leased now. */
  private async leaseAndSend(): Promise<void> {
    while (!this.closed) {
      const room = this.options.maxInFlight - this.inFlight.size;
      if (room <= 0) return;
      const leased = await this.store.lease(room, this.options.leaseMs, this.options.maxInFlightPerWebhook, this.options.maxInFlightPerOrganization);
      for (const d of leased) {
        const p: Promise<void> = this.attempt(d).finally(() => {
          this.inFlight.delete(p);
          // A slot of its webhook is free: the next delivery may go.
          this.leasing.kick();
        });
        this.inFlight.add(p);
      }
      // Fewer than asked: every webhook with something due was considered, and each is at its bound.
      if (leased.length < room) return;
    }
  }

  private async attempt(d: LeasedDelivery): Promise<void> {
    const attemptedAt = new Date();
    // A sender never throws by contract; if one did, the attempt fails rather than the process.
    const result = await this.sender
      .send({ url: d.url, secret: d.secret, deliveryId: d.delivery_id, body: d.body })
      .catch((err: unknown) => ({ acknowledged: false, status: 0, latencyMs: Date.now() - attemptedAt.getTime(), error: `send failed: ${String(err).slice(0, 200)}` }));
    let outcome: AttemptOutcome;
    if (result.acknowledged) outcome = { kind: "delivered" };
    else if (d.redelivery) outcome = { kind: "redelivery_failed" };
    else {
      const failed = d.scheduled_attempts + 1;
      const delay = retryDelayMs(failed, this.options.retryScale);
      outcome =
        delay === null
          ? {
              kind: "failed",
              evidence: {
                organizationId: d.organization_id,
                kind: "webhook.failing",
                subjectId: d.webhook_id,
                payload: { webhook_id: d.webhook_id, delivery_id: d.delivery_id, event_id: d.event_id, attempts: failed, last_status: result.status, last_error: result.error },
              },
            }
          : { kind: "retry", at: new Date(Date.now() + delay) };
    }
    try {
      const recorded = await this.store.record(
        d.delivery_id,
        d.lease_id,
        { attempted_at: attemptedAt.toISOString(), status: result.status, latency_ms: result.latencyMs, error: result.error },
        outcome,
      );
      if (!recorded) this.counts.unrecorded++;
      else this.counts[outcome.kind === "delivered" ? "delivered" : outcome.kind === "retry" ? "retry" : "failed"]++;
      // Retries recorded by another replica are its own timer's; one that died leaves them to the sweep.
      if (recorded && outcome.kind === "retry") this.wakeAt(outcome.at);
    } catch (err) {
      // Not recorded: the lease lapses and the attempt is made again (at least once).
      this.counts.unrecorded++;
      this.onError(err, "recording a webhook attempt");
    }
  }

  private async trim(): Promise<void> {
    const before = new Date(Date.now() - this.options.retentionDays * DAY_MS);
    try {
      while (!this.closed && (await this.store.trim(before, TRIM_BATCH)) === TRIM_BATCH);
    } catch (err) {
      this.onError(err, "trimming webhook deliveries");
    }
  }
}
