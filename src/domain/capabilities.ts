import { hash } from "node:crypto";
import { errors as joseErrors, jwtVerify, SignJWT, decodeJwt, decodeProtectedHeader, type JWTPayload } from "jose";
import { canonicalJson, sha256Hex } from "../evidence/canonical.js";
import type { AgentStore } from "../storage/agents.js";
import type { CapabilityRow, CapabilityStore, ConsumeRefusal, NewCapability } from "../storage/capabilities.js";
import type { CapabilityMirror } from "../storage/capability-mirror.js";
import type { DecisionRow, DecisionStore } from "../storage/decisions.js";
import type { OrganizationKey } from "../storage/keys.js";
import type { Ledger } from "../storage/ledger.js";
import type { OrgCaller } from "../base/caller.js";
import { MandateError, notFound, validationFailed, type FieldError } from "../base/errors.js";
import type { EvidenceLog } from "./evidence-log.js";
import { BatchedReads } from "./batched-reads.js";
import { newId } from "./ids.js";
import { valueAt } from "./intents.js";

/** The stored shapes this module hands to services. */
export type { CapabilityRow } from "../storage/capabilities.js";

const ISSUER = "mandate";

/** The error for a consume Postgres refused, in the order of docs/architecture.md, Consume paths. */
function refusalError(why: ConsumeRefusal): MandateError {
  if (why === "expired") return new MandateError("capability_expired", "The Capability has expired.");
  if (why === "dependency_inactive") {
    return new MandateError("capability_dependency_inactive", "The agent, organization or integration this Capability depends on is no longer active.");
  }
  return new MandateError("capability_consumed", "The Capability was already used.");
}

/** What an enforcement point presents at verification. */
export interface Presentation {
  token: string;
  audience: string;
  action: string;
  resource: string;
  constraints: Record<string, string>;
  /** When given, must equal the originating agent's `environment` label (docs/architecture.md, Consume paths). */
  environment?: string | undefined;
}


/** The digest kept of an issued token. */
function tokenDigest(token: string): string {
  return hash("sha256", token, "hex");
}

/** The digest of a constraint map, as carried in the token. */
function constraintsDigest(constraints: Record<string, string>): string {
  return sha256Hex(canonicalJson(constraints));
}

/**
 * Capability Authorizations: issued once per decision, verified and consumed
 * exactly once by a customer enforcement point, with a live recheck of what
 * the capability depends on in the same atomic step.
 */
export class Capabilities {
  /** Concurrent verifications read their capability rows in one query. */
  private readonly rows: BatchedReads<OrganizationKey, CapabilityRow | null>;
  /** Concurrent issues read their decisions in one query. */
  private readonly decisions: BatchedReads<OrganizationKey, DecisionRow | null>;

  constructor(
    private readonly capabilities: CapabilityStore,
    decisions: DecisionStore,
    private readonly agents: Pick<AgentStore, "get">,
    private readonly ledger: Ledger,
    private readonly evidence: EvidenceLog,
    private readonly mirror: CapabilityMirror | null,
    private readonly log: (err: unknown) => void = () => undefined,
    /** Told how each issue and verify ended (`issued`, `consumed`, or the error code), for metrics. */
    private readonly observe: (operation: "issue" | "verify", result: string) => void = () => undefined,
  ) {
    this.rows = new BatchedReads((keys) => capabilities.getMany(keys));
    this.decisions = new BatchedReads((keys) => decisions.getMany(keys));
  }

