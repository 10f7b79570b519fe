import { describe, expect, it } from "vitest";
import { GroupCommit } from "../../../src/storage/postgres/group-commit.js";

/** Lets the event loop run every callback already queued (no timers involved). */
const settle = () => new Promise((resolve) => setImmediate(resolve));

/**
 * A writer that records each group it is asked to commit and holds it until the test releases
 * it (`release()`), answering each item as `decide` says: a value, or an Error to refuse it.
 * Throwing `decide` fails the whole group. No timing: the test decides when a commit ends.
 */
function recorder(decide: (n: number, batch: readonly number[]) => number | Error = (n) => n * 10) {
  const groups: number[][] = [];
  const held: (() => void)[] = [];
  const commits = new GroupCommit<number, number>(async (batch) => {
    groups.push([...batch]);
    await new Promise<void>((resolve) => held.push(resolve));
    return batch.map((n) => {
      const answer = decide(n, batch);
      return answer instanceof Error ? { status: "rejected" as const, reason: answer } : { status: "fulfilled" as const, value: answer };
    });
  });
  /** Ends the commit in flight, then lets what follows it start. */
  const release = async () => {
    await settle();
    held.shift()?.();
    await settle();
  };
  return { groups, commits, release };
}

describe("GroupCommit", () => {
  it("commits a lone item at once and what arrives meanwhile as the next group", async () => {
    const { groups, commits, release } = recorder();
    const first = commits.submit(1);
    await settle();
    expect(groups).toEqual([[1]]);
    const rest = [2, 3, 4].map((n) => commits.submit(n));
    await release();
    await release();
    expect(await Promise.all([first, ...rest])).toEqual([10, 20, 30, 40]);
    expect(groups).toEqual([[1], [2, 3, 4]]);
  });

  it("settles each item as the writer answered it: refused items reject, the others resolve with their own result", async () => {
    const refusal = new Error("refused");
    const { commits, release } = recorder((n) => (n % 2 === 0 ? refusal : n));
    const pending = Promise.allSettled([1, 2, 3, 4].map((n) => commits.submit(n)));
    await release();
    await release();
    const results = await pending;
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled", "rejected"]);
    expect((results[0] as PromiseFulfilledResult<number>).value).toBe(1);
    expect((results[1] as PromiseRejectedResult).reason).toBe(refusal);
  });

  it("tries each item of a failed group alone, so one bad item fails no neighbour", async () => {
    const { groups, commits, release } = recorder((n) => {
      if (n === 3) throw new Error("bad item");
      return n;
    });
    const all = Promise.allSettled([1, 2, 3, 4].map((n) => commits.submit(n)));
    for (let i = 0; i < 5; i++) await release();
    const results = await all;
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "fulfilled", "rejected", "fulfilled"]);
    expect(groups).toEqual([[1], [2, 3, 4], [2], [3], [4]]);
  });

  it("takes at most 256 items per group, in arrival order", async () => {
    const { groups, commits, release } = recorder();
    const all = Promise.all(Array.from({ length: 600 }, (_, i) => commits.submit(i)));
    for (let i = 0; i < 4; i++) await release();
    await all;
    expect(groups.map((g) => g.length)).toEqual([1, 256, 256, 87]);
    expect(groups.flat()).toEqual(Array.from({ length: 600 }, (_, i) => i));
  });

  it("lets a small group that follows another wait for company first, and no other", async () => {
    const groups: number[][] = [];
    let lingers = 0;
    let endLinger = () => {};
    let endCommit = () => {};
    const commits = new GroupCommit<number, number>(
      async (batch) => {
        groups.push([...batch]);
        await new Promise<void>((resolve) => (endCommit = resolve));
        return batch.map((n) => ({ status: "fulfilled" as const, value: n }));
      },
      () => {
        lingers++;
        return new Promise<void>((resolve) => (endLinger = resolve));
      },
    );
    const settled = [commits.submit(1)];
    settled.push(commits.submit(2));
    endCommit(); // group [1] done: [2] alone follows it, so it waits
    await settle();
    expect(lingers).toBe(1);
    settled.push(commits.submit(3), commits.submit(4));
    endLinger();
    await settle();
    endCommit();
    await Promise.all(settled);
    expect(groups).toEqual([[1], [2, 3, 4]]);

    // Idle again: a lone item goes at once; eight waiting do not wait either.
    const next = [commits.submit(5), ...[6, 7, 8, 9, 10, 11, 12, 13].map((n) => commits.submit(n))];
    endCommit();
    await settle();
    endCommit();
    await Promise.all(next);
    expect(groups).toEqual([[1], [2, 3, 4], [5], [6, 7, 8, 9, 10, 11, 12, 13]]);
    expect(lingers).toBe(1);
  });

  it("starts again after going idle", async () => {
    const { groups, commits, release } = recorder();
    const first = commits.submit(1);
    await release();
    await first;
    const second = commits.submit(2);
    await release();
    await second;
    expect(groups).toEqual([[1], [2]]);
  });
});
