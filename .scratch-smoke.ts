import { buildBundle, compileRules, PolicyEngine, STARTER_RULES, STARTER_POLICY_KEY, checkRegoModule } from "./src/policy/index.js";
const rego = compileRules(STARTER_POLICY_KEY, STARTER_RULES);
console.log(rego);
const t0 = performance.now();
const { bundle, digest } = await buildBundle({ policies: [{ policy_key: "starter", version: 1, rego }], graph: null, graph_version: null });
console.log("built", bundle.length, digest, (performance.now() - t0).toFixed(0), "ms");
const engine = new PolicyEngine();
await engine.load(digest, bundle);
const input = { intent: { agent_id: "a", action: "reference_noop", requested_at: "x", nonce: "n" }, agent: { agent_id: "a", state: "active" }, principal: { principal_id: "p", external_ref: null, kind: "person" }, now: "2026-01-01T00:00:00.000Z" };
console.log(JSON.stringify(engine.evaluate(digest, input)));
try { await checkRegoModule("foo", "package mandate.policies.foo\n\nactions := {\"a\"}\n\nresults contains x if {\n\tx := http.send({})\n}\n"); } catch (e) { console.log(e); }
try { await checkRegoModule("foo", "package mandate.policies.foo\n\nactions := {\"a\"\n"); } catch (e) { console.log(e); }
