import { hash } from "node:crypto";
import type { CapabilityStore } from "../storage/capabilities.js";
import type { DecisionStore } from "../storage/decisions.js";
import type { AdapterReportRow, ExecutionStore, ReceiptRow, ReconciliationRow } from "../storage/execution.js";
import type { IntegrationStore } from "../storage/integrations.js";
import type { OrgCaller } from "../base/caller.js";
import { MandateError, notFound, validationFailed, type FieldError } from "../base/errors.js";
import { newId } from "./ids.js";
import { valueAt } from "./intents.js";
import { parsePublicKey, signatureValid } from "./signatures.js";
import { parseInstant } from "../base/instants.js";
import { parseJsonObject } from "../base/text.js";

/** The stored shapes this module hands to services. */
export type { AdapterReportRow, ReceiptRow, ReconciliationRow } from "../storage/execution.js";

type Json = Record<string, unknown>;

function parseSigned(bytes: Uint8Array, fields: readonly string[]): Json {
  const doc = parseJsonObject(bytes);
  const errors: FieldError[] = Object.keys(doc).filter((k) => !fields.includes(k)).map((k) => ({ field: k, code: "unknown_field", message: "unknown field" }));
  if (errors.length) throw validationFailed(errors);
  return doc;
}

function requireString(errors: FieldError[], d: Json, key: string, max = 128): string {
  const v = d[key];
  if (typeof v !== "string" || v.length === 0 || v.length > max) errors.push({ field: key, code: "required", message: `a string of 1..${max} characters` });
  return typeof v === "string" ? v : "";
}

function stringMap(errors: FieldError[], d: Json, key: string): Record<string, string> {
  const v = d[key];
  if (typeof v !== "object" || v === null || Array.isArray(v) || !Object.values(v).every((x) => typeof x === "string")) {
    errors.push({ field: key, code: "invalid_type", message: "an object of string values" });
    return {};
  }
  return v as Record<string, string>;
}

function timestamp(errors: FieldError[], d: Json, key: string): Date {
  const at = parseInstant(d[key]);
  if (!at) errors.push({ field: key, code: "invalid_format", message: "an RFC 3339 timestamp in years 1970..9999" });
  return at ?? new Date(NaN);
}


/**
 * Early access: what trusted adapters and destinations report, and the
 * reconciliation of receipts against what was authorized. It authenticates who
 * reported and compares content; it never claims the real-world outcome.
 */
export class Execution {
  constructor(
    private readonly execution: ExecutionStore,
    private readonly integrations: Pick<IntegrationStore, "adapter">,
    private readonly decisions: Pick<DecisionStore, "get">,
    private readonly capabilities: Pick<CapabilityStore, "get" | "byDecision" | "contractBindings">,
  ) {}

  /** The adapter or destination identity that signed `bytes`; 401 for anything else (an agent's key included). */
  private async reporter(keyId: string, signature: string, bytes: Uint8Array, role?: "adapter") {
    const adapter = keyId.length <= 64 ? await this.integrations.adapter(keyId) : null;
    if (!adapter || (role && adapter.role !== role)) throw new MandateError("unknown_key", "The signer is not a registered adapter or destination identity.");
    if (!signatureValid(parsePublicKey(adapter.public_key), signature, bytes)) throw new MandateError("signature_invalid", "The signature does not verify over the request body.");
    if (adapter.state !== "active") throw new MandateError("permission_denied", `The reporting identity is ${adapter.state}.`);
    return adapter;
  }

  /** Records a signed execution receipt for a consumed Capability of the reporter's integration. Idempotent per receipt_id. */
  async submitReceipt(keyId: string, signature: string, bytes: Uint8Array): Promise<ReceiptRow> {
    const adapter = await this.reporter(keyId, signature, bytes);
    const d = parseSigned(bytes, ["capability_id", "receipt_id", "status", "executed_fields", "reported_at"]);
    const errors: FieldError[] = [];
    const capabilityId = requireString(errors, d, "capability_id");
    const receiptId = requireString(errors, d, "receipt_id");
    const status = d.status;
    if (status !== "executed" && status !== "failed" && status !== "partial") errors.push({ field: "status", code: "invalid_enum", message: 'one of "executed", "failed", "partial"' });
    const executed = stringMap(errors, d, "executed_fields");
    const reportedAt = timestamp(errors, d, "reported_at");
    if (errors.length) throw validationFailed(errors);
    const cap = await this.capabilities.get(adapter.organization_id, capabilityId);
    // Another organization's capability, or one outside the reporter's integration, does not exist for it.
    if (!cap || cap.integration_id !== adapter.integration_id) throw notFound("Capability");
    if (!cap.consumed_at) throw new MandateError("invalid_transition", "The Capability was never consumed; nothing can have executed under it.");
    const bodySha = hash("sha256", bytes, "buffer");
    const { row, inserted } = await this.execution.recordReceipt(
      {
        organization_id: adapter.organization_id,
        receipt_id: receiptId,
        capability_id: capabilityId,
        decision_id: cap.decision_id,
        reported_by: adapter.adapter_id,
        status: status as ReceiptRow["status"],
        executed_fields: executed,
        reported_at: reportedAt,
        body_sha256: bodySha,
      },
      {
        organizationId: adapter.organization_id,
        kind: "receipt.received",
        subjectId: cap.decision_id,
        payload: { receipt_id: receiptId, capability_id: capabilityId, decision_id: cap.decision_id, reported_by: adapter.adapter_id, role: adapter.role, status: status as string, executed_fields: executed, reported_at: reportedAt.toISOString(), receipt_sha256: bodySha.toString("hex") },
      },
    );
    if (!inserted && !row.body_sha256.equals(bodySha)) throw new MandateError("already_exists", "This receipt_id was already used for a different receipt.");
    return row;
  }