  /**
   * The Redis step (when configured): the Lua script rechecks the mirrored
   * states and sets the consumed marker atomically, so concurrent replays are
   * refused without touching Postgres. An empty mirror is rebuilt from Postgres;
   * a refusal is confirmed against Postgres before it is believed; Redis being
   * down or not answering falls through to the Postgres statement, which decides
   * alone. True when this call set (or, unanswered, may yet set) the consumed marker.
   */
  private async consumeInRedis(row: CapabilityRow): Promise<boolean> {
    if (!this.mirror) return false;
    // One object for both calls: `{ ...ref, ttlMs }` would get a hidden class of its own per
    // consume in this V8 (see Intents.record).
    const ref = {
      organizationId: row.organization_id,
      agentId: row.agent_id,
      integrationId: row.integration_id,
      capabilityId: row.capability_id,
      ttlMs: row.expires_at.getTime() - Date.now() + 60_000,
    };
    try {
      let verdict = await this.mirror.consume(ref);
      if (verdict === "MISS" || verdict === "INACTIVE") {
        const states = await this.capabilities.dependencies(row.capability_id);
        await this.mirror.restore(ref, { ...states, integration: states.integration ?? undefined });
        verdict = await this.mirror.consume(ref);
      }
      if (verdict === "CONSUMED") throw new MandateError("capability_consumed", "The Capability was already used.");
      if (verdict === "INACTIVE") {
        throw new MandateError("capability_dependency_inactive", "The agent, organization or integration this Capability depends on is no longer active.");
      }
      return verdict === "OK";
    } catch (err) {
      if (err instanceof MandateError) throw err;
      this.log(err); // Redis unavailable or not answering: Postgres alone decides below.
      // A consume that went unanswered may still run and set the marker: treat it as set.
      return true;
    }
  }

  /** The constraints bound to a decision: the contract's declared fields, else amount/currency/counterparty (docs/architecture.md, Consume paths). */
  private async boundConstraints(d: DecisionRow): Promise<{ resource: string; constraints: Record<string, string> }> {
    const intent = d.intent;
    const constraints: Record<string, string> = {};
    let resource = typeof intent.resource === "string" ? intent.resource : "";
    const contract = d.integration_id && d.contract_version ? await this.capabilities.contractBindings(d.integration_id, d.contract_version) : null;
    if (contract) {
      for (const [key, path] of Object.entries(contract.context_bindings)) {
        const v = valueAt(intent, path);
        if (v !== undefined && v !== null) constraints[key] = String(v);
      }
      const r = valueAt(intent, contract.resource_path);
      if (typeof r === "string") resource = r;
    } else {
      // A member sent as null is absent, as parseIntent reads it: never the constraint "null".
      for (const key of ["amount", "currency", "counterparty"]) if (intent[key] !== undefined && intent[key] !== null) constraints[key] = String(intent[key]);
    }
    return { resource, constraints };
  }

  /**
   * Issues the decision's one Capability. `fromReview` requires a HUMAN_REVIEW
   * resolved approved (the decision is never rewritten); otherwise an ALLOW.
   */
  issue(...args: Parameters<Capabilities["issueUnobserved"]>): Promise<{ token: string; row: CapabilityRow }> {
    return this.observed("issue", "issued", this.issueUnobserved(...args));
  }

  /** `work`'s result, after telling the observer how it ended: `ok`, or the error's code. */
  private async observed<T>(operation: "issue" | "verify", ok: string, work: Promise<T>): Promise<T> {
    try {
      const result = await work;
      this.observe(operation, ok);
      return result;
    } catch (err) {
      this.observe(operation, err instanceof MandateError ? err.code : "internal");
      throw err;
    }
  }

