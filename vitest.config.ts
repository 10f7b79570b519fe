import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

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
  },
});
