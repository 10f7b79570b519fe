import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { Organizations, ApiKeyRow, OrganizationRow } from "../domain/organizations.js";
import { OrganizationService } from "../gen/mandate/v1/organizations_pb.js";
import { PERMISSIONS } from "../base/caller.js";
import { orgCaller } from "./context.js";
import { enumCodec, permissionFromProto, permissionToProto, ts } from "./convert.js";

const organizationState = enumCodec(["active", "suspended"] as const, "state");

const organization = (row: OrganizationRow) => ({
  organizationId: row.organization_id,
  name: row.name,
  sandbox: row.sandbox,
  createdAt: ts(row.created_at),
  state: organizationState.toProto(row.state),
});

const apiKey = (row: ApiKeyRow) => ({
  keyId: row.key_id,
  name: row.name,
  permissions: row.permissions.map(permissionToProto),
  createdAt: ts(row.created_at),
  revokedAt: ts(row.revoked_at),
});

/** OrganizationService: organizations and their API keys. */
export class OrganizationServiceImpl implements ServiceImpl<typeof OrganizationService> {
  constructor(private readonly organizations: Organizations) {}

  async createOrganization(req: { name: string }) {
    const { org, key } = await this.organizations.create(req.name);
    return { organizationId: org.organization_id, apiKey: key.secret, organization: organization(org) };
  }

  async getOrganization(_req: unknown, ctx: HandlerContext) {
    return organization(await this.organizations.get(orgCaller(ctx)));
  }

  getCaller(_req: unknown, ctx: HandlerContext) {
    const caller = orgCaller(ctx);
    return {
      organizationId: caller.organizationId,
      identity: caller.identity,
      // In the permissions' own order, whatever order the key was created with.
      permissions: PERMISSIONS.filter((p) => caller.permissions.has(p)).map(permissionToProto),
    };
  }

  async createApiKey(req: { name: string; permissions: number[] }, ctx: HandlerContext) {
    const permissions = req.permissions.map((p, i) => permissionFromProto(p, `permissions[${i}]`));
    const { row, secret } = await this.organizations.createKey(orgCaller(ctx), req.name, permissions);
    return { ...apiKey(row), apiKey: secret };
  }

  async listApiKeys(_req: unknown, ctx: HandlerContext) {
    return { apiKeys: (await this.organizations.listKeys(orgCaller(ctx))).map(apiKey) };
  }

  async revokeApiKey(req: { keyId: string }, ctx: HandlerContext) {
    return apiKey(await this.organizations.revokeKey(orgCaller(ctx), req.keyId));
  }

  async suspendOrganization(req: { organizationId: string }) {
    return organization(await this.organizations.setState(req.organizationId, "suspended"));
  }

  async reactivateOrganization(req: { organizationId: string }) {
    return organization(await this.organizations.setState(req.organizationId, "active"));
  }
}
