import { afterAll, beforeAll, expect, it } from "vitest";
import { intentDoc, newAgent, newOrgFixture, signBody, submitIntent } from "../support/agents.js";
import { startService, type TestService } from "../support/service.js";

/*
 * Domain metrics at GET /metrics (issue 23, Operations), read after real traffic: decisions by
 * outcome and reason (counted by the ledger once durable), capability issues and verifications
 * by result, the ledger's group sizes and commit durations, pending reviews and webhook lag
 * (read at scrape), and the Postgres pool. The service is this file's own, so its counters
 * start at zero; the scrape-time readings cover the shared database, so they are bounded below.
 */

let svc: TestService;
beforeAll(async () => {
  svc = await startService();
}, 120_000);
afterAll(() => svc?.close());

/** The value of the sample `name{labels}` in the exposition text, or undefined. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-z_:]+)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = Object.fromEntries([...(m[2] ?? "").matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => got[k] === v)) return Number(m[3]);
  }
  return undefined;
}

it("counts decisions, capability results and ledger groups, and reads pending reviews, webhook lag and the pool", async () => {
  const org = await newOrgFixture(svc);
  const agent = await newAgent(svc, org);
  const allow = await submitIntent(svc, "v1", signBody(agent, intentDoc(agent.agentId, { amount: 5, currency: "EUR" })));
  expect(allow.status).toBe(200);
  const review = await submitIntent(svc, "v1", signBody(agent, intentDoc(agent.agentId, { action: "wire_transfer" })));
  expect((review.body as { outcome: string }).outcome).toBe("HUMAN_REVIEW");

  const decisionId = (allow.body as { decision_id: string }).decision_id;
  const issued = await svc.v1("POST", `/v1/decisions/${decisionId}/capability-token`, { bearer: org.apiKey, body: { audience: "erp", issued_by: "metrics-test" } });
  expect(issued.status).toBe(200);
  const again = await svc.v1("POST", `/v1/decisions/${decisionId}/capability-token`, { bearer: org.apiKey, body: { audience: "erp", issued_by: "metrics-test" } });
  expect(again.status).toBe(409);
  const presentation = { token: issued.body.token, audience: "erp", action: "reference_noop", resource: "", constraints: { amount: "5", currency: "EUR" } };
  const verify = (constraints: Record<string, string>) => svc.v1("POST", "/v1/capability-tokens/verify", { bearer: org.apiKey, body: { ...presentation, constraints } });
  expect((await verify({ amount: "6", currency: "EUR" })).status).toBe(409);
  expect((await verify(presentation.constraints)).status).toBe(200);
  expect((await verify(presentation.constraints)).status).toBe(409);

  const res = await fetch(`${svc.baseUrl}/metrics`);
  expect(res.status).toBe(200);
  const text = await res.text();
  expect(sample(text, "mandate_decisions_total", { outcome: "ALLOW", reason: "starter_reference_action" })).toBe(1);
  expect(sample(text, "mandate_decisions_total", { outcome: "HUMAN_REVIEW", reason: "unrecognized_action" })).toBe(1);
  expect(sample(text, "mandate_capability_operations_total", { operation: "issue", result: "issued" })).toBe(1);
  expect(sample(text, "mandate_capability_operations_total", { operation: "issue", result: "capability_already_issued" })).toBe(1);
  expect(sample(text, "mandate_capability_operations_total", { operation: "verify", result: "capability_constraint_mismatch" })).toBe(1);
  expect(sample(text, "mandate_capability_operations_total", { operation: "verify", result: "consumed" })).toBe(1);
  expect(sample(text, "mandate_capability_operations_total", { operation: "verify", result: "capability_consumed" })).toBe(1);
  // Two decisions, two issues (the second refused at commit, where the one-per-decision rule is
  // checked) and one consume went through the ledger; each group holds at least one.
  expect(sample(text, "mandate_ledger_group_size_sum", { kind: "decision" })).toBe(2);
  expect(sample(text, "mandate_ledger_group_size_count", { kind: "decision" })).toBeGreaterThanOrEqual(1);
  expect(sample(text, "mandate_ledger_group_size_sum", { kind: "issue" })).toBe(2);
  // The replay is refused by Redis, or (Redis not answering in time) at the ledger's commit.
  expect(sample(text, "mandate_ledger_group_size_sum", { kind: "consume" })).toBeGreaterThanOrEqual(1);
  expect(sample(text, "mandate_ledger_group_size_sum", { kind: "consume" })).toBeLessThanOrEqual(2);
  expect(sample(text, "mandate_ledger_group_commit_seconds_count", { kind: "consume" })).toBe(sample(text, "mandate_ledger_group_size_count", { kind: "consume" }));
  expect(sample(text, "mandate_reviews_pending")).toBeGreaterThanOrEqual(1);
  expect(sample(text, "mandate_webhook_delivery_lag_seconds")).toBeGreaterThanOrEqual(0);
  for (const state of ["in_use", "idle", "waiting"]) expect(sample(text, "mandate_db_pool_connections", { state })).toBeGreaterThanOrEqual(0);
  expect(sample(text, "mandate_db_pool_connections", { state: "idle" })! + sample(text, "mandate_db_pool_connections", { state: "in_use" })!).toBeGreaterThanOrEqual(1);
}, 60_000);
