import { createHash, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CollisionError, UnavailableError, UnstorableValueError } from "../../src/storage/errors.js";
import type { EvidenceEntry, EvidenceStore } from "../../src/storage/evidence.js";
import type { AdapterReportRow, ExecutionStore, ReceiptRow } from "../../src/storage/execution.js";
import { createDatabase, type Database } from "../../src/storage/postgres/database.js";
import { EvidenceChain } from "../../src/storage/postgres/evidence-chain.js";
import { PostgresExecutionStore } from "../../src/storage/postgres/execution.js";
import { PostgresOperationalReadings } from "../../src/storage/postgres/readings.js";
import { PostgresWebhookStore } from "../../src/storage/postgres/webhooks.js";
import type { OperationalReadings } from "../../src/storage/readings.js";
import { storeDatabase } from "../support/stores.js";
import { intentDoc, newAgent, newAgentKey, newOrgFixture, signBody, submitIntent } from "../support/agents.js";
import { type TestService } from "../support/service.js";

/*
 * The ExecutionStore contract (src/storage/execution.ts) on real Postgres: receipts and adapter
 * reports stored with their evidence record (its id on the row) or neither, idempotent per id
 * within the organization (a repeat, or a concurrent twin, gets the stored row and
 * `inserted: false`, and writes nothing), receipts listed per decision in the order received;
 * reconciliations stored with their evidence or neither.
 * And the OperationalReadings contract (src/storage/readings.ts), folded in here because it is two
 * figures read over the whole database: this suite's database holds exactly the pending reviews
 * and webhook deliveries it made; a database that cannot answer is a storage error.
 */

let db: Database;
let store: ExecutionStore;
let readings: OperationalReadings;
let evidence: EvidenceStore;
let chain: EvidenceChain;
let url: string;

/** One organization's rows that receipts and reports refer to, made through the API. */
interface Fixture {
  organizationId: string;
  decisions: [string, string];
  capabilityId: string;
  adapterId: string;
}
const fixtures: Fixture[] = [];
/** Pending reviews right before and after one HUMAN_REVIEW decision (a suspended agent's Intent) was made. */
let pendingAround: [number, number];

async function fixture(svc: TestService): Promise<Fixture> {
  const org = await newOrgFixture(svc);
  const agent = await newAgent(svc, org);
  const decisions: string[] = [];
  for (let i = 0; i < 2; i++) {
    const res = await submitIntent(svc, "v1", signBody(agent, intentDoc(agent.agentId)));
    if (res.body.outcome !== "ALLOW") throw new Error(`intent: ${res.status} ${JSON.stringify(res.body)}`);
    decisions.push(res.body.decision_id);
  }
  const cap = await svc.v1("POST", `/v1/decisions/${decisions[0]}/capability-token`, { bearer: org.apiKey, body: { audience: "erp", issued_by: "test" } });
  const integration = await svc.v1("POST", "/v1/integrations", { bearer: org.apiKey, body: { name: "erp", actions: ["reference_noop"] } });
  const adapter = await svc.v1("POST", `/v1/integrations/${integration.body.integration_id}/adapters`, { bearer: org.apiKey, body: { name: "adapter", public_key: newAgentKey().publicKey } });
  if (cap.status !== 200 || adapter.status !== 200) throw new Error(`fixture: ${cap.status} ${adapter.status}`);
  return { organizationId: org.organizationId, decisions: decisions as [string, string], capabilityId: cap.body.capability_id, adapterId: adapter.body.adapter_id };
}

beforeAll(async () => {
  // Organizations with decisions, capabilities and adapters; pending reviews read around one more.
  const made = await storeDatabase("execution_store", async (svc, pool) => {
    readings = new PostgresOperationalReadings(pool);
    for (let i = 0; i < 2; i++) fixtures.push(await fixture(svc));
    const org = await newOrgFixture(svc);
    const suspended = await newAgent(svc, org, "suspended");
    const before = await readings.pendingReviews();
    const review = await submitIntent(svc, "v1", signBody(suspended, intentDoc(suspended.agentId)));
    expect(review.body).toMatchObject({ outcome: "HUMAN_REVIEW", status: "PENDING" });
    pendingAround = [before, await readings.pendingReviews()];
  });
  ({ url, db, evidence, chain } = made);
  store = new PostgresExecutionStore(db, chain);
});

afterAll(async () => {
  await db?.close();
});

