import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { Agents, Transition, AgentRow } from "../domain/agents.js";
import { MandateError } from "../base/errors.js";
import { AgentService, type RegisterAgentRequest, type TransitionAgentRequest, type UpdateAgentRequest, type HeartbeatRequest } from "../gen/mandate/v1/agents_pb.js";
import { anyCaller, orgCaller } from "./context.js";
import { enumCodec, ts } from "./convert.js";
import { evidenceMessage } from "./evidence.js";

const AGENT_STATES = ["registered", "active", "suspended", "revoked", "retired"] as const;

/** AgentState enum ↔ domain state. */
export const agentStateCodec = enumCodec(AGENT_STATES, "state");

/** The Agent message of a row. */
export const agentMessage = (a: AgentRow) => ({
  agentId: a.agent_id,
  certificateId: a.certificate_id,
  name: a.name,
  actingForPrincipalId: a.acting_for_principal_id,
  publicKey: a.public_key,
  owner: a.owner,
  businessUnit: a.business_unit,
  environment: a.environment,
  state: agentStateCodec.toProto(a.state),
  createdAt: ts(a.created_at),
  updatedAt: ts(a.updated_at),
  lastHeartbeatAt: ts(a.last_heartbeat_at),
});

/** AgentService. */
export class AgentServiceImpl implements ServiceImpl<typeof AgentService> {
  constructor(
    private readonly agents: Agents,
    private readonly skewSeconds: number,
  ) {}

  async registerAgent(req: RegisterAgentRequest, ctx: HandlerContext) {
    const { agent } = await this.agents.register(orgCaller(ctx), {
      name: req.name,
      actingForPrincipalId: req.actingForPrincipalId,
      publicKey: req.publicKey,
      owner: req.owner,
      businessUnit: req.businessUnit,
      environment: req.environment,
    });
    return agentMessage(agent);
  }

  async getAgent(req: { agentId: string }, ctx: HandlerContext) {
    return agentMessage(await this.agents.get(orgCaller(ctx), req.agentId));
  }

  async listAgents(req: { pageSize: number; pageToken: string }, ctx: HandlerContext) {
    const { rows, next } = await this.agents.list(orgCaller(ctx), req.pageSize, req.pageToken);
    return { agents: rows.map(agentMessage), nextPageToken: next };
  }

  async updateAgent(req: UpdateAgentRequest, ctx: HandlerContext) {
    return agentMessage(
      await this.agents.updateLabels(orgCaller(ctx), req.agentId, {
        owner: req.owner,
        businessUnit: req.businessUnit,
        environment: req.environment,
        actingForPrincipalId: req.actingForPrincipalId,
      }),
    );
  }

  private async move(op: Transition, req: TransitionAgentRequest, ctx: HandlerContext) {
    return agentMessage(await this.agents.transition(orgCaller(ctx), req.agentId, op, req.reason));
  }

  activateAgent = (req: TransitionAgentRequest, ctx: HandlerContext) => this.move("activate", req, ctx);
  suspendAgent = (req: TransitionAgentRequest, ctx: HandlerContext) => this.move("suspend", req, ctx);
  reactivateAgent = (req: TransitionAgentRequest, ctx: HandlerContext) => this.move("reactivate", req, ctx);
  revokeAgent = (req: TransitionAgentRequest, ctx: HandlerContext) => this.move("revoke", req, ctx);
  retireAgent = (req: TransitionAgentRequest, ctx: HandlerContext) => this.move("retire", req, ctx);

  async rotateAgentKey(req: { agentId: string; publicKey: string }, ctx: HandlerContext) {
    return agentMessage(await this.agents.rotateKey(orgCaller(ctx), req.agentId, req.publicKey));
  }

  async heartbeat(req: HeartbeatRequest, ctx: HandlerContext) {
    const caller = anyCaller(ctx);
    if (caller.kind !== "agent_signed") throw new MandateError("missing_credentials", "Heartbeats are signed by the agent.");
    const hb = await this.agents.heartbeat(caller.keyId, caller.signature, req.signedBody, req.agentId, this.skewSeconds);
    return { agentId: hb.agentId, state: agentStateCodec.toProto(hb.state), lastHeartbeatAt: ts(hb.at) };
  }

  async listAgentAuditRecords(req: { agentId: string }, ctx: HandlerContext) {
    return { records: (await this.agents.auditRecords(orgCaller(ctx), req.agentId)).map(evidenceMessage) };
  }
}
