import type { Database } from "../storage/postgres/database.js";
import { isUniqueViolation } from "../storage/postgres/database.js";
import { agentStore } from "../storage/postgres/agents.js";
import { integrationStore, type AdapterRow, type ContractVersionRow, type IntegrationRow } from "../storage/postgres/integrations.js";
import type { OrgCaller } from "../base/caller.js";
import { MandateError, notFound, validationFailed, type FieldError } from "../base/errors.js";
import type { EvidenceLog } from "./evidence-log.js";
import { newId } from "./ids.js";
import { parsePublicKey } from "./signatures.js";

/** The stored shapes this module hands to services. */
export type { AdapterRow, ContractVersionRow } from "../storage/postgres/integrations.js";

/** An integration with its contracts and adapters. */
export interface IntegrationView extends IntegrationRow {
  contracts: ContractVersionRow[];
  adapters: AdapterRow[];
}

const PATH = /^[a-z_][a-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_.-]*)*$/;
const CONTEXT_KEY = /^[A-Za-z_][A-Za-z0-9_.-]{0,63}$/;

/** Integrations, their governance-approved contracts and trusted adapters. */
export class Integrations {
  constructor(
    private readonly db: Database,
    private readonly evidence: EvidenceLog,
    private readonly onStateChange: (organizationId: string, integrationId: string, state: "active" | "inactive") => Promise<void> = async () => undefined,
  ) {}

  private async views(caller: OrgCaller, id?: string): Promise<IntegrationView[]> {
    const rows = await integrationStore.list(this.db.pool, caller.organizationId, id);
    const ids = rows.map((r) => r.integration_id);
    const [contracts, adapters] = await Promise.all([integrationStore.contracts(this.db.pool, ids), integrationStore.adapters(this.db.pool, ids)]);
    return rows.map((r) => ({
      ...r,
      contracts: contracts.filter((c) => c.integration_id === r.integration_id),
      adapters: adapters.filter((a) => a.integration_id === r.integration_id),
    }));
  }

  /** Creates an integration; each action belongs to at most one integration (409 otherwise). */
  async create(caller: OrgCaller, name: string, actions: readonly string[]): Promise<IntegrationView> {
    const errors: FieldError[] = [];
    if (!name.trim() || name.length > 200) errors.push({ field: "name", code: "required", message: "1..200 characters" });
    if (actions.length === 0) errors.push({ field: "actions", code: "required", message: "at least one action" });
    actions.forEach((a, i) => {
      if (!/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/.test(a)) errors.push({ field: `actions[${i}]`, code: "invalid_format", message: "an action name" });
    });
    if (errors.length) throw validationFailed(errors);
    const id = newId("int");
    try {
      await this.db.transaction((tx) => integrationStore.insert(tx, { integration_id: id, organization_id: caller.organizationId, name: name.trim(), actions: [...new Set(actions)] }));
    } catch (err) {
      if (isUniqueViolation(err)) throw new MandateError("already_exists", "An action is already covered by another integration.");
      throw err;
    }
    return this.get(caller, id);
  }

  /** One integration; 404 for another organization's. */
  async get(caller: OrgCaller, id: string): Promise<IntegrationView> {
    const [view] = await this.views(caller, id);
    if (!view) throw notFound("Integration");
    return view;
  }

  /** Every integration of the organization. */
  list(caller: OrgCaller): Promise<IntegrationView[]> {
    return this.views(caller);
  }

  /** active ⇄ suspended; a suspended integration blocks consumption of its Capabilities. */
  async setState(caller: OrgCaller, id: string, to: "active" | "suspended"): Promise<IntegrationView> {
    const from = to === "active" ? "suspended" : "active";
    await this.db.transaction(async (tx) => {
      if (!(await integrationStore.setState(tx, caller.organizationId, id, from, to))) {
        const [row] = await integrationStore.list(tx, caller.organizationId, id);
        if (!row) throw notFound("Integration");
        throw new MandateError("invalid_transition", `The integration is ${row.state}.`);
      }
      await this.evidence.append(tx, [{ organizationId: caller.organizationId, kind: `integration.${to === "active" ? "reactivated" : "suspended"}`, subjectId: id, payload: { integration_id: id, to, by: caller.identity } }]);
    });
    const view = await this.get(caller, id);
    const bound = view.adapters.filter((a) => a.role === "adapter");
    await this.onStateChange(caller.organizationId, id, view.state === "active" && bound.every((a) => a.state === "active") ? "active" : "inactive");
    return view;
  }

