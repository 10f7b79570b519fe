import path from "node:path";
import { projectRoot } from "./policy/opa.js";
import type { Limits } from "./domain/limits.js";
import { DEFAULT_DATABASE_TIMEOUT_MS } from "./storage/postgres/database.js";
import { DEFAULT_CONNECTION_LIMITS, type ConnectionLimits } from "./transport/connection-limits.js";
import { parseCorsOrigins } from "./transport/cors.js";
import { DEFAULT_EVALUATION_TIMEOUT_MS } from "./policy/engine.js";

export type { Limits };

/**
 * Everything the service reads from its environment, read once at start-up.
 * (MANDATE_OPA_PATH is resolved by src/policy/opa.ts, which the CLI and tests share.)
 */
export interface Config {
  port: number;
  host: string;
  /** Unset: the service runs an embedded Postgres in `dataDir`. */
  databaseUrl: string | undefined;
  /** The schema owner's URL, which migrations use (MANDATE_MIGRATION_DATABASE_URL); unset: `databaseUrl`. */
  migrationDatabaseUrl: string | undefined;
  /** Unset: single-use consume runs as one SQL statement in Postgres. */
  redisUrl: string | undefined;
  dataDir: string;
  /** The built console served at /console (MANDATE_CONSOLE_DIR, default console/dist; `npm run build:console`). */
  consoleDir: string;
  /** Unset: the operator key is refused outright. */
  operatorKey: string | undefined;
  logLevel: string;
  /** The bound on every wait on Postgres (connecting, a pooled connection, a statement): past it, 503 `unavailable`. */
  databaseTimeoutMs: number;
  /** The per-evaluation time limit of a policy bundle (ms): past it, 503 `evaluation_unavailable` and the bundle is quarantined. */
  evaluationTimeoutMs: number;
  limits: Limits;
  /** Proxies (addresses or CIDR ranges) whose X-Forwarded-For names the client; empty: none. */
  trustedProxies: string[];
  /** Connection deadlines and the per-address connection cap (slowloris). */
  connections: ConnectionLimits;
  /** Webhook subscriptions and delivery (docs/webhooks.md). */
  webhooks: WebhookConfig;
  /** MANDATE_TLS_CERT and MANDATE_TLS_KEY (PEM files): serve HTTPS with ALPN h2 and http/1.1, every protocol on the one port; unset: cleartext. */
  tls: { certPath: string; keyPath: string } | undefined;
  /** Origins whose browser scripts may call the API (MANDATE_CORS_ORIGINS, comma-separated; `*` for any); empty: none. */
  corsOrigins: string[];
}

/** How webhooks are bounded and delivered (docs/webhooks.md). */
export interface WebhookConfig {
  /** Webhooks per organization (MANDATE_WEBHOOKS_PER_ORGANIZATION, default 20). */
  maxPerOrganization: number;
  /** Refuse loopback, private and other internal targets: in production (NODE_ENV=production) unless MANDATE_WEBHOOKS_ALLOW_PRIVATE=1. */
  refuseInternal: boolean;
  /** One attempt, from sending to the end of the answer (MANDATE_WEBHOOK_TIMEOUT_MS, default 10,000). */
  timeoutMs: number;
  /** Scales the Standard Webhooks retry schedule (MANDATE_WEBHOOK_RETRY_SCALE, default 1; tests use a small fraction). */
  retryScale: number;
  /** Deliveries of one webhook in flight at once, across replicas (MANDATE_WEBHOOK_MAX_IN_FLIGHT, default 4). */
  maxInFlightPerWebhook: number;
  /** The safety-net sweep's period (MANDATE_WEBHOOK_SWEEP_MS, default 5,000). */
  sweepMs: number;
  /** Events and deliveries older than this many days are neither enqueued nor kept (MANDATE_EVENT_RETENTION_DAYS, default 7). */
  retentionDays: number;
}

function intFromEnv(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new Error(`${name} must be a non-negative integer, got ${JSON.stringify(raw)}`);
  }
  return value;
}

/** A bound: as intFromEnv, and never 0 (no bound). */
function positiveIntFromEnv(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const value = intFromEnv(env, name, fallback);
  if (value === 0) throw new Error(`${name} must be a positive integer, got 0`);
  return value;
}

/** MANDATE_TRUSTED_PROXIES, comma-separated addresses or CIDR ranges; each is checked when the server starts (transport/client-address.ts). */
function trustedProxiesFromEnv(env: NodeJS.ProcessEnv): string[] {
  return (env.MANDATE_TRUSTED_PROXIES ?? "").split(",").map((p) => p.trim()).filter((p) => p !== "");
}

/**
 * The connection limits; the header deadline may not exceed the request deadline (Node refuses it).
 * Trusted proxies are exempt from the per-address cap.
 */
