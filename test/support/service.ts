import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import http from "node:http";
import type { DescService } from "@bufbuild/protobuf";
import { createClient, type Client } from "@connectrpc/connect";
import { compressionGzip, createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import pg from "pg";
import pino from "pino";
import { inject } from "vitest";
import { startApp } from "../../src/app.js";
import { loadConfig } from "../../src/config.js";
import { repoRoot, serviceNodeFlags } from "./process.js";

/** The environment variables the service reads (src/config.ts). */
export type ServiceEnv = {
  PORT: string;
  HOST: string;
  DATABASE_URL: string;
  /** Unless overridden, the same as DATABASE_URL: the shared cluster's superuser migrates and serves. */
  MANDATE_MIGRATION_DATABASE_URL: string;
  REDIS_URL: string;
  MANDATE_OPERATOR_KEY: string;
  MANDATE_DATA_DIR: string;
  MANDATE_OPA_PATH: string;
  LOG_LEVEL: string;
  MANDATE_SANDBOX_PER_ADDRESS_PER_HOUR: string;
  MANDATE_SANDBOX_PER_EMAIL_PER_DAY: string;
  MANDATE_SANDBOX_MAX_ORGS: string;
  MANDATE_DATABASE_TIMEOUT_MS: string;
  MANDATE_HEADERS_TIMEOUT_MS: string;
  MANDATE_REQUEST_TIMEOUT_MS: string;
  MANDATE_IDLE_TIMEOUT_MS: string;
  MANDATE_MAX_CONNECTIONS_PER_ADDRESS: string;
  MANDATE_TRUSTED_PROXIES: string;
  NODE_ENV: string;
  MANDATE_WEBHOOKS_ALLOW_PRIVATE: string;
  MANDATE_WEBHOOKS_PER_ORGANIZATION: string;
  MANDATE_WEBHOOK_TIMEOUT_MS: string;
  MANDATE_WEBHOOK_RETRY_SCALE: string;
  MANDATE_WEBHOOK_MAX_IN_FLIGHT: string;
  MANDATE_WEBHOOK_SWEEP_MS: string;
  MANDATE_EVENT_RETENTION_DAYS: string;
  MANDATE_CORS_ORIGINS: string;
};

/** A /v1 answer: status, parsed JSON body (or the raw text when it is not JSON) and headers. */
export interface V1Response<T = any> {
  status: number;
  body: T;
  headers: Headers;
}

/** Options of one /v1 call. A string or byte body is sent as is; anything else as JSON. */
export interface V1Options {
  body?: unknown;
  headers?: Record<string, string>;
  bearer?: string;
}

/** A /v1 JSON client bound to one base URL. */
export type V1Client = (method: string, path: string, options?: V1Options) => Promise<V1Response>;

/**
 * A /v1 client for `baseUrl`: what a curl user sees, nothing more. Each call
 * opens its own connection (no keep-alive pool), so one request that leaves a
 * connection in a bad state cannot make an unrelated later test hang; the
 * connection handling itself is tested in foundation-http.test.ts.
 */
export function createV1Client(baseUrl: string): V1Client {
  return (method, path, options = {}) =>
    new Promise((resolve, reject) => {
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(options.headers ?? {})) headers[k.toLowerCase()] = v;
      let body: Buffer | undefined;
      if (options.body !== undefined) {
        body =
          typeof options.body === "string"
            ? Buffer.from(options.body, "utf8")
            : options.body instanceof Uint8Array
              ? Buffer.from(options.body)
              : Buffer.from(JSON.stringify(options.body), "utf8");
        headers["content-type"] ??= "application/json";
        headers["content-length"] = String(body.length);
      }
      if (options.bearer !== undefined) headers.authorization = `Bearer ${options.bearer}`;
      const req = http.request(new URL(path, baseUrl), { method, headers, agent: false, timeout: 30_000 }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("error", reject);
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          let parsed: unknown = text;
          try {
            parsed = text === "" ? undefined : JSON.parse(text);
          } catch {
            // Leave non-JSON answers as text so a test can say what came back.
          }
          const h = new Headers();
          for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) h.set(k, Array.isArray(v) ? v.join(", ") : v);
          resolve({ status: res.statusCode ?? 0, body: parsed, headers: h });
        });
      });
      req.on("timeout", () => req.destroy(new Error(`${method} ${path}: no answer within 30 s`)));
      req.on("error", reject);
      req.end(body);
    });
}

