import { readFile } from "node:fs/promises";
import { createSecureContext } from "node:tls";
import pino, { type Logger } from "pino";
import type { Config } from "./config.js";
import { Credentials } from "./domain/credentials.js";
import { Organizations } from "./domain/organizations.js";
import { Agents } from "./domain/agents.js";
import { EvidenceLog } from "./domain/evidence-log.js";
import { Principals } from "./domain/principals.js";
import { AgentSignatures } from "./domain/signatures.js";
import { Decisions } from "./domain/decisions.js";
import { Capabilities } from "./domain/capabilities.js";
import { Integrations } from "./domain/integrations.js";
import { Execution } from "./domain/execution.js";
import { ExecutionReportService, ReconciliationService } from "./gen/mandate/v1alpha/execution_pb.js";
import { ExecutionReportServiceImpl } from "./services/execution.js";
import { ReconciliationServiceImpl } from "./services/reconciliation.js";
import { IntegrationService } from "./gen/mandate/v1/integrations_pb.js";
import { IntegrationServiceImpl } from "./services/integrations.js";
import { CapabilityService } from "./gen/mandate/v1/capabilities_pb.js";
import { CapabilityServiceImpl } from "./services/capabilities.js";
import { RedisCapabilityMirror } from "./storage/redis/capability-mirror.js";
import { Intents } from "./domain/intents.js";
import { AuthorityGraphs } from "./domain/authority-graph.js";
import { Policies } from "./domain/policies.js";
import { PolicyEvaluation } from "./domain/policy-evaluation.js";
import { PolicyTrials } from "./domain/policy-trials.js";
import { PolicyEngine } from "./policy/engine.js";
import { registerPolicyMetrics } from "./policy/metrics.js";
import { AuthorityGraphService } from "./gen/mandate/v1/authority_graph_pb.js";
import { DecisionService } from "./gen/mandate/v1/decisions_pb.js";
import { IntentService } from "./gen/mandate/v1/intents_pb.js";
import { PolicyService } from "./gen/mandate/v1/policies_pb.js";
import { DecisionServiceImpl } from "./services/decisions.js";
import { IntentServiceImpl } from "./services/intents.js";
import { PolicyServiceImpl } from "./services/policies.js";
import { AuthorityGraphServiceImpl } from "./services/authority-graph.js";
import { AgentService } from "./gen/mandate/v1/agents_pb.js";
import { EvidenceService } from "./gen/mandate/v1/evidence_pb.js";
import { PrincipalService } from "./gen/mandate/v1/principals_pb.js";
import { AgentServiceImpl } from "./services/agents.js";
import { EvidenceServiceImpl } from "./services/evidence.js";
import { PrincipalServiceImpl } from "./services/principals.js";
import { OrganizationService, SandboxService } from "./gen/mandate/v1/organizations_pb.js";
import { OrganizationServiceImpl } from "./services/organizations.js";
import { SandboxServiceImpl } from "./services/sandbox.js";
import { createDatabase } from "./storage/postgres/database.js";
import { EvidenceChain } from "./storage/postgres/evidence-chain.js";
import { PostgresEvidenceStore } from "./storage/postgres/evidence.js";
import { PostgresLedger } from "./storage/postgres/ledger.js";
import { PostgresAgentStore } from "./storage/postgres/agents.js";
import { PostgresIntegrationStore } from "./storage/postgres/integrations.js";
import { PostgresExecutionStore } from "./storage/postgres/execution.js";
import { PostgresDecisionStore } from "./storage/postgres/decisions.js";
import { PostgresCapabilityStore } from "./storage/postgres/capabilities.js";
import { PostgresOrganizationStore } from "./storage/postgres/organizations.js";
import { PostgresPolicyStore } from "./storage/postgres/policies.js";
import { PostgresPrincipalStore } from "./storage/postgres/principals.js";
import { PostgresEventLogStore } from "./storage/postgres/events.js";
import { PostgresEventNotifications } from "./storage/postgres/event-notifications.js";
import { PostgresWebhookStore } from "./storage/postgres/webhooks.js";
import { Webhooks } from "./domain/webhooks.js";
import { WebhookDelivery } from "./domain/webhook-delivery.js";
import { HttpWebhookSender } from "./domain/webhook-sender.js";
import { registerWebhookMetrics } from "./domain/webhook-metrics.js";
import { WebhookService } from "./gen/mandate/v1alpha/events_pb.js";
import { WebhookServiceImpl } from "./services/webhooks.js";
import { DEFAULT_EVENT_STREAM_LIMITS, EventStreams } from "./domain/event-stream.js";
import { EventService } from "./gen/mandate/v1alpha/events_pb.js";
import { EventServiceImpl } from "./services/events.js";
import { startEmbeddedPostgres, type EmbeddedDatabase } from "./storage/postgres/embedded.js";
import { migrate } from "./storage/postgres/migrate.js";
import { RequestPipeline } from "./transport/pipeline.js";
import { Metrics } from "./transport/metrics.js";
import { createDomainMetrics } from "./domain/metrics.js";
import { PostgresOperationalReadings } from "./storage/postgres/readings.js";
import { createClientAddressOf } from "./transport/client-address.js";
import { listen } from "./transport/server.js";
import { createConsoleRoute } from "./transport/console-assets.js";
import { createDocsRoute } from "./transport/api-docs.js";
import { createCors } from "./transport/cors.js";
import { openApiDocument } from "./transport/openapi.js";
import type { RegisteredService } from "./transport/transcoder.js";
import { opaPath } from "./policy/opa.js";
import { endpointOf, listenUrls, needs, packageVersion } from "./startup.js";

