import { startApp } from "./app.js";
import { loadConfig } from "./config.js";

let app: Awaited<ReturnType<typeof startApp>>;
try {
  app = await startApp(loadConfig());
} catch (err) {
  // Start-up failures (port in use, bad configuration, unreachable database) end the process plainly.
  process.stderr.write(`mandate: could not start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
}
let stopping = false;
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    app.logger.info({ signal }, "shutting down");
    app.close().then(
      () => process.exit(0),
      (err) => {
        app.logger.error({ err }, "shutdown failed");
        process.exit(1);
      },
    );
  });
}
