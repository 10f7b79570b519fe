import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createClient } from "redis";

import type { CapabilityMirror, LiveStates, MirroredCapability, MirrorVerdict } from "../capability-mirror.js";

const CONSUME = readFileSync(new URL("./consume.lua", import.meta.url), "utf8");
const CONSUME_SHA = createHash("sha1").update(CONSUME).digest("hex");

/**
 * How long a command may go unanswered before the caller stops waiting for it. node-redis's
 * own command timeout stops counting once a command is written, so a server that accepts
 * connections but never answers (frozen, overloaded) would hold every caller.
 */
const DEADLINE_MS = 250;
/** After a command missed its deadline, the mirror is not asked again for this long: callers go straight to Postgres. */
const PAUSE_MS = 1000;

/** The mirror did not answer in time, or is paused after such a miss; the caller falls back to Postgres. */
export class MirrorTimeoutError extends Error {
  constructor(what: string) {
    super(`redis mirror: ${what}`);
    this.name = "MirrorTimeoutError";
  }
}

type Client = ReturnType<typeof createClient>;

/**
 * The Redis side of the single-use consume: a mirror of the lifecycle states a
 * Capability depends on, and a consumed marker per Capability, checked and set
 * by one Lua script. Every key of one organization shares its hash tag, so the
 * script stays atomic on Redis Cluster. Postgres remains the durable arbiter.
 */
export class RedisCapabilityMirror implements CapabilityMirror {
  /** performance.now() before which no command is sent (see PAUSE_MS). */
  private pausedUntil = 0;

  private constructor(private readonly client: Client) {}

  /**
   * `command()`, or MirrorTimeoutError when it is not answered within DEADLINE_MS (it may still
   * run later: Redis answers a connection's commands in order, so a later release on the same
   * connection still follows it) or while the mirror is paused after such a miss.
   */
  private async bounded<T>(command: () => Promise<T>, evenWhenPaused = false): Promise<T> {
    if (!evenWhenPaused && performance.now() < this.pausedUntil) throw new MirrorTimeoutError("paused after an unanswered command");
    const pending = command();
    pending.catch(() => undefined); // answered (or failed) after the deadline: nobody is waiting
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        this.pausedUntil = performance.now() + PAUSE_MS;
        reject(new MirrorTimeoutError(`no answer within ${DEADLINE_MS} ms`));
      }, DEADLINE_MS);
    });
    try {
      return await Promise.race([pending, deadline]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Starts connecting in the background and returns at once: the service must
   * start and serve while Redis is down. Commands fail fast while disconnected
   * (callers fall back to Postgres) and the client keeps reconnecting.
   */
  static connect(url: string): RedisCapabilityMirror {
    const client = createClient({
      url,
      disableOfflineQueue: true,
      socket: { connectTimeout: 2000, reconnectStrategy: (retries) => Math.min(100 * 2 ** retries, 2000) },
    });
    const mirror = new RedisCapabilityMirror(client);
    client.on("error", (err: Error) => {
      mirror.lastError = err;
    });
    client.connect().catch(() => undefined);
    return mirror;
  }

  /** The connection's last failure, for the start-up report of an unreachable Redis. */
  lastError: Error | undefined;

  /**
   * Whether the connection is up within `timeoutMs`. Start-up reports an unreachable Redis by
   * name and serves anyway (consumes fall back to Postgres), so this never throws.
   */
  async connected(timeoutMs: number): Promise<boolean> {
    if (this.client.isReady) return true;
    return new Promise<boolean>((resolve) => {
      const onReady = () => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.client.off("ready", onReady);
        resolve(false);
      }, timeoutMs);
      this.client.once("ready", onReady);
    });
  }

  private key(organizationId: string, kind: string, id = ""): string {
    return `mandate:{${organizationId}}:${kind}${id ? `:${id}` : ""}`;
  }

  /** Runs the consume script for one capability. */
  async consume(c: MirroredCapability): Promise<MirrorVerdict> {
    const keys = [
      this.key(c.organizationId, "org"),
      this.key(c.organizationId, "agent", c.agentId),
      this.key(c.organizationId, "integration", c.integrationId ?? "none"),
      this.key(c.organizationId, "cap", c.capabilityId),
    ];
    const args = [String(Math.max(1, c.ttlMs)), c.integrationId ? "1" : "0"];
    try {
      return (await this.bounded(() => this.client.evalSha(CONSUME_SHA, { keys, arguments: args }))) as MirrorVerdict;
    } catch (err) {
      if (!String((err as Error).message).includes("NOSCRIPT")) throw err;
      return (await this.bounded(() => this.client.eval(CONSUME, { keys, arguments: args }))) as MirrorVerdict;
    }
  }

  /** Writes the live states read from Postgres (after a restart or flush emptied the mirror). */
  async restore(c: Omit<MirroredCapability, "capabilityId" | "ttlMs">, states: LiveStates): Promise<void> {
    const multi = this.client.multi().set(this.key(c.organizationId, "org"), states.organization).set(this.key(c.organizationId, "agent", c.agentId), states.agent);
    if (c.integrationId && states.integration) multi.set(this.key(c.organizationId, "integration", c.integrationId), states.integration);
    await this.bounded(() => multi.exec());
  }

  /** Mirrors one organization's committed state. */
  async setOrganization(organizationId: string, state: string): Promise<void> {
    await this.bounded(() => this.client.set(this.key(organizationId, "org"), state));
  }

  /** Mirrors one agent's committed state. */
  async setAgent(organizationId: string, agentId: string, state: string): Promise<void> {
    await this.bounded(() => this.client.set(this.key(organizationId, "agent", agentId), state));
  }

  /** Mirrors one integration's committed effective state ("active" only if it and its adapters are). */
  async setIntegration(organizationId: string, integrationId: string, state: string): Promise<void> {
    await this.bounded(() => this.client.set(this.key(organizationId, "integration", integrationId), state));
  }

  /**
   * Removes a consumed marker set by `consume` when Postgres then refused or
   * failed: the Capability was not consumed, so the token must stay usable.
   */
  async release(organizationId: string, capabilityId: string): Promise<void> {
    // Sent even while paused: it follows, on the same connection, a consume that went unanswered.
    await this.bounded(() => this.client.del(this.key(organizationId, "cap", capabilityId)), true);
  }

  /**
   * Closes the connection at once (also when it never opened): a graceful close would wait for
   * answers a frozen Redis never sends, and holds up shutdown. Only commands already past their
   * deadline can still be waiting then, and nobody waits for those.
   */
  async close(): Promise<void> {
    if (this.client.isOpen) this.client.destroy();
  }
}
