import { constants } from "node:os";
import { startApp } from "./app.js";
import { STOP_SIGNALS } from "./base/signals.js";
import { loadConfig } from "./config.js";

type App = Awaited<ReturnType<typeof startApp>>;

/** Drains and stops the service, then exits: 0 once everything stopped, 1 if something failed. */
function shutDown(app: App, signal: NodeJS.Signals): void {
  app.logger.info({ signal }, "shutting down");
  app.close().then(
    () => process.exit(0),
    (err) => {
      app.logger.error({ err }, "shutdown failed");
      process.exit(1);
    },
  );
}

let app: App | undefined;
let stopSignal: NodeJS.Signals | undefined;
// Listening before start-up, so that no signal ever finds the process without a handler: start-up
// takes the embedded Postgres's own exit hook away (the service stops the cluster after draining),
// and a signal in between would kill the service with its cluster still running. A signal during
// start-up stops the service once it has started; a second one exits at once.
for (const signal of STOP_SIGNALS) {
  process.on(signal, () => {
    if (!app && stopSignal) process.exit(128 + constants.signals[signal]);
    if (stopSignal) return;
    stopSignal = signal;
    if (app) shutDown(app, signal);
    else process.stderr.write(`mandate: ${signal} while starting: stopping once started (${signal} again stops at once)\n`);
  });
}
try {
  app = await startApp(loadConfig());
} catch (err) {
  // Start-up failures (port in use, bad configuration, unreachable database) end the process plainly.
  process.stderr.write(`mandate: could not start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
}
if (stopSignal) shutDown(app, stopSignal);
