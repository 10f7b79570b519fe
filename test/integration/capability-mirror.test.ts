import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CapabilityMirror, MirroredCapability } from "../../src/storage/capability-mirror.js";
import { RedisCapabilityMirror } from "../../src/storage/redis/capability-mirror.js";
import { startOwnedRedis, type OwnedRedis } from "../e2e/capabilities-support.js";
import { freePort } from "../support/process.js";
import { waitFor, within } from "../support/wait.js";

/*
 * The CapabilityMirror contract (src/storage/capability-mirror.ts) on a real redis-server of this
 * file's own (it is frozen, flushed and restarted here): MISS while a state the consume needs is
 * not mirrored (the integration's only when one is bound), INACTIVE when one is not active, the
 * consumed marker set once among concurrent consumes and kept for its lifetime, release clearing
 * it, restore and the set* calls taking effect, organizations not sharing states or markers,
 * everything lost on a flush or a restart (MISS again, once it reconnects), and calls that fail
 * within a short deadline, never hang, when the mirror stops answering or cannot be reached.
 */

let redis: OwnedRedis;
let mirror: CapabilityMirror;

beforeAll(async () => {
  redis = await startOwnedRedis();
  const m = RedisCapabilityMirror.connect(redis.url);
  expect(await m.connected(10_000)).toBe(true);
  mirror = m;
});

afterAll(async () => {
  await mirror?.close();
  await redis?.stop();
});

/** A capability of a fresh organization and agent, nothing of it mirrored yet. */
function capability(integrationId: string | null = null, ttlMs = 600_000): MirroredCapability {
  return { organizationId: `org_${randomUUID()}`, agentId: `agt_${randomUUID()}`, integrationId, capabilityId: `cap_${randomUUID()}`, ttlMs };
}
const another = (c: MirroredCapability): MirroredCapability => ({ ...c, capabilityId: `cap_${randomUUID()}` });

