import { loadPolicy } from "@open-policy-agent/opa-wasm";
import fs from "node:fs";
const wasm = fs.readFileSync("/tmp/opaexp/x/policy.wasm");
const data = JSON.parse(fs.readFileSync("/tmp/opaexp/x/data.json"));
const p = await loadPolicy(wasm);
p.setData(data);
const mk = (action, amount) => ({intent: {agent_id: "a", action, amount, currency: "USD", requested_at: "x", nonce: "n"}, agent: {agent_id: "a", state: "active"}, principal: {principal_id: "p", external_ref: "alice", kind: "person"}, now: "2026-01-01T00:00:00.000Z"});
function bench(name, f) { for (let i=0;i<20000;i++) f(); const N = 50000; const t = new Float64Array(N);
for (let i = 0; i < N; i++) { const s = process.hrtime.bigint(); f(); t[i]=(Number(process.hrtime.bigint() - s) / 1000); }
t.sort(); console.log(name.padEnd(40), "p50", t[N / 2].toFixed(2), "p99", t[Math.floor(N * 0.99)].toFixed(2)); }
const input = mk("vendor_payment", 3000);
for (const ep of Object.keys(p.entrypoints)) bench(ep, () => p.evaluate(input, ep));