/** An organization made for a test, with its all-permission key. */
export interface TestOrg {
  organizationId: string;
  apiKey: string;
}

/** A Mandate app running in this process on an ephemeral port. */
export interface TestService {
  baseUrl: string;
  port: number;
  /** The operator key, or undefined when the service was started without one. */
  operatorKey: string | undefined;
  /** The environment it was configured from. */
  env: Record<string, string>;
  v1: V1Client;
  /** A gRPC (HTTP/2, h2c) client of `service`. */
  grpc<S extends DescService>(service: S): Client<S>;
  /** The same with every message gzip-compressed: connect-node serves its calls, never the unary fast path. */
  grpcViaConnectNode<S extends DescService>(service: S): Client<S>;
  /** A Connect-protocol (HTTP/1.1) client of `service`. */
  connect<S extends DescService>(service: S): Client<S>;
  /** A gRPC-Web (HTTP/1.1) client of `service`. */
  grpcWeb<S extends DescService>(service: S): Client<S>;
  /** Creates an organization through the operator key (needs one). */
  newOrg(name?: string): Promise<TestOrg>;
  close(): Promise<void>;
}

/**
 * Headers that send a raw HTTP/2 gRPC call to connect-node instead of the service's unary fast
 * path, which takes only uncompressed calls: gRPC lets a call announce gzip and still flag its
 * messages uncompressed.
 */
export const VIA_CONNECT_NODE: Readonly<Record<string, string>> = { "grpc-encoding": "gzip" };

/** Sandbox limits high enough that suites sharing one database never trip them. */
const HIGH = "100000000";

/** The shared Postgres database of this run (from the global setup). */
export function sharedDatabaseUrl(): string {
  return inject("databaseUrl");
}

/** The shared Redis of this run (from the global setup). */
export function sharedRedisUrl(): string {
  return inject("redisUrl");
}

/** A unique, valid email address, so per-email limits never couple tests. */
export function uniqueEmail(prefix = "dev"): string {
  return `${prefix}-${randomUUID().slice(0, 12)}@example.com`;
}

/**
 * Creates a fresh, empty database in the shared cluster and returns its URL:
 * for tests whose assertions depend on global counts (sandbox limits) or on a
 * never-migrated schema (replicas racing to migrate).
 */
export async function createTestDatabase(prefix = "t"): Promise<string> {
  const base = new URL(sharedDatabaseUrl());
  const name = `${prefix}_${randomBytes(6).toString("hex")}`;
  const client = new pg.Client({ connectionString: base.toString() });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
  base.pathname = `/${name}`;
  return base.toString();
}

/**
 * Starts the app in-process on port 0 against the shared Postgres and Redis,
 * with an operator key, silent logs and sandbox limits out of the way.
 * An override set to `undefined` unsets that variable (e.g. no operator key,
 * no Redis).
 */
