import { describe, expect, it } from "vitest";
import { GroupCommit } from "../../../src/domain/group-commit.js";

/** A writer that records each group it is asked to commit and answers as `decide` says. */
function recorder(decide: (batch: readonly number[]) => Map<number, unknown> | Error = () => new Map()) {
  const groups: number[][] = [];
  const commits = new GroupCommit<number>(async (batch) => {
    groups.push([...batch]);
    await new Promise((resolve) => setTimeout(resolve, 5));
    const answer = decide(batch);
    if (answer instanceof Error) throw answer;
    return answer;
  });
  return { groups, commits };
}

describe("GroupCommit", () => {
  it("commits a lone item at once and what arrives meanwhile as the next group", async () => {
    const { groups, commits } = recorder();
    const first = commits.submit(1);
    await new Promise((resolve) => setTimeout(resolve, 1));
    await Promise.all([first, commits.submit(2), commits.submit(3), commits.submit(4)]);
    expect(groups).toEqual([[1], [2, 3, 4]]);
  });

  it("rejects the items the writer refuses with their error and resolves the others", async () => {
    const refusal = new Error("refused");
    const { commits } = recorder((batch) => new Map(batch.filter((n) => n % 2 === 0).map((n) => [n, refusal])));
    const results = await Promise.allSettled([1, 2, 3, 4].map((n) => commits.submit(n)));
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled", "rejected"]);
    expect((results[1] as PromiseRejectedResult).reason).toBe(refusal);
  });

  it("tries each item of a failed group alone, so one bad item fails no neighbour", async () => {
    const { groups, commits } = recorder((batch) => (batch.includes(3) ? new Error("bad item") : new Map()));
    const first = commits.submit(1);
    const rest = [2, 3, 4].map((n) => commits.submit(n));
    const results = await Promise.allSettled([first, ...rest]);
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "fulfilled", "rejected", "fulfilled"]);
    expect(groups).toEqual([[1], [2, 3, 4], [2], [3], [4]]);
  });

  it("takes at most 256 items per group, in arrival order", async () => {
    const { groups, commits } = recorder();
    await Promise.all(Array.from({ length: 600 }, (_, i) => commits.submit(i)));
    expect(groups.map((g) => g.length)).toEqual([1, 256, 256, 87]);
    expect(groups.flat()).toEqual(Array.from({ length: 600 }, (_, i) => i));
  });

  it("lets a small group that follows another wait for company first, and no other", async () => {
    const groups: number[][] = [];
    let lingers = 0;
    let endLinger = () => {};
    let endCommit = () => {};
    const commits = new GroupCommit<number>(
      async (batch) => {
        groups.push([...batch]);
        await new Promise<void>((resolve) => (endCommit = resolve));
        return new Map();
      },
      () => {
        lingers++;
        return new Promise<void>((resolve) => (endLinger = resolve));
      },
    );
    const settled = [commits.submit(1)];
    settled.push(commits.submit(2));
    endCommit(); // group [1] done: [2] alone follows it, so it waits
    await new Promise((resolve) => setImmediate(resolve));
    expect(lingers).toBe(1);
    settled.push(commits.submit(3), commits.submit(4));
    endLinger();
    await new Promise((resolve) => setImmediate(resolve));
    endCommit();
    await Promise.all(settled);
    expect(groups).toEqual([[1], [2, 3, 4]]);

    // Idle again: a lone item goes at once; eight waiting do not wait either.
    const next = [commits.submit(5), ...[6, 7, 8, 9, 10, 11, 12, 13].map((n) => commits.submit(n))];
    endCommit();
    await new Promise((resolve) => setImmediate(resolve));
    endCommit();
    await Promise.all(next);
    expect(groups).toEqual([[1], [2, 3, 4], [5], [6, 7, 8, 9, 10, 11, 12, 13]]);
    expect(lingers).toBe(1);
  });

  it("starts again after going idle", async () => {
    const { groups, commits } = recorder();
    await commits.submit(1);
    await commits.submit(2);
    expect(groups).toEqual([[1], [2]]);
  });
});
