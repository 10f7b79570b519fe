import { CollisionError, NotFoundError } from "../storage/errors.js";
import type { AdapterRow, ContractVersionRow, DeclaredFieldType, IntegrationRow, IntegrationStore } from "../storage/integrations.js";
import { checkDeclaration, typesAllowedFor, type FieldDeclaration } from "../policy/field-types.js";
import type { OrgCaller } from "../base/caller.js";
import { MandateError, notFound, validationFailed, type FieldError } from "../base/errors.js";
import { newId } from "./ids.js";
import { parsePublicKey } from "./signatures.js";

/** The stored shapes this module hands to services. */
export type { AdapterRow, ContractVersionRow, DeclaredFieldType, IntegrationRow } from "../storage/integrations.js";

/** An integration with its contracts and adapters. */
export interface IntegrationView extends IntegrationRow {
  contracts: ContractVersionRow[];
  adapters: AdapterRow[];
}

const PATH = /^[a-z_][a-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_.-]*)*$/;
const CONTEXT_KEY = /^[A-Za-z_][A-Za-z0-9_.-]{0,63}$/;

/** Top-level Intent fields a contract may type whether or not it binds them. */
const TYPABLE_TOP_LEVEL = ["amount", "currency", "counterparty", "resource"];

// Problems with a contract's field_types, as field errors under `field_types.<field>`.
function fieldTypeErrors(resourcePath: string, bindings: Record<string, string>, fieldTypes: Record<string, unknown>): FieldError[] {
  const named = new Set<string>([...TYPABLE_TOP_LEVEL, resourcePath]);
  for (const [key, path] of Object.entries(bindings)) named.add(path).add(`context.${key}`);
  const errors: FieldError[] = [];
  for (const [field, declaration] of Object.entries(fieldTypes)) {
    const at = `field_types.${field}`;
    if (!named.has(field)) {
      errors.push({ field: at, code: "not_bound", message: "a typed field must be bound by the contract (resource_path or context_bindings) or be amount, currency, counterparty or resource" });
      continue;
    }
    const problems = checkDeclaration(declaration);
    for (const p of problems) errors.push({ field: [at, ...p.path].join("."), code: "invalid_field_type", message: p.message });
    const allowed = typesAllowedFor(field);
    if (problems.length === 0 && allowed && !allowed.includes((declaration as FieldDeclaration).type)) {
      errors.push({ field: `${at}.type`, code: "invalid_field_type", message: `${field} can only be declared as ${allowed.join(" or ")}` });
    }
  }
  return errors;
}

/** Integrations, their governance-approved contracts and trusted adapters. */
export class Integrations {
  constructor(
    private readonly integrations: IntegrationStore,
    private readonly onStateChange: (organizationId: string, integrationId: string, state: "active" | "inactive") => Promise<void> = async () => undefined,
  ) {}

  private async views(caller: OrgCaller, id?: string): Promise<IntegrationView[]> {
    const rows = await this.integrations.list(caller.organizationId, id);
    const ids = rows.map((r) => r.integration_id);
    const [contracts, adapters] = await Promise.all([this.integrations.contracts(ids), this.integrations.adapters(ids)]);
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
      await this.integrations.create({ integration_id: id, organization_id: caller.organizationId, name: name.trim(), actions: [...new Set(actions)] });
    } catch (err) {
      if (err instanceof CollisionError) throw new MandateError("already_exists", "An action is already covered by another integration.");
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
    try {
      await this.integrations.setState(caller.organizationId, id, (current) => {
        if (current.state !== from) throw new MandateError("invalid_transition", `The integration is ${current.state}.`);
        return {
          state: to,
          evidence: { organizationId: caller.organizationId, kind: `integration.${to === "active" ? "reactivated" : "suspended"}`, subjectId: id, payload: { integration_id: id, to, by: caller.identity } },
        };
      });
    } catch (err) {
      if (err instanceof NotFoundError) throw notFound("Integration");
      throw err;
    }
    const view = await this.get(caller, id);
    const bound = view.adapters.filter((a) => a.role === "adapter");
    await this.onStateChange(caller.organizationId, id, view.state === "active" && bound.every((a) => a.state === "active") ? "active" : "inactive");
    return view;
  }