const entry = (organizationId: string, kind: string, subjectId: string): EvidenceEntry => ({ organizationId, kind, subjectId, payload: { subjectId } });
const records = async (organizationId: string) => (await evidence.page(organizationId, 0, 1000)).records;
const receipt = (f: Fixture, receiptId = `rcp_${randomUUID()}`, decision = 0, status: ReceiptRow["status"] = "executed"): Omit<ReceiptRow, "evidence_id"> => ({
  organization_id: f.organizationId,
  receipt_id: receiptId,
  capability_id: f.capabilityId,
  decision_id: f.decisions[decision]!,
  reported_by: f.adapterId,
  status,
  executed_fields: { po: "1", status },
  reported_at: new Date("2026-01-02T03:04:05.678Z"),
  body_sha256: createHash("sha256").update(`${receiptId}/${status}`).digest(),
});
const report = (f: Fixture, reportId = `rpt_${randomUUID()}`, comparison: AdapterReportRow["comparison"] = "MATCHED"): Omit<AdapterReportRow, "evidence_id"> => ({
  organization_id: f.organizationId,
  report_id: reportId,
  decision_id: f.decisions[0],
  adapter_id: f.adapterId,
  operation: { po: "1" },
  comparison,
  differing_fields: comparison === "MATCHED" ? [] : ["po"],
  body_sha256: createHash("sha256").update(`${reportId}/${comparison}`).digest(),
});

describe("PostgresExecutionStore: receipts", () => {
  it("stores a receipt with its evidence record, whose id it carries; a repeated id writes nothing and returns the stored one", async () => {
    const [f, g] = [fixtures[0]!, fixtures[1]!];
    const before = (await records(f.organizationId)).length;
    const first = receipt(f);
    const stored = await store.recordReceipt(first, entry(f.organizationId, "execution.receipt", first.receipt_id));
    expect(stored.inserted).toBe(true);
    expect(stored.row).toMatchObject({ ...first, executed_fields: { po: "1", status: "executed" } });
    const appended = (await records(f.organizationId)).slice(before);
    expect(appended.map((r) => [r.kind, r.subject_id])).toEqual([["execution.receipt", first.receipt_id]]);
    expect(stored.row.evidence_id).toBe(appended[0]!.evidence_id);

    // The same id with other content: the first stays, nothing else is written.
    const again = await store.recordReceipt(receipt(f, first.receipt_id, 1, "failed"), entry(f.organizationId, "execution.receipt", "again"));
    expect(again.inserted).toBe(false);
    expect(again.row).toMatchObject({ receipt_id: first.receipt_id, status: "executed", decision_id: f.decisions[0], evidence_id: stored.row.evidence_id });
    expect(again.row.body_sha256.equals(first.body_sha256)).toBe(true);
    expect((await records(f.organizationId)).length).toBe(before + 1);
    expect(await store.receipts(f.organizationId, f.decisions[1])).toEqual([]);

    // The id is the organization's: another's is a new receipt.
    const other = await store.recordReceipt(receipt(g, first.receipt_id), entry(g.organizationId, "execution.receipt", first.receipt_id));
    expect(other).toMatchObject({ inserted: true, row: { organization_id: g.organizationId, receipt_id: first.receipt_id } });
    expect(other.row.evidence_id).not.toBe(stored.row.evidence_id);
  });

  it("lets one of concurrent twins store the receipt; the others get it with inserted false", async () => {
    const f = fixtures[1]!;
    const before = (await records(f.organizationId)).length;
    const id = `rcp_${randomUUID()}`;
    const results = await Promise.all(Array.from({ length: 4 }, (_, i) => store.recordReceipt(receipt(f, id, 0, i === 0 ? "executed" : "partial"), entry(f.organizationId, "execution.receipt", `${id}/${i}`))));
    expect(results.filter((r) => r.inserted)).toHaveLength(1);
    const winner = results.find((r) => r.inserted)!.row;
    for (const r of results) expect(r.row).toMatchObject({ receipt_id: id, status: winner.status, evidence_id: winner.evidence_id });
    const appended = (await records(f.organizationId)).slice(before);
    expect(appended).toHaveLength(1);
    expect(appended[0]!.evidence_id).toBe(winner.evidence_id);
  });

  it("writes neither the receipt nor its evidence when the evidence cannot be stored", async () => {
    const f = fixtures[0]!;
    const before = (await records(f.organizationId)).length;
    const r = receipt(f);
    await expect(store.recordReceipt(r, entry(f.organizationId, "execution.receipt", "bad\u0000subject"))).rejects.toBeInstanceOf(UnstorableValueError);
    expect((await records(f.organizationId)).length).toBe(before);
    expect((await store.receipts(f.organizationId, f.decisions[0])).map((x) => x.receipt_id)).not.toContain(r.receipt_id);
    // Nothing was stored under the id: it is new.
    expect((await store.recordReceipt(r, entry(f.organizationId, "execution.receipt", r.receipt_id))).inserted).toBe(true);
  });

  it("lists a decision's receipts in the order received, only the organization's", async () => {
    const [f, g] = [fixtures[1]!, fixtures[0]!];
    // Ids that sort against the order of arrival.
    const ids = ["rcp_order_c", "rcp_order_b", "rcp_order_a"];
    for (const id of ids) await store.recordReceipt(receipt(f, id, 1), entry(f.organizationId, "execution.receipt", id));
    expect((await store.receipts(f.organizationId, f.decisions[1])).map((r) => r.receipt_id)).toEqual(ids);
    expect(await store.receipts(g.organizationId, f.decisions[1])).toEqual([]);
    expect(await store.receipts(f.organizationId, "dec_none")).toEqual([]);
  });
});

