import { startApp } from "./app.js";
import { loadConfig } from "./config.js";

const app = await startApp(loadConfig());
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