  /** Proposes a contract version `{resource_path, context_bindings}`. */
  async proposeContract(caller: OrgCaller, id: string, resourcePath: string, bindings: Record<string, string>): Promise<ContractVersionRow> {
    const errors: FieldError[] = [];
    if (!PATH.test(resourcePath)) errors.push({ field: "resource_path", code: "invalid_format", message: "a dotted path such as resource" });
    for (const [k, v] of Object.entries(bindings)) {
      if (!CONTEXT_KEY.test(k)) errors.push({ field: `context_bindings.${k}`, code: "invalid_format", message: "context keys are identifiers" });
      if (!PATH.test(v)) errors.push({ field: `context_bindings.${k}`, code: "invalid_format", message: "a dotted path such as context.po_number" });
    }
    if (errors.length) throw validationFailed(errors);
    await this.get(caller, id);
    return this.db.transaction((tx) => integrationStore.insertContract(tx, { integration_id: id, resource_path: resourcePath, context_bindings: bindings, author: caller.identity }));
  }

  /** Approves (activates) a contract version, never by its author. */
  async approveContract(caller: OrgCaller, id: string, version: number): Promise<ContractVersionRow> {
    await this.get(caller, id);
    return this.db.transaction(async (tx) => {
      const c = await integrationStore.lockContract(tx, id, version);
      if (!c) throw notFound("Contract version");
      if (c.state !== "proposed") throw new MandateError("invalid_transition", `The contract version is ${c.state}.`);
      if (c.author === caller.identity) throw new MandateError("permission_denied", "A contract version cannot be approved by its author.");
      await integrationStore.activateContract(tx, id, version, caller.identity);
      await this.evidence.append(tx, [
        { organizationId: caller.organizationId, kind: "contract.approved", subjectId: id, payload: { integration_id: id, version, resource_path: c.resource_path, context_bindings: c.context_bindings, author: c.author, by: caller.identity } },
      ]);
      return { ...c, state: "active", approver: caller.identity };
    });
  }

  /** Registers the integration's trusted adapter: its own Ed25519 identity, never an agent's key. */
  async registerAdapter(caller: OrgCaller, id: string, name: string, publicKey: string, role: AdapterRow["role"] = "adapter"): Promise<AdapterRow> {
    parsePublicKey(publicKey);
    if (!name.trim() || name.length > 200) throw validationFailed([{ field: "name", code: "required", message: "1..200 characters" }]);
    await this.get(caller, id);
    if (await agentStore.certificateByKey(this.db.pool, publicKey)) {
      throw new MandateError("already_exists", "This key belongs to an agent; an adapter needs its own identity.");
    }
    try {
      return await this.db.transaction(async (tx) => {
        const a = await integrationStore.insertAdapter(tx, { adapter_id: newId("adp"), integration_id: id, organization_id: caller.organizationId, name: name.trim(), public_key: publicKey, role });
        await this.evidence.append(tx, [
          { organizationId: caller.organizationId, kind: "adapter.registered", subjectId: a.adapter_id, payload: { adapter_id: a.adapter_id, integration_id: id, role, public_key: publicKey, by: caller.identity } },
        ]);
        return a;
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw new MandateError("already_exists", "This key is already registered.");
      throw err;
    }
  }

  /** Adapter lifecycle: suspend, reactivate, revoke (terminal); each leaves a signed record and reaches the Redis mirror. */
  async transitionAdapter(caller: OrgCaller, integrationId: string, adapterId: string, op: "suspend" | "reactivate" | "revoke"): Promise<AdapterRow> {
    const rule = { suspend: { from: ["active"], to: "suspended" }, reactivate: { from: ["suspended"], to: "active" }, revoke: { from: ["active", "suspended"], to: "revoked" } }[op];
    const adapter = await this.db.transaction(async (tx) => {
      const a = await integrationStore.setAdapterState(tx, caller.organizationId, integrationId, adapterId, rule.from, rule.to);
      if (!a) {
        const view = await this.get(caller, integrationId);
        const current = view.adapters.find((x) => x.adapter_id === adapterId);
        if (!current) throw notFound("Adapter");
        throw new MandateError("invalid_transition", `Cannot ${op} an adapter that is ${current.state}.`);
      }
      await this.evidence.append(tx, [
        { organizationId: caller.organizationId, kind: `adapter.${rule.to}`, subjectId: adapterId, payload: { adapter_id: adapterId, integration_id: integrationId, to: rule.to, by: caller.identity } },
      ]);
      return a;
    });
    const view = await this.get(caller, integrationId);
    const bound = view.adapters.filter((a) => a.role === "adapter");
    await this.onStateChange(caller.organizationId, integrationId, view.state === "active" && bound.every((a) => a.state === "active") ? "active" : "inactive");
    return adapter;
  }
}
