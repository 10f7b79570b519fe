import { availableParallelism } from "node:os";
import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

/**
 * Test files run in forks, at least two at a time. vitest's default, one fewer than the cores,
 * is one fork on a two-core machine; the suite's files spend most of their time waiting on the
 * services, Postgres and the CLIs they start, so a second fork overlaps those waits
 * (docs/performance.md, "The test suite").
 */
export const testForks = Math.max(2, availableParallelism() - 1);

/** `@mandate/client` resolves to its source in this repo, as tsconfig.json's `paths` say for tsc and tsx. */
export const clientSourceAlias = [
  { find: /^@mandate\/client$/, replacement: fileURLToPath(new URL("clients/typescript/src/index.ts", import.meta.url)) },
  { find: /^@mandate\/client\/node$/, replacement: fileURLToPath(new URL("clients/typescript/src/node.ts", import.meta.url)) },
];

export default defineConfig({
  resolve: { alias: clientSourceAlias },
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/support/global-setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: "forks",
    maxWorkers: testForks,
  },
});