describe("PostgresExecutionStore: adapter reports and reconciliations", () => {
  it("stores an adapter report with its evidence once per id within the organization", async () => {
    const [f, g] = [fixtures[0]!, fixtures[1]!];
    const before = (await records(f.organizationId)).length;
    const first = report(f);
    const stored = await store.recordAdapterReport(first, entry(f.organizationId, "execution.adapter_report", first.report_id));
    expect(stored.inserted).toBe(true);
    expect(stored.row).toMatchObject({ ...first, body_sha256: first.body_sha256 });
    const appended = (await records(f.organizationId)).slice(before);
    expect(appended.map((r) => r.subject_id)).toEqual([first.report_id]);
    expect(stored.row.evidence_id).toBe(appended[0]!.evidence_id);

    const again = await store.recordAdapterReport(report(f, first.report_id, "MISMATCHED"), entry(f.organizationId, "execution.adapter_report", "again"));
    expect(again).toMatchObject({ inserted: false, row: { report_id: first.report_id, comparison: "MATCHED", differing_fields: [], evidence_id: stored.row.evidence_id } });
    expect((await records(f.organizationId)).length).toBe(before + 1);
    expect((await store.recordAdapterReport(report(g, first.report_id), entry(g.organizationId, "execution.adapter_report", first.report_id))).inserted).toBe(true);

    const bad = report(f);
    await expect(store.recordAdapterReport(bad, entry(f.organizationId, "execution.adapter_report", "bad\u0000subject"))).rejects.toBeInstanceOf(UnstorableValueError);
    expect((await records(f.organizationId)).length).toBe(before + 1);
    expect((await store.recordAdapterReport(bad, entry(f.organizationId, "execution.adapter_report", bad.report_id))).inserted).toBe(true);
  });

  it("stores a reconciliation with its evidence record, or neither", async () => {
    const f = fixtures[1]!;
    const before = (await records(f.organizationId)).length;
    const reconciliation = {
      reconciliation_id: `rec_${randomUUID()}`,
      organization_id: f.organizationId,
      decision_id: f.decisions[0],
      status: "RECEIPT_MISSING" as const,
      receipt_id: "",
      reported_by: "",
      reconciled_at: new Date("2026-01-02T03:04:05.678Z"),
    };
    await expect(store.recordReconciliation(reconciliation, entry(f.organizationId, "execution.reconciled", "bad\u0000subject"))).rejects.toBeInstanceOf(UnstorableValueError);
    expect((await records(f.organizationId)).length).toBe(before);
    const stored = await store.recordReconciliation(reconciliation, entry(f.organizationId, "execution.reconciled", reconciliation.reconciliation_id));
    const appended = (await records(f.organizationId)).slice(before);
    expect(appended.map((r) => r.subject_id)).toEqual([reconciliation.reconciliation_id]);
    expect(stored).toEqual({ ...reconciliation, evidence_id: appended[0]!.evidence_id });
    // Its id is taken now (so the rolled-back attempt above stored nothing under it).
    await expect(store.recordReconciliation(reconciliation, entry(f.organizationId, "execution.reconciled", "twice"))).rejects.toBeInstanceOf(CollisionError);
    expect((await records(f.organizationId)).length).toBe(before + 1);
  });
});

