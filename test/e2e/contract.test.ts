import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, it } from "vitest";
import { ALL_TRANSPORTS, CaseRunner, loadCases } from "../support/cases.js";

/*
 * The contract cases in test/cases/*.yaml, each run over
 * /v1 JSON, gRPC (HTTP/2) and the Connect protocol against one expectation.
 * Cases are independent (each run makes its own organizations), so they run concurrently.
 */

const casesDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../cases");
const runner = new CaseRunner();
afterAll(() => runner.close());

for (const { file, cases } of loadCases(casesDir)) {
  describe.concurrent(file, () => {
    for (const c of cases) {
      for (const transport of c.transports ?? ALL_TRANSPORTS) {
        it(`[${transport}] ${c.name}`, () => runner.run(c, transport));
      }
    }
  });
}