describe("RedisCapabilityMirror", () => {
  it("answers MISS until both the organization's and the agent's states are mirrored, then consumes once: OK, then CONSUMED", async () => {
    const c = capability();
    expect(await mirror.consume(c)).toBe("MISS");
    await mirror.setOrganization(c.organizationId, "active");
    expect(await mirror.consume(c)).toBe("MISS");
    await mirror.setAgent(c.organizationId, c.agentId, "active");
    expect(await mirror.consume(c)).toBe("OK");
    expect(await mirror.consume(c)).toBe("CONSUMED");
    // Another capability of the same agent has its own marker.
    expect(await mirror.consume(another(c))).toBe("OK");
  });

  it("needs the integration's state only for a capability bound to one, and answers INACTIVE when it is not active", async () => {
    const bound = capability("int_a");
    await mirror.restore(bound, { organization: "active", agent: "active" });
    expect(await mirror.consume(bound)).toBe("MISS");
    await mirror.setIntegration(bound.organizationId, "int_a", "inactive");
    expect(await mirror.consume(bound)).toBe("INACTIVE");
    await mirror.setIntegration(bound.organizationId, "int_a", "active");
    expect(await mirror.consume(bound)).toBe("OK");
    // Unbound, in the same organization: no integration state is asked for.
    const unbound = { ...another(bound), integrationId: null };
    expect(await mirror.consume(unbound)).toBe("OK");
  });

  it("answers INACTIVE (and sets no marker) when the organization or agent is not active; the capability consumes once they are again", async () => {
    const c = capability();
    await mirror.restore(c, { organization: "suspended", agent: "active" });
    expect(await mirror.consume(c)).toBe("INACTIVE");
    await mirror.setOrganization(c.organizationId, "active");
    await mirror.setAgent(c.organizationId, c.agentId, "suspended");
    expect(await mirror.consume(c)).toBe("INACTIVE");
    await mirror.setAgent(c.organizationId, c.agentId, "active");
    expect(await mirror.consume(c)).toBe("OK");
  });

  it("restore writes the organization, agent and bound integration states in one call", async () => {
    const c = capability("int_b");
    await mirror.restore(c, { organization: "active", agent: "active", integration: "active" });
    expect(await mirror.consume(c)).toBe("OK");
    const inactive = capability("int_c");
    await mirror.restore(inactive, { organization: "active", agent: "active", integration: "inactive" });
    expect(await mirror.consume(inactive)).toBe("INACTIVE");
  });

  it("sets the consumed marker for exactly one of many concurrent consumes", async () => {
    const c = capability();
    await mirror.restore(c, { organization: "active", agent: "active" });
    const verdicts = await Promise.all(Array.from({ length: 20 }, () => mirror.consume(c)));
    expect(verdicts.filter((v) => v === "OK")).toHaveLength(1);
    expect(verdicts.filter((v) => v === "CONSUMED")).toHaveLength(19);
  });

  it("release clears a marker (the capability consumes again) and only that one", async () => {
    const c = capability();
    const other = another(c);
    await mirror.restore(c, { organization: "active", agent: "active" });
    expect(await mirror.consume(c)).toBe("OK");
    expect(await mirror.consume(other)).toBe("OK");
    await mirror.release(c.organizationId, c.capabilityId);
    expect(await mirror.consume(c)).toBe("OK");
    expect(await mirror.consume(other)).toBe("CONSUMED");
    // Releasing a marker that is not there is no error.
    await mirror.release(c.organizationId, `cap_${randomUUID()}`);
  });

  it("keeps the consumed marker for ttlMs, not forever", async () => {
    const c = capability(null, 300);
    await mirror.restore(c, { organization: "active", agent: "active" });
    expect(await mirror.consume(c)).toBe("OK");
    // Not asserting CONSUMED in between: on a loaded machine the 300 ms may already be over.
    expect(await waitFor("the marker to lapse", async () => (await mirror.consume(c)) === "OK")).toBe(true);
  });

  it("keeps organizations apart: one's states and markers never answer for another's", async () => {
    const a = capability();
    await mirror.restore(a, { organization: "active", agent: "active" });
    expect(await mirror.consume(a)).toBe("OK");
    // Same agent and capability ids under another organization: nothing mirrored there.
    const b = { ...a, organizationId: `org_${randomUUID()}` };
    expect(await mirror.consume(b)).toBe("MISS");
    await mirror.restore(b, { organization: "active", agent: "active" });
    expect(await mirror.consume(b)).toBe("OK");
    await mirror.setOrganization(b.organizationId, "suspended");
    expect(await mirror.consume(another(a))).toBe("OK");
  });

  it("may lose everything: after a flush, states are MISS and markers gone", async () => {
    const c = capability();
    await mirror.restore(c, { organization: "active", agent: "active" });
    expect(await mirror.consume(c)).toBe("OK");
    await redis.command("FLUSHALL");
    expect(await mirror.consume(c)).toBe("MISS");
    await mirror.restore(c, { organization: "active", agent: "active" });
    expect(await mirror.consume(c)).toBe("OK");
  });

  it("fails a call, rather than waiting for it, when the mirror stops answering (and closes all the same), and answers again once it does", async () => {
    const c = capability();
    await mirror.restore(c, { organization: "active", agent: "active" });
    const closing = RedisCapabilityMirror.connect(redis.url);
    expect(await closing.connected(10_000)).toBe(true);
    redis.freeze();
    try {
      // The watchdog is generous (a loaded machine); the contract's deadline is a fraction of a second.
      await expect(within("a consume on a frozen mirror", mirror.consume(c), 5_000)).rejects.not.toThrow(/did not finish/);
      await expect(within("a setAgent on a frozen mirror", mirror.setAgent(c.organizationId, c.agentId, "active"), 5_000)).rejects.not.toThrow(/did not finish/);
      // Shutdown is not held up either, even with a call of its own still unanswered.
      const unanswered = closing.consume(another(c)).catch(() => undefined);
      await within("closing a mirror whose server is frozen", closing.close(), 5_000);
      await unanswered;
    } finally {
      redis.thaw();
    }
    const verdict = await waitFor("the mirror to answer again", () => mirror.consume(another(c)).catch(() => undefined), { timeoutMs: 10_000 });
    expect(verdict).toBe("OK");
  });

  it("fails calls while its server is down, and after a restart answers again, having lost everything (MISS)", async () => {
    const c = capability();
    await mirror.restore(c, { organization: "active", agent: "active" });
    expect(await mirror.consume(c)).toBe("OK");
    await redis.stop();
    try {
      await expect(within("a consume on a stopped mirror", mirror.consume(c), 5_000)).rejects.not.toThrow(/did not finish/);
    } finally {
      await redis.start();
    }
    const verdict = await waitFor("the mirror to reconnect", () => mirror.consume(c).catch(() => undefined), { timeoutMs: 15_000 });
    expect(verdict).toBe("MISS");
  });

  it("fails calls fast while the mirror cannot be reached, and closes without ever having connected", async () => {
    const unreachable = RedisCapabilityMirror.connect(`redis://127.0.0.1:${await freePort()}`);
    try {
      const c = capability();
      await expect(within("a consume on an unreachable mirror", unreachable.consume(c), 5_000)).rejects.not.toThrow(/did not finish/);
      await expect(within("a restore on an unreachable mirror", unreachable.restore(c, { organization: "active", agent: "active" }), 5_000)).rejects.not.toThrow(/did not finish/);
      await expect(within("a release on an unreachable mirror", unreachable.release(c.organizationId, c.capabilityId), 5_000)).rejects.not.toThrow(/did not finish/);
    } finally {
      await within("closing an unreachable mirror", unreachable.close(), 5_000);
    }
  });
});