  private async issueUnobserved(
    caller: OrgCaller,
    decisionId: string,
    input: { audience: string; issuedBy: string; ttlSeconds: number | undefined },
    fromReview: boolean,
    signingKey: { kid: string; key: CryptoKey | import("node:crypto").KeyObject },
  ): Promise<{ token: string; row: CapabilityRow }> {
    const errors: FieldError[] = [];
    if (!input.audience || input.audience.length > 256) errors.push({ field: "audience", code: "required", message: "1..256 characters" });
    if (!input.issuedBy || input.issuedBy.length > 256) errors.push({ field: "issued_by", code: "required", message: "1..256 characters" });
    const ttl = input.ttlSeconds ?? 300;
    if (!Number.isInteger(ttl) || ttl < 1 || ttl > 3600) errors.push({ field: "ttl_seconds", code: "out_of_range", message: "must be between 1 and 3600" });
    if (errors.length) throw validationFailed(errors);

    const d = await this.decisions.get({ organizationId: caller.organizationId, id: decisionId });
    if (!d) throw notFound("Decision");
    if (fromReview) {
      if (d.outcome !== "HUMAN_REVIEW" || d.status !== "RESOLVED" || d.resolution?.resolution !== "approved") {
        throw new MandateError("review_not_approved", "A Capability from review needs a HUMAN_REVIEW decision resolved approved.");
      }
    } else if (d.outcome !== "ALLOW") {
      throw new MandateError("decision_not_allowed", `The decision is ${d.outcome}; only ALLOW decisions get a Capability directly.`);
    }
    const { resource, constraints } = await this.boundConstraints(d);
    // Exactly ttl seconds from now, to the millisecond (the row decides expiry); the token's iat
    // and exp are whole seconds, rounded down, so exp never outlasts the row.
    const issuedAt = new Date();
    const expiresAt = new Date(issuedAt.getTime() + ttl * 1000);
    const row: NewCapability = {
      capability_id: newId("cap"),
      organization_id: caller.organizationId,
      decision_id: decisionId,
      agent_id: d.agent_id,
      integration_id: d.integration_id,
      audience: input.audience,
      issued_by: input.issuedBy,
      action: d.action,
      resource,
      constraints,
      issued_at: issuedAt,
      expires_at: expiresAt,
      token_digest: null,
    };
    const token = await new SignJWT({
      org: caller.organizationId,
      dec: decisionId,
      act: d.action,
      res: resource,
      cst: constraintsDigest(constraints),
    })
      .setProtectedHeader({ alg: "EdDSA", kid: signingKey.kid, typ: "mandate-cap+jwt" })
      .setJti(row.capability_id)
      .setIssuer(ISSUER)
      .setAudience(input.audience)
      .setIssuedAt(issuedAt)
      .setExpirationTime(expiresAt)
      .sign(signingKey.key);
    row.token_digest = tokenDigest(token);
    const payload = {
      capability_id: row.capability_id,
      decision_id: decisionId,
      from_review: fromReview,
      audience: row.audience,
      issued_by: row.issued_by,
      by: caller.identity,
      action: row.action,
      resource,
      constraints,
      expires_at: expiresAt.toISOString(),
    };
    // Issues of every organization group together, as consumes: each group commits in one statement.
    const issued = await this.ledger.issueCapability(row, payload);
    if ("refused" in issued) throw new MandateError("capability_already_issued", "This decision already had its one Capability; no other is ever issued.");
    return { token, row: { ...row, consumed_at: null, consumed_by: null } };
  }

  /**
   * Verifies a presented token and consumes it in one atomic step. Mismatches
   * (409) leave it unconsumed; a dependency no longer active is 403; a second
   * consume is 409 `capability_consumed`.
   */
  verify(caller: OrgCaller, p: Presentation): Promise<CapabilityRow> {
    return this.observed("verify", "consumed", this.verifyUnobserved(caller, p));
  }

