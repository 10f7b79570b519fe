import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { type Principals, type PrincipalRow, PRINCIPAL_KINDS } from "../domain/principals.js";
import { PrincipalService, type CreatePrincipalRequest } from "../gen/mandate/v1/principals_pb.js";
import { orgCaller } from "./context.js";
import { enumCodec, ts } from "./convert.js";

const principalKind = enumCodec(PRINCIPAL_KINDS, "kind");

const principalMessage = (p: PrincipalRow) => ({
  principalId: p.principal_id,
  displayName: p.display_name,
  kind: principalKind.toProto(p.kind),
  externalRef: p.external_ref ?? "",
  createdAt: ts(p.created_at),
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
