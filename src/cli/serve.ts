import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { isStopSignal, STOP_SIGNALS } from "../base/signals.js";
import { CliError, EXIT_ERROR, type CliCommand } from "./command.js";

/**
 * The Node flags the service runs with, here and nowhere else (docs/architecture.md, "npm start
 * flags"): one V8 background thread, and no allocation-site pretenuring. `npm start`, the tests
 * and the bench all start the service with these.
 */
export const SERVICE_NODE_FLAGS: readonly string[] = ["--v8-pool-size=1", "--no-allocation-site-pretenuring"];

const usage = `usage: mandate serve

Runs the service in the foreground, configured by environment variables exactly as
\`npm start\` is (README, Configuration): PORT (8080), HOST (127.0.0.1), DATABASE_URL
(unset: an embedded Postgres in MANDATE_DATA_DIR, default ./.mandate), REDIS_URL, ...
The opa CLI is MANDATE_OPA_PATH, else \`opa\` on PATH. SIGTERM, SIGINT or SIGHUP stops it gracefully.`;

/**
 * `mandate serve`: the service as its own Node process with SERVICE_NODE_FLAGS (Node options
 * cannot be set from inside a running process), signals passed on, its exit status returned.
 */
export const serveCommand: CliCommand = {
  name: "serve",
  usage,
  run(args) {
    if (args.length > 0) throw new CliError("serve takes no arguments: configure it with environment variables", true);
    // From the build this is dist/main.js; from source (tsx) src/main.ts, loaded through tsx.
    const fromSource = import.meta.url.endsWith(".ts");
    const entry = fileURLToPath(new URL(fromSource ? "../main.ts" : "../main.js", import.meta.url));
    const child = spawn(process.execPath, [...SERVICE_NODE_FLAGS, ...(fromSource ? ["--import", "tsx"] : []), entry], { stdio: "inherit" });
    const forward = (signal: NodeJS.Signals) => child.kill(signal);
    for (const signal of STOP_SIGNALS) process.on(signal, forward);
    return new Promise((resolve) => {
      child.once("error", (err) => {
        process.stderr.write(`mandate serve: cannot start node: ${err.message}\n`);
        resolve(EXIT_ERROR);
      });
      child.once("exit", (code, signal) => resolve(code ?? (isStopSignal(signal) ? 0 : EXIT_ERROR)));
    });
  },
};