  private async verifyUnobserved(caller: OrgCaller, p: Presentation): Promise<CapabilityRow> {
    const row = (await this.issuedToken(caller, p.token)) ?? (await this.signedToken(caller, p.token));
    if (row.expires_at.getTime() <= Date.now()) throw new MandateError("capability_expired", "The Capability has expired.");
    if (p.audience !== row.audience) throw new MandateError("capability_audience_mismatch", "The audience differs from the one the Capability was issued for.");
    if (p.action !== row.action) throw new MandateError("capability_action_mismatch", "The action differs from the authorized one.");
    if (p.resource !== row.resource) throw new MandateError("capability_resource_mismatch", "The resource differs from the authorized one.");
    const keys = new Set([...Object.keys(row.constraints), ...Object.keys(p.constraints)]);
    const differing = [...keys].filter((k) => row.constraints[k] !== p.constraints[k]);
    if (differing.length) {
      throw new MandateError(
        "capability_constraint_mismatch",
        "A constraint differs from the bound value; the Capability was not consumed.",
        differing.map((k) => ({ field: `constraints.${k}`, code: "capability_constraint_mismatch", message: "differs from the bound value" })),
      );
    }
    // The agent's label is read only when an environment is presented: no read is added otherwise.
    if (p.environment !== undefined) {
      const agent = await this.agents.get(row.organization_id, row.agent_id);
      if (agent?.environment !== p.environment) {
        throw new MandateError(
          "capability_constraint_mismatch",
          "The environment differs from the originating agent's environment label; the Capability was not consumed.",
          [{ field: "environment", code: "capability_constraint_mismatch", message: "differs from the originating agent's environment label" }],
        );
      }
    }
    const marked = await this.consumeInRedis(row);
    try {
      return await this.consumeInPostgres(caller, row);
    } catch (err) {
      // Postgres refused (other than "already consumed") or failed after Redis set the marker:
      // the token was not consumed here, so it must stay usable.
      const consumed = err instanceof MandateError && err.code === "capability_consumed";
      if (marked && !consumed) await this.mirror!.release(row.organization_id, row.capability_id).catch(this.log);
      throw err;
    }
  }

  /**
   * The capability of a token that is byte for byte the one issued for it (its SHA-256 equals
   * the digest kept at issue), or null when that cannot be shown. That proves everything its
   * signature would, for one hash instead of an Ed25519 verification; a token of another
   * organization, an unknown one, or one issued before digests were kept gets null and goes
   * through the signature check.
   */
  private async issuedToken(caller: OrgCaller, token: string): Promise<CapabilityRow | null> {
    let claims: JWTPayload;
    try {
      claims = decodeJwt(token);
    } catch {
      return null;
    }
    if (claims.org !== caller.organizationId || typeof claims.jti !== "string") return null;
    const row = await this.rows.get({ organizationId: caller.organizationId, id: claims.jti });
    return row?.token_digest && row.token_digest === tokenDigest(token) ? row : null;
  }

  /** The capability of a token whose signature verifies with a key of this service (errors in the order of docs/architecture.md, Consume paths). */
  private async signedToken(caller: OrgCaller, token: string): Promise<CapabilityRow> {
    let claims: JWTPayload;
    try {
      const { kid } = decodeProtectedHeader(token);
      const key = typeof kid === "string" ? await this.evidence.publicKey(kid) : null;
      if (!key) throw new MandateError("capability_token_invalid", "The token is not signed by a key of this service.");
      ({ payload: claims } = await jwtVerify(token, key, { issuer: ISSUER, algorithms: ["EdDSA"] }));
    } catch (err) {
      if (err instanceof MandateError) throw err;
      if (err instanceof joseErrors.JWTExpired) throw new MandateError("capability_expired", "The Capability has expired.");
      throw new MandateError("capability_token_invalid", "The token is malformed or its signature does not verify.");
    }
    // Another organization's capability does not exist for this caller.
    if (claims.org !== caller.organizationId || typeof claims.jti !== "string") throw notFound("Capability");
    const row = await this.rows.get({ organizationId: caller.organizationId, id: claims.jti });
    if (!row) throw notFound("Capability");
    return row;
  }

  /**
   * The durable, arbitrating consume: the Capability's conditional UPDATE and its evidence,
   * committed with every organization's other concurrent consumes.
   */
  private async consumeInPostgres(caller: OrgCaller, row: CapabilityRow): Promise<CapabilityRow> {
    // Consumes of every organization group together: each group commits in one statement, however many it spans.
    const result = await this.ledger.consumeCapability(row, caller.identity);
    if ("refused" in result) throw refusalError(result.refused);
    return result.consumed;
  }

  /** A capability's state and timestamps; never its token. */
  async get(caller: OrgCaller, capabilityId: string): Promise<CapabilityRow> {
    const row = await this.capabilities.get(caller.organizationId, capabilityId);
    if (!row) throw notFound("Capability");
    return row;
  }
}
