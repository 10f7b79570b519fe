// The worker thread of an isolated evaluation lane (src/policy/isolation.ts). Plain JavaScript so
// that it starts without a TypeScript loader, wherever the service runs (tsx, vitest, the bench).
// It answers one message at a time, in order:
//   {type: "load", digest, module, data}  → {ok: true}    (module: a compiled WebAssembly.Module)
//   {type: "unload", digest}              → {ok: true}
//   {type: "eval", digest, entrypoint, input} → {ok: true, resultSet, ms}
// and {ok: false, error} for any failure. The lane terminates this thread when an evaluation
// passes its deadline; nothing here needs to stop by itself.
import { performance } from "node:perf_hooks";
import { parentPort } from "node:worker_threads";
import { loadPolicy } from "@open-policy-agent/opa-wasm";

const policies = new Map();

parentPort.on("message", async (message) => {
  try {
    if (message.type === "unload") {
      policies.delete(message.digest);
      parentPort.postMessage({ ok: true });
      return;
    }
    if (message.type === "load") {
      const policy = await loadPolicy(message.module);
      policy.setData(message.data);
      policies.set(message.digest, policy);
      parentPort.postMessage({ ok: true });
      return;
    }
    const policy = policies.get(message.digest);
    if (!policy) throw new Error(`bundle ${message.digest} is not loaded in the worker`);
    const started = performance.now();
    let resultSet;
    try {
      resultSet = policy.evaluate(message.input, message.entrypoint);
    } catch (cause) {
      // A trap may leave the instance's memory in any state: drop it.
      policies.delete(message.digest);
      throw cause;
    }
    parentPort.postMessage({ ok: true, resultSet, ms: performance.now() - started });
  } catch (cause) {
    parentPort.postMessage({ ok: false, error: cause instanceof Error ? cause.message : String(cause) });
  }
});

parentPort.postMessage({ ok: true, ready: true });