function connectionLimitsFromEnv(env: NodeJS.ProcessEnv): ConnectionLimits {
  const d = DEFAULT_CONNECTION_LIMITS;
  const limits: ConnectionLimits = {
    headersTimeoutMs: positiveIntFromEnv(env, "MANDATE_HEADERS_TIMEOUT_MS", d.headersTimeoutMs),
    requestTimeoutMs: positiveIntFromEnv(env, "MANDATE_REQUEST_TIMEOUT_MS", d.requestTimeoutMs),
    idleTimeoutMs: positiveIntFromEnv(env, "MANDATE_IDLE_TIMEOUT_MS", d.idleTimeoutMs),
    maxPerAddress: positiveIntFromEnv(env, "MANDATE_MAX_CONNECTIONS_PER_ADDRESS", d.maxPerAddress),
    trustedProxies: trustedProxiesFromEnv(env),
  };
  if (limits.headersTimeoutMs > limits.requestTimeoutMs) {
    throw new Error(`MANDATE_HEADERS_TIMEOUT_MS (${limits.headersTimeoutMs}) must not exceed MANDATE_REQUEST_TIMEOUT_MS (${limits.requestTimeoutMs})`);
  }
  return limits;
}

/** A positive finite number (a scale factor); throws naming the variable otherwise. */
function positiveNumberFromEnv(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number, got ${JSON.stringify(raw)}`);
  return value;
}

function webhookConfigFromEnv(env: NodeJS.ProcessEnv): WebhookConfig {
  return {
    maxPerOrganization: positiveIntFromEnv(env, "MANDATE_WEBHOOKS_PER_ORGANIZATION", 20),
    refuseInternal: env.NODE_ENV === "production" && env.MANDATE_WEBHOOKS_ALLOW_PRIVATE !== "1",
    timeoutMs: positiveIntFromEnv(env, "MANDATE_WEBHOOK_TIMEOUT_MS", 10_000),
    retryScale: positiveNumberFromEnv(env, "MANDATE_WEBHOOK_RETRY_SCALE", 1),
    maxInFlightPerWebhook: positiveIntFromEnv(env, "MANDATE_WEBHOOK_MAX_IN_FLIGHT", 4),
    sweepMs: positiveIntFromEnv(env, "MANDATE_WEBHOOK_SWEEP_MS", 5_000),
    retentionDays: positiveIntFromEnv(env, "MANDATE_EVENT_RETENTION_DAYS", 7),
  };
}

/** Both TLS files or neither: half a TLS configuration would otherwise serve cleartext silently. */
function tlsFromEnv(env: NodeJS.ProcessEnv): Config["tls"] {
  const cert = env.MANDATE_TLS_CERT || undefined;
  const key = env.MANDATE_TLS_KEY || undefined;
  if (!cert && !key) return undefined;
  if (!cert || !key) throw new Error(`MANDATE_TLS_CERT and MANDATE_TLS_KEY must be set together (only ${cert ? "MANDATE_TLS_CERT" : "MANDATE_TLS_KEY"} is)`);
  return { certPath: path.resolve(cert), keyPath: path.resolve(key) };
}

/** Reads the configuration; throws with the variable's name when a value is malformed. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  return {
    port: intFromEnv(env, "PORT", 8080),
    host: env.HOST ?? "127.0.0.1",
    databaseUrl: env.DATABASE_URL || undefined,
    migrationDatabaseUrl: env.MANDATE_MIGRATION_DATABASE_URL || undefined,
    redisUrl: env.REDIS_URL || undefined,
    // Data belongs to where the service is run from, never to where its package is installed.
    dataDir: path.resolve(env.MANDATE_DATA_DIR ?? ".mandate"),
    consoleDir: path.resolve(env.MANDATE_CONSOLE_DIR || path.join(projectRoot(), "console", "dist")),
    operatorKey: env.MANDATE_OPERATOR_KEY || undefined,
    logLevel: env.LOG_LEVEL ?? "info",
    databaseTimeoutMs: positiveIntFromEnv(env, "MANDATE_DATABASE_TIMEOUT_MS", DEFAULT_DATABASE_TIMEOUT_MS),
    evaluationTimeoutMs: positiveIntFromEnv(env, "MANDATE_EVALUATION_TIMEOUT_MS", DEFAULT_EVALUATION_TIMEOUT_MS),
    connections: connectionLimitsFromEnv(env),
    trustedProxies: trustedProxiesFromEnv(env),
    webhooks: webhookConfigFromEnv(env),
    tls: tlsFromEnv(env),
    corsOrigins: parseCorsOrigins(env.MANDATE_CORS_ORIGINS),
    limits: {
      intentBodyBytes: 64 * 1024,
      requestBodyBytes: 2 * 1024 * 1024,
      requestedAtSkewSeconds: 300,
      sandboxPerAddressPerHour: intFromEnv(env, "MANDATE_SANDBOX_PER_ADDRESS_PER_HOUR", 10),
      sandboxPerEmailPerDay: intFromEnv(env, "MANDATE_SANDBOX_PER_EMAIL_PER_DAY", 3),
      sandboxMaxOrgs: intFromEnv(env, "MANDATE_SANDBOX_MAX_ORGS", 10_000),
    },
  };
}
