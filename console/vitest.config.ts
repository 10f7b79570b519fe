import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";
import { clientSourceAlias, testForks } from "../vitest.config.js";

// The console's browser journeys (scripts/test-console.sh), apart from the root suite: they need
// console/dist built first, and drive Debian's Chromium. Same global setup (shared Postgres, Redis).
export default defineConfig({
  root: fileURLToPath(new URL("..", import.meta.url)),
  resolve: { alias: clientSourceAlias },
  test: {
    include: ["console/tests/**/*.test.ts"],
    globalSetup: ["test/support/global-setup.ts"],
    testTimeout: 180_000,
    hookTimeout: 120_000,
    pool: "forks",
    maxWorkers: testForks,
  },
});
