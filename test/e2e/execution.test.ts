import { generateKeyPairSync, randomUUID, sign, type KeyObject } from "node:crypto";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { createClient, ConnectError, Code } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ReconciliationService } from "../../src/gen/mandate/v1alpha/execution_pb.js";
import { ReconciliationStatus } from "../../src/gen/mandate/v1/decisions_pb.js";
import { startService, type TestService } from "../support/service.js";

const run = promisify(execFile);

function keypair(): { privateKey: KeyObject; wire: string } {
  const { publicKey, privateKey } = generateKeyPairSync("ed25519");
  return { privateKey, wire: `ed25519:base64:${Buffer.from(publicKey.export({ format: "jwk" }).x!, "base64url").toString("base64")}` };
}

/** POSTs `doc` signed by (keyId, key), exactly as an agent, adapter or destination signs. */
async function signedPost(svc: TestService, path: string, keyId: string, key: KeyObject, doc: object) {
  const body = Buffer.from(JSON.stringify(doc));
  const res = await fetch(`${svc.baseUrl}${path}`, {
    method: "POST",
    body,
    headers: { "content-type": "application/json", "x-service-key-id": keyId, "x-service-signature": sign(null, body, key).toString("base64") },
  });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

describe("execution receipts and reconciliation (early access)", () => {
  let svc: TestService;
  let org: { organizationId: string; apiKey: string };
  let agent: { agent_id: string; certificate_id: string; key: KeyObject };
  let integrationId: string;
  let adapter: { adapter_id: string; key: KeyObject };
  let destination: { adapter_id: string; key: KeyObject };

  beforeAll(async () => {
    svc = await startService();
    org = await svc.newOrg();
    const bearer = org.apiKey;
    const approver = (await svc.v1("POST", "/v1/organization/api-keys", { bearer, body: { name: "approver", permissions: ["POLICY_APPROVER"] } })).body.api_key;
    const principal = (await svc.v1("POST", "/v1/principals", { bearer, body: { display_name: "Buyer", kind: "person" } })).body;
    const ak = keypair();
    const a = (await svc.v1("POST", "/v1/agents", { bearer, body: { name: "buyer-bot", acting_for_principal_id: principal.principal_id, public_key: ak.wire } })).body;
    await svc.v1("POST", `/v1/agents/${a.agent_id}/activate`, { bearer });
    agent = { agent_id: a.agent_id, certificate_id: a.certificate_id, key: ak.privateKey };
    integrationId = (await svc.v1("POST", "/v1/integrations", { bearer, body: { name: "erp", actions: ["reference_noop"] } })).body.integration_id;
    await svc.v1("POST", `/v1/integrations/${integrationId}/contract-versions`, { bearer, body: { resource_path: "resource", context_bindings: { po: "context.po" } } });
    expect((await svc.v1("POST", `/v1/integrations/${integrationId}/contract-versions/1/approve`, { bearer: approver })).status).toBe(200);
    const adk = keypair();
    adapter = { adapter_id: (await svc.v1("POST", `/v1/integrations/${integrationId}/adapters`, { bearer, body: { name: "adapter", public_key: adk.wire } })).body.adapter_id, key: adk.privateKey };
    const dk = keypair();
    const dest = await svc.v1("POST", `/v1/integrations/${integrationId}/adapters`, { bearer, body: { name: "erp-destination", public_key: dk.wire, role: "destination" } });
    expect(dest.body.role).toBe("destination");
    destination = { adapter_id: dest.body.adapter_id, key: dk.privateKey };
  });
  afterAll(async () => {
    await svc?.close();
  });

  /** An ALLOW decision for PO `po`, its Capability, optionally consumed. */
  async function authorized(po: string, consume = true) {
    const intent = await signedPost(svc, "/v1/intents", agent.certificate_id, agent.key, {
      agent_id: agent.agent_id, action: "reference_noop", resource: `po:${po}`, context: { po }, requested_at: new Date().toISOString(), nonce: randomUUID(),
    });
    expect(intent.body.outcome).toBe("ALLOW");
    const cap = (await svc.v1("POST", `/v1/decisions/${intent.body.decision_id}/capability-token`, { bearer: org.apiKey, body: { audience: "erp", issued_by: "test" } })).body;
    if (consume) {
      const v = await svc.v1("POST", "/v1/capability-tokens/verify", { bearer: org.apiKey, body: { token: cap.token, audience: "erp", action: "reference_noop", resource: `po:${po}`, constraints: { po } } });
      expect(v.status).toBe(200);
    }
    return { decisionId: intent.body.decision_id as string, capabilityId: cap.capability_id as string };
  }

  function receipt(by: { adapter_id: string; key: KeyObject }, capabilityId: string, status: string, executed: Record<string, string>, receiptId = randomUUID()) {
    return signedPost(svc, "/v1alpha/execution-receipts", by.adapter_id, by.key, { capability_id: capabilityId, receipt_id: receiptId, status, executed_fields: executed, reported_at: new Date().toISOString() });
  }

  async function reconcile(decisionId: string) {
    const client = createClient(ReconciliationService, createGrpcTransport({ baseUrl: svc.baseUrl }));
    const r = await client.reconcile({ decisionId }, { headers: { "x-service-operator-key": svc.operatorKey!, "x-service-organization-id": org.organizationId } });
    const decision = (await svc.v1("GET", `/v1/decisions/${decisionId}`, { bearer: org.apiKey })).body;
    expect(decision.reconciliation.status).toBe(ReconciliationStatus[r.status].replace("RECONCILIATION_STATUS_", ""));
    return decision.reconciliation as { status: string; receipt_id: string; reported_by: string; reconciled_at: string };
  }

  it("MATCHED: the adapter reports exactly the bound fields", async () => {
    const { decisionId, capabilityId } = await authorized("1");
    const r = await receipt(adapter, capabilityId, "executed", { po: "1", resource: "po:1", extra: "ignored" });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ status: "executed", reported_by: adapter.adapter_id, decision_id: decisionId });
    const rec = await reconcile(decisionId);
    expect(rec).toMatchObject({ status: "MATCHED", receipt_id: r.body.receipt_id, reported_by: adapter.adapter_id });
    expect(rec.reconciled_at).toMatch(/\.\d{3}Z$/);
  });

  it("refuses a reported_at that is not a real RFC 3339 instant in years 1970..9999 (422), storing nothing", async () => {
    const { capabilityId } = await authorized("edge");
    for (const reportedAt of ["-004714-11-23T00:00:00Z", "0000-01-01T00:00:00Z", "+010000-01-01T00:00:00.000Z", "2024-02-30T00:00:00Z", "2024-01-01T24:00:00Z", "2024-01-01", "9999-12-31T23:00:00-05:00"]) {
      const receiptId = randomUUID();
      const doc = { capability_id: capabilityId, receipt_id: receiptId, status: "executed", executed_fields: { po: "edge" }, reported_at: reportedAt };
      const r = await signedPost(svc, "/v1alpha/execution-receipts", adapter.adapter_id, adapter.key, doc);
      expect(r.status, `${reportedAt}: ${JSON.stringify(r.body)}`).toBe(422);
      expect(r.body.errors).toContainEqual(expect.objectContaining({ field: "reported_at" }));
      // Nothing was stored: the same receipt id with a good time is accepted as new.
      const ok = await signedPost(svc, "/v1alpha/execution-receipts", adapter.adapter_id, adapter.key, { ...doc, reported_at: new Date().toISOString() });
      expect(ok.status).toBe(200);
      expect(ok.body.receipt_id).toBe(receiptId);
    }
  });

  it("MISMATCHED: a bound field differs from what was authorized", async () => {
    const { decisionId, capabilityId } = await authorized("2");
    expect((await receipt(destination, capabilityId, "executed", { po: "3", resource: "po:2" })).status).toBe(200);
    expect((await reconcile(decisionId)).status).toBe("MISMATCHED");
  });

  it("EXECUTION_FAILED and PARTIAL follow the reported status", async () => {
    const failed = await authorized("4");
    await receipt(adapter, failed.capabilityId, "failed", {});
    expect((await reconcile(failed.decisionId)).status).toBe("EXECUTION_FAILED");
    const partial = await authorized("5");
    await receipt(adapter, partial.capabilityId, "partial", { po: "5" });
    expect((await reconcile(partial.decisionId)).status).toBe("PARTIAL");
  });

  it("RECEIPT_MISSING for a consumed Capability without a receipt, and nothing else happens", async () => {
    const { decisionId, capabilityId } = await authorized("6");
    const rec = await reconcile(decisionId);
    expect(rec).toMatchObject({ status: "RECEIPT_MISSING", receipt_id: "", reported_by: "" });
    // Uncertain outcome: the Capability stays consumed, is never relabelled, and none is reissued.
    expect((await svc.v1("GET", `/v1/capabilities/${capabilityId}`, { bearer: org.apiKey })).body.state).toBe("consumed");
    const again = await svc.v1("POST", `/v1/decisions/${decisionId}/capability-token`, { bearer: org.apiKey, body: { audience: "erp", issued_by: "test" } });
    expect(again.body.detail).toBe("capability_already_issued");
    expect((await svc.v1("GET", `/v1/decisions/${decisionId}`, { bearer: org.apiKey })).body.outcome).toBe("ALLOW");
  });

  it("INDETERMINATE for conflicting receipts, and for a receipt that omits a bound field", async () => {
    const conflict = await authorized("7");
    await receipt(adapter, conflict.capabilityId, "executed", { po: "7", resource: "po:7" });
    await receipt(destination, conflict.capabilityId, "failed", {});
    expect((await reconcile(conflict.decisionId)).status).toBe("INDETERMINATE");
    const silent = await authorized("8");
    await receipt(adapter, silent.capabilityId, "executed", { resource: "po:8" });
    expect((await reconcile(silent.decisionId)).status).toBe("INDETERMINATE");
  });

  it("refuses receipts signed by the agent (401), mis-signed (401), for an unconsumed Capability (409) or another org's (404); duplicates are idempotent", async () => {
    const { capabilityId } = await authorized("9");
    const doc = { capability_id: capabilityId, receipt_id: randomUUID(), status: "executed", executed_fields: { po: "9" }, reported_at: new Date().toISOString() };
    const byAgent = await signedPost(svc, "/v1alpha/execution-receipts", agent.certificate_id, agent.key, doc);
    expect(byAgent.status).toBe(401);
    expect(byAgent.body.detail).toBe("unknown_key");
    const misSigned = await signedPost(svc, "/v1alpha/execution-receipts", adapter.adapter_id, agent.key, doc);
    expect(misSigned.status).toBe(401);
    expect(misSigned.body.detail).toBe("signature_invalid");
    const first = await signedPost(svc, "/v1alpha/execution-receipts", adapter.adapter_id, adapter.key, doc);
    const second = await signedPost(svc, "/v1alpha/execution-receipts", adapter.adapter_id, adapter.key, doc);
    expect(second.status).toBe(200);
    expect(second.body.evidence_id).toBe(first.body.evidence_id);
    const reused = await signedPost(svc, "/v1alpha/execution-receipts", adapter.adapter_id, adapter.key, { ...doc, status: "failed" });
    expect(reused.status).toBe(409);

    const unconsumed = await authorized("10", false);
    expect((await receipt(adapter, unconsumed.capabilityId, "executed", { po: "10" })).status).toBe(409);

    const other = await svc.newOrg();
    const otherPrincipal = (await svc.v1("POST", "/v1/principals", { bearer: other.apiKey, body: { display_name: "X", kind: "service" } })).body;
    const otherIntegration = (await svc.v1("POST", "/v1/integrations", { bearer: other.apiKey, body: { name: "other", actions: ["x_action"] } })).body.integration_id;
    const ok = keypair();
    const otherAdapter = (await svc.v1("POST", `/v1/integrations/${otherIntegration}/adapters`, { bearer: other.apiKey, body: { name: "o", public_key: ok.wire } })).body.adapter_id;
    expect(otherPrincipal.principal_id).toBeTruthy();
    const cross = await receipt({ adapter_id: otherAdapter, key: ok.privateKey }, capabilityId, "executed", { po: "9" });
    expect(cross.status).toBe(404);
  });

  it("compares the adapter's independent report with the Intent on the declared fields", async () => {
    const { decisionId } = await authorized("11", false);
    const report = (operation: Record<string, string>) =>
      signedPost(svc, "/v1alpha/adapter-reports", adapter.adapter_id, adapter.key, { decision_id: decisionId, report_id: randomUUID(), operation, reported_at: new Date().toISOString() });
    expect((await report({ po: "11", resource: "po:11" })).body).toMatchObject({ comparison: "MATCHED", differing_fields: [] });
    expect((await report({ po: "12", resource: "po:11" })).body).toMatchObject({ comparison: "MISMATCHED", differing_fields: ["po"] });
    const byDestination = await signedPost(svc, "/v1alpha/adapter-reports", destination.adapter_id, destination.key, { decision_id: decisionId, report_id: randomUUID(), operation: {}, reported_at: new Date().toISOString() });
    expect(byDestination.status).toBe(401);
  });

  it("binds Capabilities to the adapter: a revoked adapter blocks consumption", async () => {
    const intent = await signedPost(svc, "/v1/intents", agent.certificate_id, agent.key, {
      agent_id: agent.agent_id, action: "reference_noop", resource: "po:14", context: { po: "14" }, requested_at: new Date().toISOString(), nonce: randomUUID(),
    });
    const cap = (await svc.v1("POST", `/v1/decisions/${intent.body.decision_id}/capability-token`, { bearer: org.apiKey, body: { audience: "erp", issued_by: "test" } })).body;
    const revoked = await svc.v1("POST", `/v1/integrations/${integrationId}/adapters/${adapter.adapter_id}/revoke`, { bearer: org.apiKey });
    expect(revoked.body.state).toBe("revoked");
    const v = await svc.v1("POST", "/v1/capability-tokens/verify", { bearer: org.apiKey, body: { token: cap.token, audience: "erp", action: "reference_noop", resource: "po:14", constraints: { po: "14" } } });
    expect(v.status).toBe(403);
    expect(v.body.detail).toBe("capability_dependency_inactive");
    const late = await receipt(adapter, cap.capability_id, "executed", {});
    expect(late.status).toBe(403);
  });

  it("keeps reconciliation internal: the operator key alone, no /v1 route, and the CLI records one", async () => {
    const client = createClient(ReconciliationService, createGrpcTransport({ baseUrl: svc.baseUrl }));
    // Runs after the adapter was revoked: the Capability stays unconsumed, so nothing can have executed.
    const { decisionId } = await authorized("15", false);
    await expect(client.reconcile({ decisionId }, { headers: { authorization: `Bearer ${org.apiKey}` } })).rejects.toSatisfy(
      (e: unknown) => ConnectError.from(e).code === Code.Unauthenticated,
    );
    const { stdout } = await run(process.execPath, ["--import", "tsx", "src/cli/main.ts", "reconcile", "--url", svc.baseUrl, "--organization", org.organizationId, decisionId], {
      env: { ...process.env, MANDATE_OPERATOR_KEY: svc.operatorKey },
    });
    expect(JSON.parse(stdout)).toMatchObject({ decision_id: decisionId, status: "INDETERMINATE" });
  });
});
