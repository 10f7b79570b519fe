import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { Organizations } from "../domain/organizations.js";
import { SandboxService } from "../gen/mandate/v1/organizations_pb.js";
import { anyCaller } from "./context.js";

/** SandboxService: unauthenticated, rate-limited sandbox organizations. */
export class SandboxServiceImpl implements ServiceImpl<typeof SandboxService> {
  constructor(private readonly organizations: Organizations) {}

  async createSandboxOrganization(req: { email: string }, ctx: HandlerContext) {
    const { org, key } = await this.organizations.createSandbox(req.email, anyCaller(ctx).clientAddress);
    return { organizationId: org.organization_id, apiKey: key.secret, starterPolicyKey: "starter" };
  }
}