  /**
   * Proposes a contract version `{resource_path, context_bindings, field_types}`. A typed field
   * must be one the contract names (its resource path, a binding's path or key) or a top-level
   * Intent field (amount, currency, counterparty, resource); an enum needs its values.
   */
  async proposeContract(
    caller: OrgCaller,
    id: string,
    resourcePath: string,
    bindings: Record<string, string>,
    fieldTypes: Record<string, FieldDeclaration> = {},
  ): Promise<ContractVersionRow> {
    const errors: FieldError[] = [];
    if (!PATH.test(resourcePath)) errors.push({ field: "resource_path", code: "invalid_format", message: "a dotted path such as resource" });
    for (const [k, v] of Object.entries(bindings)) {
      if (!CONTEXT_KEY.test(k)) errors.push({ field: `context_bindings.${k}`, code: "invalid_format", message: "context keys are identifiers" });
      if (!PATH.test(v)) errors.push({ field: `context_bindings.${k}`, code: "invalid_format", message: "a dotted path such as context.po_number" });
    }
    errors.push(...fieldTypeErrors(resourcePath, bindings, fieldTypes));
    if (errors.length) throw validationFailed(errors);
    try {
      return await this.integrations.proposeContract(caller.organizationId, {
        integration_id: id,
        resource_path: resourcePath,
        context_bindings: bindings,
        field_types: fieldTypes as Record<string, DeclaredFieldType>,
        author: caller.identity,
      });
    } catch (err) {
      if (err instanceof NotFoundError) throw notFound("Integration");
      throw err;
    }
  }

  /** Approves (activates) a contract version, never by its author. */
  async approveContract(caller: OrgCaller, id: string, version: number): Promise<ContractVersionRow> {
    await this.get(caller, id);
    try {
      return await this.integrations.approveContract(caller.organizationId, id, version, (c) => {
        if (c.state !== "proposed") throw new MandateError("invalid_transition", `The contract version is ${c.state}.`);
        if (c.author === caller.identity) throw new MandateError("permission_denied", "A contract version cannot be approved by its author.");
        return {
          approver: caller.identity,
          evidence: { organizationId: caller.organizationId, kind: "contract.approved", subjectId: id, payload: { integration_id: id, version, resource_path: c.resource_path, context_bindings: c.context_bindings, field_types: c.field_types, author: c.author, by: caller.identity } },
        };
      });
    } catch (err) {
      if (err instanceof NotFoundError) throw notFound("Contract version");
      throw err;
    }
  }

  /** Registers the integration's trusted adapter: its own Ed25519 identity, never an agent's key. */
  async registerAdapter(caller: OrgCaller, id: string, name: string, publicKey: string, role: AdapterRow["role"] = "adapter"): Promise<AdapterRow> {
    parsePublicKey(publicKey);
    if (!name.trim() || name.length > 200) throw validationFailed([{ field: "name", code: "required", message: "1..200 characters" }]);
    await this.get(caller, id);
    const adapterId = newId("adp");
    try {
      return await this.integrations.registerAdapter(
        { adapter_id: adapterId, integration_id: id, organization_id: caller.organizationId, name: name.trim(), public_key: publicKey, role },
        { organizationId: caller.organizationId, kind: "adapter.registered", subjectId: adapterId, payload: { adapter_id: adapterId, integration_id: id, role, public_key: publicKey, by: caller.identity } },
      );
    } catch (err) {
      // The database holds each key for one identity (migration 017), in the insert itself.
      if (err instanceof CollisionError && err.key === "public_key_held_by_certificate") {
        throw new MandateError("already_exists", "This key belongs to an agent; an adapter needs its own identity.");
      }
      if (err instanceof CollisionError) throw new MandateError("already_exists", "This key is already registered.");
      throw err;
    }
  }

  /** Adapter lifecycle: suspend, reactivate, revoke (terminal); each leaves a signed record and reaches the Redis mirror. */
  async transitionAdapter(caller: OrgCaller, integrationId: string, adapterId: string, op: "suspend" | "reactivate" | "revoke"): Promise<AdapterRow> {
    const rules: Record<typeof op, { from: readonly AdapterRow["state"][]; to: AdapterRow["state"] }> = {
      suspend: { from: ["active"], to: "suspended" },
      reactivate: { from: ["suspended"], to: "active" },
      revoke: { from: ["active", "suspended"], to: "revoked" },
    };
    const rule = rules[op];
    let adapter: AdapterRow;
    try {
      adapter = await this.integrations.setAdapterState(caller.organizationId, integrationId, adapterId, (current) => {
        if (!rule.from.includes(current.state)) throw new MandateError("invalid_transition", `Cannot ${op} an adapter that is ${current.state}.`);
        return {
          state: rule.to,
          evidence: { organizationId: caller.organizationId, kind: `adapter.${rule.to}`, subjectId: adapterId, payload: { adapter_id: adapterId, integration_id: integrationId, to: rule.to, by: caller.identity } },
        };
      });
    } catch (err) {
      if (err instanceof NotFoundError) {
        await this.get(caller, integrationId);
        throw notFound("Adapter");
      }
      throw err;
    }
    const view = await this.get(caller, integrationId);
    const bound = view.adapters.filter((a) => a.role === "adapter");
    await this.onStateChange(caller.organizationId, integrationId, view.state === "active" && bound.every((a) => a.state === "active") ? "active" : "inactive");
    return adapter;
  }
}
