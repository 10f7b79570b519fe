import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { fromJson, type JsonObject } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import type { Agents, Transition, AgentRow } from "../domain/agents.js";
import { MandateError, validationFailed } from "../base/errors.js";
import type { EvidenceLog } from "../domain/evidence-log.js";
import { type Principals, type PrincipalRow, PRINCIPAL_KINDS } from "../domain/principals.js";
import type { EvidenceRecord } from "../evidence/record.js";
import { AgentService, type RegisterAgentRequest, type TransitionAgentRequest, type UpdateAgentRequest, type HeartbeatRequest } from "../gen/mandate/v1/agents_pb.js";
import { EvidenceService } from "../gen/mandate/v1/evidence_pb.js";
import { PrincipalService, type CreatePrincipalRequest } from "../gen/mandate/v1/principals_pb.js";
import { anyCaller, orgCaller } from "./context.js";
import { enumCodec, ts } from "./convert.js";

const AGENT_STATES = ["registered", "active", "suspended", "revoked", "retired"] as const;
/** AgentState enum ↔ domain state. */
export const agentStateCodec = enumCodec(AGENT_STATES, "state");
const principalKind = enumCodec(PRINCIPAL_KINDS, "kind");

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

const principalMessage = (p: PrincipalRow) => ({
  principalId: p.principal_id,
  displayName: p.display_name,
  kind: principalKind.toProto(p.kind),
  externalRef: p.external_ref ?? "",
  createdAt: ts(p.created_at),
});

/** The EvidenceRecord message of a sealed record (same members, same values). */
export const evidenceMessage = (r: EvidenceRecord) => ({
  evidenceId: r.evidence_id,
  organizationId: r.organization_id,
  seq: BigInt(r.seq),
  prevDigest: fromJson(ValueSchema, r.prev_digest),
  kind: r.kind,
  subjectId: r.subject_id,
  payload: r.payload as JsonObject,
  createdAt: ts(new Date(r.created_at)),
  digest: r.digest,
  kid: r.kid,
  signature: r.signature,
});

/** PrincipalService. */
export class PrincipalServiceImpl implements ServiceImpl<typeof PrincipalService> {
  constructor(private readonly principals: Principals) {}

  async createPrincipal(req: CreatePrincipalRequest, ctx: HandlerContext) {
    const row = await this.principals.create(orgCaller(ctx), {
      displayName: req.displayName,
      kind: principalKind.fromProto(req.kind, "kind"),
      externalRef: req.externalRef,
    });
    return principalMessage(row);
  }

  async getPrincipal(req: { principalId: string }, ctx: HandlerContext) {
    return principalMessage(await this.principals.get(orgCaller(ctx), req.principalId));
  }

  async listPrincipals(req: { pageSize: number; pageToken: string }, ctx: HandlerContext) {
    const { rows, next } = await this.principals.list(orgCaller(ctx), req.pageSize, req.pageToken);
    return { principals: rows.map(principalMessage), nextPageToken: next };
  }
}

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

/** EvidenceService. */
export class EvidenceServiceImpl implements ServiceImpl<typeof EvidenceService> {
  constructor(private readonly evidence: EvidenceLog) {}

  async getEvidence(req: { evidenceId: string }, ctx: HandlerContext) {
    const record = await this.evidence.get(orgCaller(ctx).organizationId, req.evidenceId);
    if (!record) throw new MandateError("not_found", "Evidence record not found.");
    return evidenceMessage(record);
  }

  async listEvidence(req: { afterSeq: bigint; pageSize: number }, ctx: HandlerContext) {
    const size = req.pageSize === 0 ? 500 : Math.min(Math.max(req.pageSize, 1), 1000);
    // Sequence numbers are below 2^53; a larger int64 (Connect and gRPC can send one) names no position.
    if (req.afterSeq < 0n || req.afterSeq > BigInt(Number.MAX_SAFE_INTEGER)) {
      throw validationFailed([{ field: "after_seq", code: "out_of_range", message: "must be between 0 and 2^53 - 1" }]);
    }
    const { records, hasMore } = await this.evidence.page(orgCaller(ctx).organizationId, Number(req.afterSeq), size);
    return { records: records.map(evidenceMessage), hasMore };
  }
}
