import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { fromJson, type JsonObject } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { MandateError, validationFailed } from "../base/errors.js";
import type { EvidenceLog } from "../domain/evidence-log.js";
import type { EvidenceHead } from "../evidence/head.js";
import type { EvidenceRecord } from "../evidence/record.js";
import { EvidenceService } from "../gen/mandate/v1/evidence_pb.js";
import { orgCaller } from "./context.js";
import { ts } from "./convert.js";

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

/** The EvidenceHead message of a signed head (same members, same values). */
export const evidenceHeadMessage = (h: EvidenceHead) => ({
  organizationId: h.organization_id,
  seq: BigInt(h.seq),
  digest: fromJson(ValueSchema, h.digest),
  signedAt: ts(new Date(h.signed_at)),
  kid: h.kid,
  signature: h.signature,
});

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
    const { records, hasMore, head } = await this.evidence.page(orgCaller(ctx).organizationId, Number(req.afterSeq), size);
    return { records: records.map(evidenceMessage), hasMore, head: evidenceHeadMessage(head) };
  }
}
