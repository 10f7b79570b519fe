import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

const root = fileURLToPath(new URL(".", import.meta.url));

// The console is served by the service at /console (src/transport/console-assets.ts) under a
// CSP without inline scripts: nothing here may inline a script (no modulepreload polyfill).
// Generated descriptors come from ../src/gen, the same files the service is built from.
export default defineConfig({
  root,
  base: "/console/",
  publicDir: false,
  esbuild: { jsx: "automatic" },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    sourcemap: false,
    rollupOptions: {
      // React Server Components' "use client" markers mean nothing in a browser-only bundle.
      onwarn(warning, warn) {
        if (warning.code !== "MODULE_LEVEL_DIRECTIVE") warn(warning);
      },
    },
  },
  server: {
    fs: { allow: [fileURLToPath(new URL("..", import.meta.url))] },
    // `npx vite console` during development: the API of a service started with `npm start`.
    proxy: { "^/mandate\\.": process.env.MANDATE_URL ?? "http://127.0.0.1:8080" },
  },
});
