// ESLint (flat config), run by `npm run lint` in `npm test`: @eslint/js recommended and
// typescript-eslint recommended. Deliberately not the type-checked presets: those build a
// TypeScript program per run (tsc already checks types in `npm test`) and would make lint slow.
import { defineConfig } from "eslint/config";
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default defineConfig(
  {
    // Generated code, build output, local state and tools, other languages' trees.
    ignores: [
      "src/gen/",
      "**/dist/",
      "**/node_modules/",
      ".tools/",
      ".mandate/",
      ".scratch/",
      "console/dist/",
      "console/build/",
      "clients/python/",
    ],
  },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    rules: {
      // Matching control characters is the point where regexes have them: input validation
      // refuses U+0000-U+001F (text checks, Intent fields) and canonical JSON escapes them.
      "no-control-regex": "off",
      // `_`-prefixed names are the project's way of saying "deliberately unused": a callback's
      // parameter kept for its position, a member taken out of an object before `...rest`.
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
    },
  },
  {
    files: ["test/**", "bench/**"],
    rules: {
      // Tests and the bench read JSON answers of the API they exercise as `any` on purpose:
      // the assertions are what check their shape, and typing every fixture would restate the proto.
      "@typescript-eslint/no-explicit-any": "off",
    },
  },
  {
    // The few plain-JS files (tool configs such as .dependency-cruiser.cjs) run on Node.
    files: ["**/*.cjs"],
    languageOptions: {
      sourceType: "commonjs",
      globals: { module: "writable", require: "readonly", __dirname: "readonly", process: "readonly" },
    },
  },
  {
    files: ["**/*.js", "**/*.mjs"],
    languageOptions: { globals: { process: "readonly", console: "readonly" } },
  },
);
