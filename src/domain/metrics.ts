import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { LedgerObserver } from "../storage/ledger.js";
import type { OperationalReadings } from "../storage/readings.js";

/** Where the scrape-time figures come from (storage/readings.ts, the pool). */
export interface DomainMetricSources {
  readings: OperationalReadings;
  pool: () => { total: number; idle: number; waiting: number };
}

/** What the recording paths tell the metrics: the ledger's observer and the capability outcomes. */
export interface DomainMetrics {
  ledger: LedgerObserver;
  capability: (operation: "issue" | "verify", result: string) => void;
}

/**
 * Domain metrics in `registry` (GET /metrics): counted where things are recorded (the ledger
 * after a commit, the capability domain's issue and verify), and read at scrape time where a
 * count would be a query (pending reviews, webhook lag) or is the pool's own.
 */
export function createDomainMetrics(registry: Registry, sources: DomainMetricSources): DomainMetrics {
  const decisions = new Counter({
    name: "mandate_decisions_total",
    help: "Decisions durable with their evidence, by outcome and reason.",
    labelNames: ["outcome", "reason"] as const,
    registers: [registry],
  });
  const capabilities = new Counter({
    name: "mandate_capability_operations_total",
    help: "Capability issues and verifications by result: issued, consumed, or the error code (capability_constraint_mismatch, capability_consumed, capability_expired, ...).",
    labelNames: ["operation", "result"] as const,
    registers: [registry],
  });
  const groupSize = new Histogram({
    name: "mandate_ledger_group_size",
    help: "Items per group commit of the ledger (each group is one statement or transaction with its evidence records), by kind.",
    labelNames: ["kind"] as const,
    buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256],
    registers: [registry],
  });
  const groupSeconds = new Histogram({
    name: "mandate_ledger_group_commit_seconds",
    help: "Duration of one group commit of the ledger, from its start to its commit (or failure), by kind.",
    labelNames: ["kind"] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 3],
    registers: [registry],
  });
  // A reading that fails (the database is down) leaves its gauge without a value for that scrape.
  const readGauge = (name: string, help: string, read: () => Promise<number>) =>
    new Gauge({
      name,
      help,
      registers: [registry],
      async collect() {
        this.reset();
        try {
          this.set(await read());
        } catch {
          // /readyz and the request metrics already say the database is unavailable.
        }
      },
    });
  readGauge("mandate_reviews_pending", "HUMAN_REVIEW decisions still PENDING, over every organization.", () => sources.readings.pendingReviews());
  readGauge(
    "mandate_webhook_delivery_lag_seconds",
    "Seconds the most overdue pending webhook delivery has been due (0 when none is overdue): how far delivery is behind, across replicas.",
    () => sources.readings.webhookDeliveryLagSeconds(),
  );
  new Gauge({
    name: "mandate_db_pool_connections",
    help: "This process's Postgres pool: connections in use, idle, and callers waiting for one.",
    labelNames: ["state"] as const,
    registers: [registry],
    collect() {
      const p = sources.pool();
      this.set({ state: "in_use" }, p.total - p.idle);
      this.set({ state: "idle" }, p.idle);
      this.set({ state: "waiting" }, p.waiting);
    },
  });
  return {
    ledger: {
      group(kind, size, seconds) {
        groupSize.observe({ kind }, size);
        groupSeconds.observe({ kind }, seconds);
      },
      decisionRecorded(outcome, reason) {
        decisions.inc({ outcome, reason });
      },
    },
    capability(operation, result) {
      capabilities.inc({ operation, result });
    },
  };
}
