import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { IntegrationView, Integrations, AdapterRow, ContractVersionRow, DeclaredFieldType } from "../domain/integrations.js";
import {
  IntegrationService,
  type AdapterStateRequest,
  type CreateContractVersionRequest,
  type FieldType,
  type RegisterAdapterRequest,
} from "../gen/mandate/v1/integrations_pb.js";
import { orgCaller } from "./context.js";
import { enumCodec, ts } from "./convert.js";

const states = enumCodec(["active", "suspended", "revoked"] as const, "state");
const roles = enumCodec(["adapter", "destination"] as const, "role");
const contractStates = enumCodec(["proposed", "active", "superseded"] as const, "state");
const fieldTypeKinds = enumCodec(["number", "string", "boolean", "timestamp", "enum"] as const, "field type");

// `values` is passed on only when given, so the domain can refuse it on a type other than enum.
const fieldTypesFromProto = (types: { [field: string]: FieldType }): Record<string, DeclaredFieldType> =>
  Object.fromEntries(
    Object.entries(types).map(([field, t]) => [
      field,
      { type: fieldTypeKinds.fromProto(t.type, `field_types.${field}.type`), required: t.required, ...(t.values.length > 0 ? { values: t.values } : {}) },
    ]),
  );

const contractMessage = (c: ContractVersionRow) => ({
  integrationId: c.integration_id,
  version: c.version,
  state: contractStates.toProto(c.state),
  resourcePath: c.resource_path,
  contextBindings: c.context_bindings,
  fieldTypes: Object.fromEntries(
    Object.entries(c.field_types).map(([field, t]) => [field, { type: fieldTypeKinds.toProto(t.type), required: t.required ?? false, values: t.values ?? [] }]),
  ),
  author: c.author,
  approver: c.approver ?? "",
  createdAt: ts(c.created_at),
});

const adapterMessage = (a: AdapterRow) => ({
  adapterId: a.adapter_id,
  integrationId: a.integration_id,
  name: a.name,
  publicKey: a.public_key,
  state: states.toProto(a.state),
  createdAt: ts(a.created_at),
  role: roles.toProto(a.role),
});

const integrationMessage = (i: IntegrationView) => ({
  integrationId: i.integration_id,
  name: i.name,
  actions: i.actions,
  state: states.toProto(i.state),
  contractVersions: i.contracts.map(contractMessage),
  adapters: i.adapters.map(adapterMessage),
  createdAt: ts(i.created_at),
});

/** IntegrationService. */
export class IntegrationServiceImpl implements ServiceImpl<typeof IntegrationService> {
  constructor(private readonly integrations: Integrations) {}

  async createIntegration(req: { name: string; actions: string[] }, ctx: HandlerContext) {
    return integrationMessage(await this.integrations.create(orgCaller(ctx), req.name, req.actions));
  }

  async listIntegrations(_req: unknown, ctx: HandlerContext) {
    return { integrations: (await this.integrations.list(orgCaller(ctx))).map(integrationMessage) };
  }

  async getIntegration(req: { integrationId: string }, ctx: HandlerContext) {
    return integrationMessage(await this.integrations.get(orgCaller(ctx), req.integrationId));
  }

  async suspendIntegration(req: { integrationId: string }, ctx: HandlerContext) {
    return integrationMessage(await this.integrations.setState(orgCaller(ctx), req.integrationId, "suspended"));
  }

  async reactivateIntegration(req: { integrationId: string }, ctx: HandlerContext) {
    return integrationMessage(await this.integrations.setState(orgCaller(ctx), req.integrationId, "active"));
  }

  async createContractVersion(req: CreateContractVersionRequest, ctx: HandlerContext) {
    const caller = orgCaller(ctx);
    return contractMessage(await this.integrations.proposeContract(caller, req.integrationId, req.resourcePath, req.contextBindings, fieldTypesFromProto(req.fieldTypes)));
  }

  async approveContractVersion(req: { integrationId: string; version: number }, ctx: HandlerContext) {
    return contractMessage(await this.integrations.approveContract(orgCaller(ctx), req.integrationId, req.version));
  }

  async registerAdapter(req: RegisterAdapterRequest, ctx: HandlerContext) {
    const role = req.role ? roles.fromProto(req.role, "role") : "adapter";
    return adapterMessage(await this.integrations.registerAdapter(orgCaller(ctx), req.integrationId, req.name, req.publicKey, role));
  }

  suspendAdapter = (req: AdapterStateRequest, ctx: HandlerContext) => this.adapterStep(req, ctx, "suspend");
  reactivateAdapter = (req: AdapterStateRequest, ctx: HandlerContext) => this.adapterStep(req, ctx, "reactivate");
  revokeAdapter = (req: AdapterStateRequest, ctx: HandlerContext) => this.adapterStep(req, ctx, "revoke");

  private async adapterStep(req: AdapterStateRequest, ctx: HandlerContext, op: "suspend" | "reactivate" | "revoke") {
    return adapterMessage(await this.integrations.transitionAdapter(orgCaller(ctx), req.integrationId, req.adapterId, op));
  }
}
