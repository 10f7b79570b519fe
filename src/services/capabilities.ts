import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { Capabilities, CapabilityRow } from "../domain/capabilities.js";
import type { EvidenceLog } from "../domain/evidence-log.js";
import { CapabilityService, type IssueCapabilityRequest, type VerifyCapabilityRequest } from "../gen/mandate/v1/capabilities_pb.js";
import { orgCaller } from "./context.js";
import { enumCodec, ts } from "./convert.js";

const states = enumCodec(["issued", "consumed", "expired"] as const, "state");

const capabilityMessage = (c: CapabilityRow) => ({
  capabilityId: c.capability_id,
  decisionId: c.decision_id,
  agentId: c.agent_id,
  state: states.toProto(c.consumed_at ? "consumed" : c.expires_at.getTime() <= Date.now() ? "expired" : "issued"),
  audience: c.audience,
  issuedBy: c.issued_by,
  action: c.action,
  resource: c.resource,
  constraints: c.constraints,
  issuedAt: ts(c.issued_at),
  expiresAt: ts(c.expires_at),
  consumedAt: ts(c.consumed_at),
  integrationId: c.integration_id ?? "",
  // expires_at is issued_at + ttl_seconds, both from one Date, so the difference is exact.
  ttlSeconds: Math.round((c.expires_at.getTime() - c.issued_at.getTime()) / 1000),
});

/** CapabilityService. */
export class CapabilityServiceImpl implements ServiceImpl<typeof CapabilityService> {
  constructor(
    private readonly capabilities: Capabilities,
    private readonly evidence: EvidenceLog,
  ) {}

  private async issue(req: IssueCapabilityRequest, ctx: HandlerContext, fromReview: boolean) {
    const keys = this.evidence.keys;
    const { token, row } = await this.capabilities.issue(
      orgCaller(ctx),
      req.decisionId,
      { audience: req.audience, issuedBy: req.issuedBy, ttlSeconds: req.ttlSeconds },
      fromReview,
      { kid: keys.activeKid, key: keys.privateKeyObject() },
    );
    return { token, capabilityId: row.capability_id, expiresAt: ts(row.expires_at) };
  }

  issueCapability = (req: IssueCapabilityRequest, ctx: HandlerContext) => this.issue(req, ctx, false);
  issueCapabilityFromReview = (req: IssueCapabilityRequest, ctx: HandlerContext) => this.issue(req, ctx, true);

  async verifyCapability(req: VerifyCapabilityRequest, ctx: HandlerContext) {
    const row = await this.capabilities.verify(
      orgCaller(ctx),
      { token: req.token, audience: req.audience, action: req.action, resource: req.resource, constraints: req.constraints, environment: req.environment },
    );
    return { capabilityId: row.capability_id, decisionId: row.decision_id, resource: row.resource, constraints: row.constraints };
  }

  async getCapability(req: { capabilityId: string }, ctx: HandlerContext) {
    return capabilityMessage(await this.capabilities.get(orgCaller(ctx), req.capabilityId));
  }
}