describe("PostgresOperationalReadings", () => {
  it("counts HUMAN_REVIEW decisions still pending over every organization", async () => {
    // This database's only pending review is the suspended agent's; the ALLOW decisions are not.
    expect(pendingAround).toEqual([0, 1]);
    expect(await readings.pendingReviews()).toBe(1);
  });

  it("rejects with a storage error when the database cannot answer", async () => {
    const closed = createDatabase(url, 1);
    await closed.close();
    const cut = new PostgresOperationalReadings(closed);
    await expect(cut.pendingReviews()).rejects.toBeInstanceOf(UnavailableError);
    await expect(cut.webhookDeliveryLagSeconds()).rejects.toBeInstanceOf(UnavailableError);
  });

  it("reads 0 while no pending delivery is due, then how long the most overdue one has been due, leaving out deleted webhooks'", async () => {
    const webhooks = new PostgresWebhookStore(db, chain);
    const f = fixtures[0]!;
    expect(await readings.webhookDeliveryLagSeconds()).toBe(0);
    await webhooks.create({ webhook_id: `whk_${randomUUID()}`, organization_id: f.organizationId, url: "http://127.0.0.1:9/hook", events: [], description: "", secret: "whsec_dGVzdA==" }, 10);
    await db.transaction((tx) => chain.append(tx, [entry(f.organizationId, "test.record", "s")]));
    const delivery = (i: number) => ({ delivery_id: `msg_${randomUUID()}`, event_id: `evt_lag_${i}`, event: "AgentStateChanged", occurred_at: new Date(), body: "{}" });
    expect(await webhooks.enqueue(f.organizationId, async (claimed, head) => claimed.map((c) => ({ webhook_id: c.webhook_id, cursor_seq: head, deliveries: [delivery(1), delivery(2)] })))).toBe(2);
    const attempt = { attempted_at: new Date().toISOString(), status: 503, latency_ms: 1, error: "HTTP 503" };
    const hour = 3_600_000;
    const [due, later] = await webhooks.lease(10, 60_000, 2, 1000);
    // One due again an hour ago, one in an hour: the lag is the first's hour.
    expect(await webhooks.record(due!.delivery_id, due!.lease_id, attempt, { kind: "retry", at: new Date(Date.now() - hour) })).toBe(true);
    expect(await webhooks.record(later!.delivery_id, later!.lease_id, attempt, { kind: "retry", at: new Date(Date.now() + hour) })).toBe(true);
    const lag = await readings.webhookDeliveryLagSeconds();
    expect(lag).toBeGreaterThanOrEqual(3600);
    expect(lag).toBeLessThan(3600 + 600);
    // The overdue one delivered: the other is pending but not due.
    const [retried] = await webhooks.lease(10, 60_000, 2, 1000);
    expect(retried!.delivery_id).toBe(due!.delivery_id);
    expect(await webhooks.record(retried!.delivery_id, retried!.lease_id, { ...attempt, status: 200, error: "" }, { kind: "delivered" })).toBe(true);
    expect(await readings.webhookDeliveryLagSeconds()).toBe(0);

    // A deleted webhook's overdue delivery is never attempted again: no lag.
    const gone = `whk_${randomUUID()}`;
    await webhooks.create({ webhook_id: gone, organization_id: f.organizationId, url: "http://127.0.0.1:9/hook", events: [], description: "", secret: "whsec_dGVzdA==" }, 10);
    await db.transaction((tx) => chain.append(tx, [entry(f.organizationId, "test.record", "s")]));
    const forGone = (claimed: { webhook_id: string }[], head: number) => claimed.filter((c) => c.webhook_id === gone).map((c) => ({ webhook_id: c.webhook_id, cursor_seq: head, deliveries: [delivery(3)] }));
    expect(await webhooks.enqueue(f.organizationId, async (claimed, head) => forGone(claimed, head))).toBe(1);
    const [overdue] = await webhooks.lease(10, 60_000, 2, 1000);
    expect(overdue!.webhook_id).toBe(gone);
    expect(await webhooks.record(overdue!.delivery_id, overdue!.lease_id, attempt, { kind: "retry", at: new Date(Date.now() - hour) })).toBe(true);
    expect(await readings.webhookDeliveryLagSeconds()).toBeGreaterThanOrEqual(3600);
    expect(await webhooks.delete(f.organizationId, gone)).toBe(true);
    expect(await readings.webhookDeliveryLagSeconds()).toBe(0);
  });
});
