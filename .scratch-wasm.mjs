import { loadPolicy } from "@open-policy-agent/opa-wasm";
import fs from "node:fs";
const wasm = fs.readFileSync("/tmp/opaexp/x/policy.wasm");
const data = JSON.parse(fs.readFileSync("/tmp/opaexp/x/data.json"));
const p = await loadPolicy(wasm);
p.setData(data);
console.log(p.entrypoints, p.minorVersion);
const mk = (action, amount) => ({intent: {agent_id: "a", action, amount, currency: "USD", requested_at: "x", nonce: "n"}, agent: {agent_id: "a", state: "active"}, principal: {principal_id: "p", external_ref: "alice", kind: "person"}, now: "2026-01-01T00:00:00.000Z"});
for (const [a, amt] of [["reference_noop"], ["vendor_payment", 500], ["vendor_payment", 3000], ["vendor_payment", 6000], ["other"], ["vendor_payment", "x"]]) console.log(JSON.stringify(p.evaluate(mk(a, amt), "mandate/main/decision")));
for (const a of ["reference_noop", "vendor_payment"]) {
const input = mk(a, 3000); const N = 20000; const t = [];
for (let i = 0; i < N; i++) { const s = process.hrtime.bigint(); p.evaluate(input, "mandate/main/decision"); t.push(Number(process.hrtime.bigint() - s) / 1000); }
t.sort((x, y) => x - y); console.log(a, "p50", t[N / 2], "p99", t[Math.floor(N * 0.99)]);
}