export async function startService(
  overrides: Partial<Record<keyof ServiceEnv, string | undefined>> = {},
  options: {
    /** Collects the service's log lines (parsed pino JSON); LOG_LEVEL then defaults to info. */
    logs?: Record<string, unknown>[];
  } = {},
): Promise<TestService> {
  const env: Record<string, string | undefined> = {
    PORT: "0",
    HOST: "127.0.0.1",
    DATABASE_URL: sharedDatabaseUrl(),
    REDIS_URL: sharedRedisUrl(),
    MANDATE_OPERATOR_KEY: `op_${randomBytes(24).toString("base64url")}`,
    LOG_LEVEL: options.logs ? "info" : "silent",
    MANDATE_SANDBOX_PER_ADDRESS_PER_HOUR: HIGH,
    MANDATE_SANDBOX_PER_EMAIL_PER_DAY: HIGH,
    MANDATE_SANDBOX_MAX_ORGS: HIGH,
    ...overrides,
  };
  // The role split is tested where it is set up (test/integration/postgres-roles.test.ts); every
  // other suite migrates and serves as one role, without the warning that says so.
  if (!("MANDATE_MIGRATION_DATABASE_URL" in overrides)) env.MANDATE_MIGRATION_DATABASE_URL = env.DATABASE_URL;
  const defined = Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined));
  const config = loadConfig(defined);
  const logs = options.logs;
  const logger = logs
    ? pino({ level: config.logLevel }, { write: (line: string) => void logs.push(JSON.parse(line) as Record<string, unknown>) })
    : pino({ level: config.logLevel });
  const app = await startApp(config, logger);
  const baseUrl = `http://127.0.0.1:${app.port}`;
  const v1 = createV1Client(baseUrl);
  const grpcTransport = createGrpcTransport({ baseUrl });
  const gzipTransport = createGrpcTransport({ baseUrl, sendCompression: compressionGzip, compressMinBytes: 0 });
  const connectTransport = createConnectTransport({ baseUrl, httpVersion: "1.1" });
  const grpcWebTransport = createGrpcWebTransport({ baseUrl, httpVersion: "1.1" });
  const operatorKey = defined.MANDATE_OPERATOR_KEY;
  let closed = false;
  return {
    baseUrl,
    port: app.port,
    operatorKey,
    env: defined,
    v1,
    grpc: (service) => createClient(service, grpcTransport),
    grpcViaConnectNode: (service) => createClient(service, gzipTransport),
    connect: (service) => createClient(service, connectTransport),
    grpcWeb: (service) => createClient(service, grpcWebTransport),
    async newOrg(name = `Test org ${randomUUID().slice(0, 8)}`) {
      if (!operatorKey) throw new Error("newOrg needs a service started with an operator key");
      const res = await v1("POST", "/v1/organizations", { body: { name }, headers: { "x-service-operator-key": operatorKey } });
      if (res.status !== 200) throw new Error(`creating an organization failed: ${res.status} ${JSON.stringify(res.body)}`);
      return { organizationId: res.body.organization_id, apiKey: res.body.api_key };
    },
    async close() {
      if (closed) return;
      closed = true;
      await app.close();
    },
  };
}

/**
 * The service as its own OS process, started as `npm start` starts it but with node itself
 * loading tsx (`node <flags> --import tsx src/main.ts`: one process, so SIGKILL kills the server,
 * not a wrapper). It listens on PORT=0; the port is read from its "listening" log line.
 */
export async function spawnServiceProcess(env: Record<string, string>): Promise<{ child: ChildProcess; svc: TestService; output: () => string }> {
  let output = "";
  const base: Record<string, string> = {};
  for (const k of ["PATH", "HOME", "TMPDIR", "LANG", "USER"]) if (process.env[k] !== undefined) base[k] = process.env[k]!;
  const child = spawn(process.execPath, [...serviceNodeFlags, "--import", "tsx", "src/main.ts"], {
    cwd: repoRoot,
    env: { ...base, ...env, PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "info" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const keep = (c: Buffer) => {
    output = (output + c.toString()).slice(-20_000);
  };
  child.stdout!.on("data", keep);
  child.stderr!.on("data", keep);
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the service did not start within 60 s:\n${output}`)), 60_000);
    let seen = "";
    const onData = (c: Buffer) => {
      seen += c.toString();
      const m = /"port":(\d+)[^\n]*"msg":"listening"/.exec(seen);
      if (m) {
        clearTimeout(timer);
        child.stdout!.off("data", onData);
        resolve(Number(m[1]));
      }
    };
    child.stdout!.on("data", onData);
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`the service exited (${code ?? signal}) before listening:\n${output}`));
    });
  });
  const baseUrl = `http://127.0.0.1:${port}`;
  const v1 = createV1Client(baseUrl);
  const transport = createGrpcTransport({ baseUrl });
  const operatorKey = env.MANDATE_OPERATOR_KEY!;
  const unused = () => {
    throw new Error("not used");
  };
  const svc: TestService = {
    baseUrl,
    port,
    operatorKey,
    env,
    v1,
    grpc: (service) => createClient(service, transport),
    grpcViaConnectNode: unused,
    connect: unused,
    grpcWeb: unused,
    async newOrg(name = `Process org ${randomUUID().slice(0, 8)}`) {
      const res = await v1("POST", "/v1/organizations", { body: { name }, headers: { "x-service-operator-key": operatorKey } });
      if (res.status !== 200) throw new Error(`creating an organization failed: ${res.status} ${JSON.stringify(res.body)}`);
      return { organizationId: res.body.organization_id, apiKey: res.body.api_key };
    },
    async close() {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((r) => child.once("exit", r));
        child.kill("SIGTERM");
        await exited;
      }
    },
  };
  return { child, svc, output: () => output };
}