/** A running Mandate service. */
export interface App {
  port: number;
  logger: Logger;
  /** Stops listening, closes pools and stops the embedded Postgres if this process started it. */
  close(): Promise<void>;
}

/** Builds the object graph from the configuration and starts listening. Wiring only. */
export async function startApp(config: Config, logger: Logger = pino({ level: config.logLevel })): Promise<App> {
  let embedded: EmbeddedDatabase | undefined;
  let databaseUrl = config.databaseUrl;
  // Migrations run as the schema's owner role, the service as a role that owns nothing
  // (docs/architecture.md, The evidence chain: Roles).
  let migrationUrl = config.migrationDatabaseUrl;
  if (!databaseUrl) {
    logger.info({ data_dir: config.dataDir }, "DATABASE_URL unset: starting embedded Postgres");
    embedded = await needs("the embedded Postgres", `MANDATE_DATA_DIR=${config.dataDir}`, () =>
      startEmbeddedPostgres(config.dataDir, {
        log: (msg) => logger.debug({ postgres: msg }),
        warn: (msg) => logger.warn(msg),
        // close() stops it, last.
        ownerStops: true,
      }),
    );
    databaseUrl = embedded.serviceUrl;
    migrationUrl = embedded.ownerUrl;
  } else if (!migrationUrl) {
    logger.warn("MANDATE_MIGRATION_DATABASE_URL unset: migrations run as DATABASE_URL's role, which then owns the schema; the service should connect as a role that owns nothing (README, External Postgres)");
  }
  // Every wait on this pool is bounded (503 `unavailable` past it); migrations run on a pool of
  // their own without that bound, since they may wait for another replica's.
  const db = createDatabase(databaseUrl, undefined, config.databaseTimeoutMs);
  // One LISTEN connection per process (opened on first use), shared by every reader of events;
  // the evidence chain announces each commit on it, after the commit (docs/events.md, Waking).
  const notifications = new PostgresEventNotifications(databaseUrl, {
    connectTimeoutMs: config.databaseTimeoutMs,
    onError: (err) => logger.warn({ err }, "event notifications: the listening connection failed; readers poll until it is back"),
  });
  try {
    let evidence: EvidenceLog | undefined;
    // The first contact with each database names it when it fails (an operator reads
    // "the database (DATABASE_URL, db:5432) is unreachable", not a bare ECONNREFUSED).
    const where = (variable: string, url: string) => (embedded ? `embedded, MANDATE_DATA_DIR=${config.dataDir}` : `${variable}, ${endpointOf(url)}`);
    await needs("the database", where("DATABASE_URL", databaseUrl), () => db.ping());
    const migrations = createDatabase(migrationUrl ?? databaseUrl, 2, 0);
    if (migrationUrl) {
      await needs("the migration database", where("MANDATE_MIGRATION_DATABASE_URL", migrationUrl), () => migrations.ping()).catch(async (err: unknown) => {
        await migrations.close();
        throw err;
      });
    }
    // The role the service logs in as gets its grants (none when it is the one migrating).
    const serviceRole = migrationUrl ? (await db.pool.query<{ role: string }>("SELECT current_user AS role")).rows[0]!.role : undefined;
    const applied = await migrate(migrations, async () => {
      evidence = await EvidenceLog.open(new PostgresEvidenceStore(db));
    }, serviceRole).finally(() => migrations.close());
    if (applied.length) logger.info({ applied }, "migrations applied");
    if (!evidence) throw new Error("evidence log did not open");
    const signing = evidence;
    const chain = new EvidenceChain(db, () => signing.keys, (organizationIds) => notifications.announce(organizationIds));
    const organizationStore = new PostgresOrganizationStore(db, chain);
    const principalStore = new PostgresPrincipalStore(db);
    const policyStore = new PostgresPolicyStore(db, chain);
    const agentStore = new PostgresAgentStore(db, chain);
    const integrationStore = new PostgresIntegrationStore(db, chain);
    const decisionStore = new PostgresDecisionStore(db, chain);
    const capabilityStore = new PostgresCapabilityStore(db);
    // Metrics are counted where things are recorded (docs/deployment.md, Metrics).
    const metrics = new Metrics();
    const domainMetrics = createDomainMetrics(metrics.registry, { readings: new PostgresOperationalReadings(db), pool: () => db.poolStats() });
    const ledger = new PostgresLedger(db, chain, domainMetrics.ledger);

    // A bundle past the evaluation time limit is quarantined: evaluated in a worker thread from then on (docs/architecture.md, Policies).
    const engine = new PolicyEngine({
      timeoutMs: config.evaluationTimeoutMs,
      onQuarantine: (event) => logger.warn({ policy_bundle: event }, "policy bundle quarantined: its evaluations run in a worker thread from now on"),
    });
    const policies = new Policies(policyStore);
    const evaluation = new PolicyEvaluation(policyStore, engine, ({ digest, cause }) =>
      logger.error({ err: cause, policy_bundle: digest }, "policy evaluation failed; answered 503 evaluation_unavailable"),
    );
    const graphs = new AuthorityGraphs(policyStore, principalStore);
    await needs("the opa CLI", `MANDATE_OPA_PATH=${opaPath()}`, () => policies.prepareStarter());
    // The Redis mirror is told about committed state changes in the same request (docs/architecture.md, Consume paths).
    const mirror = config.redisUrl ? RedisCapabilityMirror.connect(config.redisUrl) : null;
    // Redis is not needed to serve (Postgres decides alone), so an unreachable one is reported, not fatal.
    const redisUp = mirror?.connected(2_500);
    const mirrorError = (err: unknown) => logger.warn({ err }, "redis mirror unavailable; Postgres decides alone");
    const organizations = new Organizations(organizationStore, config.limits, policies.starterPolicy, async (id, state) => {
      await mirror?.setOrganization(id, state).catch(mirrorError);
    });
    const credentials = new Credentials(organizationStore, config.operatorKey);
    const signatures = new AgentSignatures(agentStore);
    const agents = new Agents(agentStore, evidence, signatures, async (a) => {
      await mirror?.setAgent(a.organizationId, a.agentId, a.state).catch(mirrorError);
    });
    const intents = new Intents(decisionStore, ledger, signatures, evaluation, config.limits);
    const decisions = new Decisions(decisionStore, signatures, config.limits.requestedAtSkewSeconds);
    const trials = new PolicyTrials(evaluation, decisionStore, agentStore, principalStore, integrationStore);
    const execution = new Execution(new PostgresExecutionStore(db, chain), integrationStore, decisionStore, capabilityStore);
    const eventLog = new PostgresEventLogStore(db);
    // The live stream reads the same log, within the same retention window (docs/events.md).
    const eventStreams = new EventStreams(eventLog, notifications, { ...DEFAULT_EVENT_STREAM_LIMITS, retentionDays: config.webhooks.retentionDays }, (caller) =>
      credentials.recheck(caller),
    );
    // Webhooks are delivered by every replica; leases keep them from sending twice (docs/webhooks.md).
    const webhookStore = new PostgresWebhookStore(db, chain);
    const hooks = config.webhooks;
    // Attempts in flight in this process, over every webhook; the sender keeps as many sockets per
    // receiver host, so an attempt never waits for a socket inside its own timeout.
    const attemptsInFlight = 64;
    const delivery = new WebhookDelivery(
      webhookStore,
      eventLog,
      notifications,
      new HttpWebhookSender({ timeoutMs: hooks.timeoutMs, refuseInternal: hooks.refuseInternal, maxSockets: attemptsInFlight }),
      {
        retentionDays: hooks.retentionDays,
        retryScale: hooks.retryScale,
        maxInFlightPerWebhook: hooks.maxInFlightPerWebhook,
        // Half of a process's attempts at most to one organization: receivers of one that stop
        // answering hold their attempts to the timeout, and must not hold up everyone else's.
        maxInFlightPerOrganization: attemptsInFlight / 2,
        maxInFlight: attemptsInFlight,
        // Well past the attempt's own timeout: a lease lapses only when its holder died.
        leaseMs: 2 * hooks.timeoutMs + 5_000,
        sweepMs: hooks.sweepMs,
        pageSize: 500,
      },
      (err, what) => logger.warn({ err }, `${what} failed; the next sweep tries again`),
    );
    const webhooks = new Webhooks(webhookStore, { maxPerOrganization: hooks.maxPerOrganization, refuseInternal: hooks.refuseInternal }, (org) => delivery.touch(org));
    const services: RegisteredService[] = [
      { service: SandboxService, impl: new SandboxServiceImpl(organizations) as never },
      { service: OrganizationService, impl: new OrganizationServiceImpl(organizations) as never },
      { service: PrincipalService, impl: new PrincipalServiceImpl(new Principals(principalStore)) as never },
      { service: AgentService, impl: new AgentServiceImpl(agents, config.limits.requestedAtSkewSeconds) as never },
      { service: EvidenceService, impl: new EvidenceServiceImpl(evidence) as never },
      { service: IntentService, impl: new IntentServiceImpl(intents) as never },
      { service: DecisionService, impl: new DecisionServiceImpl(decisions) as never },
      { service: PolicyService, impl: new PolicyServiceImpl(policies, trials) as never },
      { service: IntegrationService, impl: new IntegrationServiceImpl(
          new Integrations(integrationStore, async (org, id, state) => {
            await mirror?.setIntegration(org, id, state).catch(mirrorError);
          }),
        ) as never },
      { service: ExecutionReportService, impl: new ExecutionReportServiceImpl(execution) as never },
      { service: ReconciliationService, impl: new ReconciliationServiceImpl(execution) as never },
      { service: CapabilityService, impl: new CapabilityServiceImpl(new Capabilities(capabilityStore, decisionStore, agentStore, ledger, evidence, mirror, mirrorError, domainMetrics.capability), evidence) as never },
      { service: AuthorityGraphService, impl: new AuthorityGraphServiceImpl(graphs) as never },
      { service: WebhookService, impl: new WebhookServiceImpl(webhooks) as never },
      { service: EventService, impl: new EventServiceImpl(eventStreams) as never },
    ];
    const log = evidence;
    const pipeline = new RequestPipeline(credentials, logger, metrics, createClientAddressOf(config.trustedProxies));
    registerPolicyMetrics(pipeline.metrics.registry, engine);
    registerWebhookMetrics(pipeline.metrics.registry, delivery);
    // Built once from the annotations; a pure function of the descriptors.
    const openapi = openApiDocument(services.map((s) => s.service));
    // Read once: a renewed certificate takes a restart (or a terminating proxy: docs/deployment.md).
    const tlsFiles = config.tls;
    const tls = tlsFiles
      ? await needs("the TLS certificate and key", `MANDATE_TLS_CERT=${tlsFiles.certPath}, MANDATE_TLS_KEY=${tlsFiles.keyPath}`, async () => {
          const files = { cert: await readFile(tlsFiles.certPath), key: await readFile(tlsFiles.keyPath) };
          createSecureContext(files); // a malformed or mismatched pair fails here, by name
          return files;
        })
      : undefined;
    const server = await needs("the listening socket", `HOST=${config.host} PORT=${config.port}`, () => listen({
      host: config.host,
      port: config.port,
      services,
      pipeline,
      bodyLimit: config.limits.requestBodyBytes,
      connections: config.connections,
      tls,
      // The built console (console/dist), read once here: a build made later needs a restart.
      console: createConsoleRoute(config.consoleDir),
      // The API reference (Redoc, from its npm package) over /openapi.json.
      docs: createDocsRoute(),
      cors: createCors(config.corsOrigins),
      plainRoutes: {
        "/.well-known/jwks.json": () => log.jwks(),
        "/openapi.json": async () => openapi,
        "/healthz": async () => ({ status: "ok" }),
        // Ready means the database answers; a 503 takes the replica out of rotation.
        "/readyz": async () => {
          await db.ping();
          return { status: "ready" };
        },
        "/metrics": () => pipeline.metrics.text(),
      },
    }));
    delivery.start();
    const version = packageVersion();
    const urls = listenUrls(tls ? "https" : "http", config.host, server.port);
    const storage = embedded ? `embedded Postgres in ${config.dataDir}` : `external Postgres at ${endpointOf(databaseUrl)}`;
    const consume = config.redisUrl ? `Redis at ${endpointOf(config.redisUrl)}` : "Postgres only (REDIS_URL unset)";
    // The one line an operator reads first; "listening" and `port` are what scripts and tests wait for.
    logger.info(
      {
        port: server.port,
        urls,
        version,
        storage: embedded ? { mode: "embedded", data_dir: config.dataDir } : { mode: "external", database: endpointOf(databaseUrl) },
        consume: config.redisUrl ? { mode: "redis", redis: endpointOf(config.redisUrl) } : { mode: "postgres" },
        events: true,
        webhooks: true,
        tls: Boolean(tls),
        summary: `Mandate ${version} on ${urls.join(", ")}; storage: ${storage}; consume: ${consume}; events and webhooks on`,
      },
      "listening",
    );
    if (mirror && !(await redisUp)) {
      logger.warn(
        { err: mirror.lastError, redis: endpointOf(config.redisUrl!) },
        `Redis (REDIS_URL, ${endpointOf(config.redisUrl!)}) is unreachable: ${mirror.lastError?.message ?? "no connection yet"}; capabilities are consumed in Postgres alone until it answers`,
      );
    }
    return {
      port: server.port,
      logger,
      async close() {
        // Open event streams end first (503 over gRPC and Connect; an SSE response ends), so
        // they do not hold the drain; clients resume elsewhere with their cursor.
        eventStreams.close();
        await server.close();
        // Attempts in flight are recorded before the pool closes (each bounded by its timeout).
        await delivery.close();
        await notifications.close();
        await engine.close();
        await mirror?.close();
        await db.close();
        await embedded?.stop();
      },
    };
  } catch (err) {
    await notifications.close();
    await db.close().catch(() => undefined);
    await embedded?.stop().catch(() => undefined);
    throw err;
  }
}