  /** Records an adapter's independent report of an attempted operation, compared with the Intent on the contract's declared fields. */
  async submitAdapterReport(keyId: string, signature: string, bytes: Uint8Array): Promise<AdapterReportRow> {
    const adapter = await this.reporter(keyId, signature, bytes, "adapter");
    const d = parseSigned(bytes, ["decision_id", "report_id", "operation", "reported_at"]);
    const errors: FieldError[] = [];
    const decisionId = requireString(errors, d, "decision_id");
    const reportId = requireString(errors, d, "report_id");
    const operation = stringMap(errors, d, "operation");
    timestamp(errors, d, "reported_at");
    if (errors.length) throw validationFailed(errors);
    const decision = await this.decisions.get(adapter.organization_id, decisionId);
    if (!decision || decision.integration_id !== adapter.integration_id || !decision.contract_version) throw notFound("Decision");
    const contract = (await this.capabilities.contractBindings(adapter.integration_id, decision.contract_version))!;
    const declared: Record<string, string> = { ...contract.context_bindings, resource: contract.resource_path };
    const differing = Object.entries(declared)
      .filter(([field, path]) => {
        const v = valueAt(decision.intent, path);
        return (v === undefined ? undefined : String(v)) !== operation[field];
      })
      .map(([field]) => field);
    const bodySha = hash("sha256", bytes, "buffer");
    const comparison = differing.length ? "MISMATCHED" : "MATCHED";
    const { row, inserted } = await this.execution.recordAdapterReport(
      {
        organization_id: adapter.organization_id,
        report_id: reportId,
        decision_id: decisionId,
        adapter_id: adapter.adapter_id,
        operation,
        comparison,
        differing_fields: differing,
        body_sha256: bodySha,
      },
      {
        organizationId: adapter.organization_id,
        kind: "adapter.report_received",
        subjectId: decisionId,
        payload: { report_id: reportId, decision_id: decisionId, adapter_id: adapter.adapter_id, operation, comparison, differing_fields: differing },
      },
    );
    if (!inserted && !row.body_sha256.equals(bodySha)) throw new MandateError("already_exists", "This report_id was already used for a different report.");
    return row;
  }

  /**
   * Computes and records the reconciliation of a decision (exactly one of the
   * six outcomes). A consumed Capability without a receipt is RECEIPT_MISSING
   * and nothing else happens: no failure label, no retry, no reissue.
   */
  async reconcile(caller: OrgCaller, decisionId: string): Promise<ReconciliationRow> {
    const decision = await this.decisions.get(caller.organizationId, decisionId);
    if (!decision) throw notFound("Decision");
    const cap = await this.capabilities.byDecision(caller.organizationId, decisionId);
    const receipts = await this.execution.receipts(caller.organizationId, decisionId);
    const verdict = ((): Pick<ReconciliationRow, "status" | "receipt_id" | "reported_by"> => {
      const none = { receipt_id: "", reported_by: "" };
      // Nothing was authorized to execute, or receipts disagree: no confident answer.
      if (!cap?.consumed_at) return { status: "INDETERMINATE", ...none };
      if (receipts.length === 0) return { status: "RECEIPT_MISSING", ...none };
      const first = receipts[0]!;
      const same = (r: ReceiptRow) => r.status === first.status && JSON.stringify(Object.entries(r.executed_fields).sort()) === JSON.stringify(Object.entries(first.executed_fields).sort());
      const latest = receipts[receipts.length - 1]!;
      const ref = { receipt_id: latest.receipt_id, reported_by: latest.reported_by };
      if (!receipts.every(same)) return { status: "INDETERMINATE", ...ref };
      if (first.status === "failed") return { status: "EXECUTION_FAILED", ...ref };
      if (first.status === "partial") return { status: "PARTIAL", ...ref };
      // Only the bound (declared) fields are compared; undeclared ones are neither compared nor protected.
      const authorized: Record<string, string> = { ...cap.constraints, ...(cap.resource ? { resource: cap.resource } : {}) };
      const reported = first.executed_fields;
      if (Object.entries(authorized).some(([k, v]) => k in reported && reported[k] !== v)) return { status: "MISMATCHED", ...ref };
      if (Object.keys(authorized).some((k) => !(k in reported))) return { status: "INDETERMINATE", ...ref };
      return { status: "MATCHED", ...ref };
    })();
    const reconciledAt = new Date();
    return this.execution.recordReconciliation(
      { reconciliation_id: newId("rec"), organization_id: caller.organizationId, decision_id: decisionId, ...verdict, reconciled_at: reconciledAt },
      {
        organizationId: caller.organizationId,
        kind: "reconciliation",
        subjectId: decisionId,
        payload: { decision_id: decisionId, status: verdict.status, receipt_id: verdict.receipt_id, reported_by: verdict.reported_by, receipts: receipts.map((r) => r.receipt_id), by: caller.identity, reconciled_at: reconciledAt.toISOString() },
      },
    );
  }

}
