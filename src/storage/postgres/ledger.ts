import { isDeepStrictEqual } from "node:util";
import type { EvidenceRecord } from "../../evidence/record.js";
import type { CapabilityRow, NewCapability } from "../capabilities.js";
import { CollisionError, ConflictError } from "../errors.js";
import type { ConsumeRecording, DecisionRecording, DecisionToRecord, EvidenceEntry, IssueRecording, Ledger, LedgerGroupKind, LedgerObserver } from "../ledger.js";
import { capabilitiesInsert, capabilitiesInsertValues, capabilitySql, CONSUMABLE_IN_ORGANIZATION, ORGANIZATION_ACTIVE } from "./capabilities.js";
import type { Database, Queryable } from "./database.js";
import { decisionsInsert, decisionsInsertValues, decisionSql, type DecisionToWrite } from "./decisions.js";
import type { EvidenceChain } from "./evidence-chain.js";
import { evidenceInsert, evidenceInsertValues, headMoveCtes, headMoveValues, jsonLines, toJsonLines, type HeadMove } from "./evidence.js";
import { GroupCommit, waitForCompany } from "./group-commit.js";

/**
 * How one kind of item is recorded. The ledger runs the rest, once for every kind: grouping,
 * sealing the evidence, the checked statement and its retry, the locking path, and splitting
 * failures so that one item never fails another.
 */
interface Recording<I, R> {
  organizationOf(item: I): string;
  /** The item's evidence on the checked path; `at` is the group's time. */
  entry(item: I, at: Date): EvidenceEntry;
  /** The time a group's records are sealed with. */
  sealedAt(items: readonly I[]): Date;
  /** The organizations of a group that must take the locking path from the start. */
  lockFirst(items: readonly I[]): Set<string>;
  /**
   * The checked path: ONE statement for the items of every organization (built with
   * {@link checkedStatement}), given their sealed records and head moves. Returns the
   * organizations written and, for items of those, their results.
   */
  checked(q: Queryable, items: readonly I[], records: readonly EvidenceRecord[], moves: readonly HeadMove[], at: Date): Promise<{ written: ReadonlySet<string>; results: Map<I, R> }>;
  /**
   * The locking path, inside a transaction, for items of one organization: locks and checks
   * what the items depend on, calls `append` once with the evidence of those it admits (which
   * takes the chain lock), writes their rows, and returns one result per item, in order.
   */
  locked(tx: Queryable, items: readonly I[], append: (entries: readonly EvidenceEntry[], at: Date) => Promise<EvidenceRecord[]>): Promise<R[]>;
  /** The result of an item whose statement failed on a unique key, when that key means a refusal. */
  collision(item: I, err: CollisionError): R | null;
}

/**
 * ONE statement that writes for several organizations without locking their chains first:
 * `before` are CTEs its condition may use; the chain heads still where their moves expect
 * them (parameters from `movesAt`) and meeting `condition` (naming the move `m`) are locked and
 * moved on (the CTE `head`); the evidence records (parameters $1..$7) and every CTE in `writes`
 * must write only for organizations in `head`; `result` is the statement's final part.
 */
function checkedStatement(parts: { before?: string; movesAt: number; condition?: string; writes: string[]; result: string }): string {
  const ctes = [
    ...(parts.before ? [parts.before] : []),
    headMoveCtes(parts.movesAt, parts.condition),
    `records AS (${evidenceInsert("WHERE r.organization_id IN (SELECT organization_id FROM head)")})`,
    ...parts.writes,
  ];
  return `WITH ${ctes.join(",\n")}\n${parts.result}`;
}

/** The Ledger on Postgres (see storage/ledger.ts for what it guarantees). */
export class PostgresLedger implements Ledger {
  private readonly decisions: GroupCommit<DecisionToRecord, DecisionRecording>;
  private readonly issues: GroupCommit<IssueItem, IssueRecording>;
  private readonly consumes: GroupCommit<ConsumeItem, ConsumeRecording>;

  constructor(
    private readonly db: Database,
    private readonly chain: EvidenceChain,
    private readonly observer: LedgerObserver | null = null,
  ) {
    // Only decisions wait for company: capability issues and consumes measured slower with it (docs/performance.md).
    this.decisions = new GroupCommit(this.timed("decision", decisionRecording), waitForCompany);
    this.issues = new GroupCommit(this.timed("issue", issueRecording));
    this.consumes = new GroupCommit(this.timed("consume", consumeRecording));
  }

  /** `commit` for one kind, telling the observer each group's size and duration. */
  private timed<I, R>(kind: LedgerGroupKind, r: Recording<I, R>): (batch: readonly I[]) => Promise<PromiseSettledResult<R>[]> {
    const observer = this.observer;
    if (!observer) return (batch) => this.commit(batch, r);
    return async (batch) => {
      const started = performance.now();
      try {
        return await this.commit(batch, r);
      } finally {
        observer.group(kind, batch.length, (performance.now() - started) / 1000);
      }
    };
  }

  async recordDecision(item: DecisionToRecord): Promise<DecisionRecording> {
    const result = await this.decisions.submit(item);
    // Counted once durable: an `ifSuspended` recording is the review the contract describes.
    if (this.observer && "recorded" in result) {
      if (result.recorded === "decision") this.observer.decisionRecorded(item.decision.outcome, item.decision.reason);
      else this.observer.decisionRecorded("HUMAN_REVIEW", "agent_suspended");
    }
    return result;
  }

  issueCapability(capability: NewCapability, payload: Record<string, unknown>): Promise<IssueRecording> {
    return this.issues.submit({ capability, payload });
  }

  consumeCapability(capability: CapabilityRow, by: string): Promise<ConsumeRecording> {
    return this.consumes.submit({ capability, by });
  }

  /**
   * Commits a group of items of any organizations. The checked statement for all of them;
   * once more for the organizations it did not write (another writer moved a head, a check
   * failed), on their heads as read then; then the locking path for each organization still
   * left and for those that must take it from the start. A failure before anything is written
   * fails the whole group (GroupCommit then tries each item alone); after that it is
   * contained, so an organization already written never goes round again.
   */
  private async commit<I, R>(batch: readonly I[], r: Recording<I, R>): Promise<PromiseSettledResult<R>[]> {
    const results = new Map<I, PromiseSettledResult<R>>();
    try {
      await this.commitEach(batch, r, results);
    } catch (err) {
      // A lone item whose unique key was taken: a refusal, when its kind says so.
      const refusal = batch.length === 1 && err instanceof CollisionError ? r.collision(batch[0]!, err) : null;
      if (refusal === null) throw err;
      return [{ status: "fulfilled", value: refusal }];
    }
    return batch.map((item) => results.get(item)!);
  }

  private async commitEach<I, R>(batch: readonly I[], r: Recording<I, R>, results: Map<I, PromiseSettledResult<R>>): Promise<void> {
    const lockFirst = r.lockFirst(batch);
    let pending = batch.filter((item) => !lockFirst.has(r.organizationOf(item)));
    for (let attempt = 0; attempt < 2 && pending.length > 0; attempt++) {
      try {
        pending = await this.checked(pending, r, results);
      } catch (err) {
        if (attempt === 0) throw err;
        break;
      }
    }
    const byOrganization = new Map<string, I[]>();
    for (const item of [...batch.filter((i) => lockFirst.has(r.organizationOf(i))), ...pending]) {
      const items = byOrganization.get(r.organizationOf(item));
      if (items) items.push(item);
      else byOrganization.set(r.organizationOf(item), [item]);
    }
    const lockEach = async (items: readonly I[]): Promise<void> => {
      try {
        const answers = await this.db.transaction((tx) => r.locked(tx, items, (entries, at) => this.chain.append(tx, entries, at)));
        items.forEach((item, i) => results.set(item, { status: "fulfilled", value: answers[i]! }));
      } catch (err) {
        if (items.length === 1) {
          const refusal = err instanceof CollisionError ? r.collision(items[0]!, err) : null;
          results.set(items[0]!, refusal === null ? { status: "rejected", reason: err } : { status: "fulfilled", value: refusal });
        } else for (const item of items) await lockEach([item]);
      }
    };
    await Promise.all([...byOrganization.values()].map(lockEach));
  }

  /** One checked statement for `items`; records their results and returns the items of the organizations it did not write. */
  private async checked<I, R>(items: readonly I[], r: Recording<I, R>, results: Map<I, PromiseSettledResult<R>>): Promise<I[]> {
    const at = r.sealedAt(items);
    const { records, moves } = await this.chain.sealAcross(
      items.map((item) => r.entry(item, at)),
      at,
    );
    let written: ReadonlySet<string> = new Set();
    try {
      const answer = await r.checked(this.db.pool, items, records, moves, at);
      written = answer.written;
      for (const [item, value] of answer.results) results.set(item, { status: "fulfilled", value });
    } catch (err) {
      // A deadlock or serialization failure aborted the statement whole: nothing was written.
      if (!(err instanceof ConflictError)) {
        this.chain.settle(moves, written);
        throw err;
      }
    }
    this.chain.settle(moves, written);
    return items.filter((item) => !written.has(r.organizationOf(item)));
  }
}

// ---------------------------------------------------------------------------------------------
// Decisions

/** The decision evidence entry of `decision` with `payload`. */
function decisionEntry(decision: DecisionToWrite, payload: Record<string, unknown>): EvidenceEntry {
  return { organizationId: decision.organization_id, kind: "decision", subjectId: decision.decision_id, payload };
}

/** States in which a certificate and its agent may still have a decision recorded. */
const signerMayRecord = (s: { cert_state: string; agent_state: string }) => s.cert_state !== "replaced" && (s.agent_state === "active" || s.agent_state === "suspended");

/** The first of `values` for each distinct key, in order. */
function distinctBy<T>(values: readonly T[], key: (value: T) => string): T[] {
  const seen = new Map<string, T>();
  for (const v of values) {
    const k = key(v);
    if (!seen.has(k)) seen.set(k, v);
  }
  return [...seen.values()];
}

/** What a decision's evaluation must still match when it is recorded (see evaluatedOnCurrent). */
const contextKey = (d: DecisionToWrite): string =>
  JSON.stringify([d.organization_id, d.action, d.bundle_digest, d.graph_version, d.policy_versions, d.integration_id, d.contract_version]);

const decisionRecording: Recording<DecisionToRecord, DecisionRecording> = {
  organizationOf: (item) => item.decision.organization_id,
  entry: (item) => decisionEntry(item.decision, item.payload),
  // Records are stamped with the evaluation time of the group's first decision.
  sealedAt: (items) => items[0]!.decision.evaluated_at,
  // A decision already made for a suspended agent is recorded under the signer lock, where its
  // agent is expected suspended rather than active.
  lockFirst: (items) => new Set(items.filter((i) => i.ifSuspended === null).map((i) => i.decision.organization_id)),

  /**
   * For each organization that is still active, whose chain head is still where its move
   * expects it, whose signing certificates and their agents are all still active (each decision
   * naming its certificate's agent and organization), and each of whose decisions names the
   * policy head and integration contract still current for its action: its decisions and records
   * are stored and its head moved on. These checks cover what the decision rows' foreign keys
   * checked before migration 016. The signers' agents are share-locked first, in the order
   * lifecycle transitions lock them, then the heads in organization order: a transition in flight
   * is waited for, and two such statements never deadlock. The organization's state needs no
   * lock: a suspension appends its record to the same chain in its transaction, so one committed
   * after this statement's snapshot was taken has moved the head, and the head check refuses the
   * organization (the retry then reads it suspended).
   */
  async checked(q, items, records, moves) {
    const ds = items.map((i) => i.decision);
    const signers = distinctBy(items, (i) => `${i.certificateId}\n${i.decision.agent_id}\n${i.decision.organization_id}`);
    // Every decision of a group usually shares its organization's context: each one is checked once.
    const contexts = distinctBy(ds, contextKey);
    const { rows } = await q.query<{ organization_id: string }>({
      name: "ledger_decisions",
      text: checkedStatement({
        before: `live_signers AS (
               SELECT c.certificate_id, c.agent_id, c.organization_id FROM certificates c JOIN agents a ON a.agent_id = c.agent_id
                WHERE c.certificate_id = ANY($25::text[]) AND c.state = 'active' AND a.state = 'active'
                ORDER BY a.agent_id
                  FOR SHARE OF a
             ),
             -- Organizations no longer active, with a signer no longer active, or with a decision
             -- evaluated against a policy head or integration contract that is no longer current.
             refused AS (
               SELECT s.organization_id FROM unnest($25::text[], $26::text[], $27::text[]) AS s(certificate_id, organization_id, agent_id)
                WHERE (s.certificate_id, s.agent_id, s.organization_id) NOT IN (SELECT certificate_id, agent_id, organization_id FROM live_signers)
               UNION
               SELECT o.organization_id FROM organizations o WHERE o.organization_id = ANY($26::text[]) AND o.state <> 'active'
               UNION
               SELECT d.organization_id
                 FROM unnest($28::text[], $29::text[], ${jsonLines(30)}::jsonb[], $31::int[], $32::text[], $33::text[], $34::int[])
                      AS d(organization_id, action, policy_versions, graph_version, bundle_digest, integration_id, contract_version)
                 LEFT JOIN policy_heads h ON h.organization_id = d.organization_id
                 LEFT JOIN integration_actions ia ON ia.organization_id = d.organization_id AND ia.action = d.action
                 LEFT JOIN contract_versions cv ON cv.integration_id = ia.integration_id AND cv.state = 'active'
                WHERE h.bundle_digest IS DISTINCT FROM d.bundle_digest OR h.graph_version IS DISTINCT FROM d.graph_version
                   OR h.policy_versions IS DISTINCT FROM d.policy_versions
                   OR ia.integration_id IS DISTINCT FROM d.integration_id OR cv.version IS DISTINCT FROM d.contract_version
             )`,
        movesAt: 35,
        condition: "m.organization_id NOT IN (SELECT organization_id FROM refused)",
        writes: [`decisions AS (${decisionsInsert(7, "WHERE d.organization_id IN (SELECT organization_id FROM head)")})`],
        result: "SELECT organization_id FROM head",
      }),
      values: [
        ...evidenceInsertValues(records),
        ...decisionsInsertValues(ds, records),
        signers.map((i) => i.certificateId),
        signers.map((i) => i.decision.organization_id),
        signers.map((i) => i.decision.agent_id),
        contexts.map((d) => d.organization_id),
        contexts.map((d) => d.action),
        toJsonLines(contexts.map((d) => d.policy_versions)),
        contexts.map((d) => d.graph_version),
        contexts.map((d) => d.bundle_digest),
        contexts.map((d) => d.integration_id),
        contexts.map((d) => d.contract_version),
        ...headMoveValues(moves),
      ],
    });
    const written = new Set(rows.map((r) => r.organization_id));
    const results = new Map<DecisionToRecord, DecisionRecording>();
    items.forEach((item, i) => {
      if (written.has(item.decision.organization_id)) results.set(item, { recorded: "decision", evidenceId: records[i]!.evidence_id });
    });
    return { written, results };
  },

  /**
   * Locks the signers' agents (ascending agent_id, as lifecycle transitions do), the policy
   * head and the organization (share: a suspension in flight is waited for, and one not yet
   * begun waits for this), then refuses what may no longer be recorded, records a
   * now-suspended agent's decision as its `ifSuspended`, and writes the rest after their
   * evidence.
   */
  async locked(tx, items, append) {
    const signers = await decisionSql.lockSigners(tx, [...new Set(items.map((i) => i.certificateId))]);
    const organizationId = items[0]!.decision.organization_id;
    const current = await decisionSql.currentContext(tx, organizationId, [...new Set(items.map((i) => i.decision.action))]);
    const organizationActive = (await decisionSql.lockOrganizationState(tx, organizationId)) === "active";
    const results: (DecisionRecording | null)[] = [];
    const admitted: { at: number; recorded: "decision" | "ifSuspended"; decision: DecisionToWrite; payload: Record<string, unknown> }[] = [];
    items.forEach((item, at) => {
      const { agent_id, organization_id } = item.decision;
      const signer = signers.get(item.certificateId) ?? { agent_id, organization_id, cert_state: "replaced", agent_state: "revoked" };
      // What the foreign keys checked before migration 016, and more: the very agent and organization.
      if (signer.agent_id !== item.decision.agent_id || signer.organization_id !== item.decision.organization_id) {
        throw new Error(`decision ${item.decision.decision_id} names agent ${item.decision.agent_id} of ${item.decision.organization_id}, but its certificate is ${signer.agent_id}'s of ${signer.organization_id}`);
      }
      if (!signerMayRecord(signer)) {
        results.push({ refused: "signer_inactive", certState: signer.cert_state, agentState: signer.agent_state });
        return;
      }
      if (!organizationActive) {
        results.push({ refused: "organization_suspended" });
        return;
      }
      results.push(null);
      if (signer.agent_state === "suspended" && item.ifSuspended) {
        const instead = item.ifSuspended();
        admitted.push({ at, recorded: "ifSuspended", decision: instead.decision, payload: instead.payload });
      } else if (item.ifSuspended && !evaluatedOnCurrent(item.decision, current)) {
        results[at] = { refused: "stale_context" };
      } else {
        admitted.push({ at, recorded: "decision", decision: item.decision, payload: item.payload });
      }
    });
    if (admitted.length > 0) {
      const records = await append(admitted.map((a) => decisionEntry(a.decision, a.payload)), admitted[0]!.decision.evaluated_at);
      await decisionSql.insertMany(tx, admitted.map((a) => a.decision), records);
      admitted.forEach((a, k) => (results[a.at] = { recorded: a.recorded, evidenceId: records[k]!.evidence_id }));
    }
    return results as DecisionRecording[];
  },

  collision: (_item, err) => (err.key === "decisions_agent_id_nonce_key" ? { refused: "nonce_taken" } : null),
};

/** True when the decision names the policy head and the action's integration contract that are current. */
function evaluatedOnCurrent(d: DecisionToWrite, current: Awaited<ReturnType<typeof decisionSql.currentContext>>): boolean {
  const contract = current.contracts.get(d.action);
  return (
    current.head !== null &&
    current.head.bundle_digest === d.bundle_digest &&
    current.head.graph_version === d.graph_version &&
    isDeepStrictEqual(current.head.policy_versions, d.policy_versions) &&
    (contract?.integration_id ?? null) === d.integration_id &&
    (contract?.contract_version ?? null) === d.contract_version
  );
}

// ---------------------------------------------------------------------------------------------
// Capability issues

interface IssueItem {
  capability: NewCapability;
  payload: Record<string, unknown>;
}

const issueEntry = (i: IssueItem): EvidenceEntry => ({
  organizationId: i.capability.organization_id,
  kind: "capability.issued",
  subjectId: i.capability.capability_id,
  payload: i.payload,
});

const issueRecording: Recording<IssueItem, IssueRecording> = {
  organizationOf: (i) => i.capability.organization_id,
  entry: issueEntry,
  sealedAt: () => new Date(),
  lockFirst: () => new Set(),

  /** A decision that already has its capability fails the whole statement on the unique key (then each item goes alone). */
  async checked(q, items, records, moves) {
    const { rows } = await q.query<{ organization_id: string }>({
      name: "ledger_capability_issues",
      text: checkedStatement({
        movesAt: 21,
        writes: [`capabilities AS (${capabilitiesInsert(7, "WHERE c.organization_id IN (SELECT organization_id FROM head)")})`],
        result: "SELECT organization_id FROM head",
      }),
      values: [...evidenceInsertValues(records), ...capabilitiesInsertValues(items.map((i) => i.capability)), ...headMoveValues(moves)],
    });
    const written = new Set(rows.map((r) => r.organization_id));
    const results = new Map<IssueItem, IssueRecording>();
    items.forEach((item, i) => {
      if (written.has(item.capability.organization_id)) results.set(item, { issued: true, evidenceId: records[i]!.evidence_id });
    });
    return { written, results };
  },

  /** The chain lock first, as the checked statement takes it, so the two paths never deadlock. */
  async locked(tx, items, append) {
    const records = await append(items.map(issueEntry), new Date());
    await capabilitySql.insertMany(tx, items.map((i) => i.capability));
    return records.map((r) => ({ issued: true, evidenceId: r.evidence_id }));
  },

  collision: (_item, err) => (err.key === "capabilities_decision_id_key" ? { refused: "already_issued" } : null),
};

// ---------------------------------------------------------------------------------------------
// Capability consumes

interface ConsumeItem {
  capability: CapabilityRow;
  by: string;
}

function consumeEntry(row: CapabilityRow, by: string, consumedAt: Date): EvidenceEntry {
  return {
    organizationId: row.organization_id,
    kind: "capability.consumed",
    subjectId: row.capability_id,
    payload: { capability_id: row.capability_id, decision_id: row.decision_id, audience: row.audience, by, consumed_at: consumedAt.toISOString() },
  };
}

const consumeRecording: Recording<ConsumeItem, ConsumeRecording> = {
  organizationOf: (i) => i.capability.organization_id,
  // One time for the group's records and rows.
  entry: (i, at) => consumeEntry(i.capability, i.by, at),
  sealedAt: () => new Date(),
  // A capability twice in one group (a replay racing its original): the locking path sorts them out.
  lockFirst: (items) =>
    new Set(items.map((i) => i.capability.capability_id)).size === items.length ? new Set() : new Set(items.map((i) => i.capability.organization_id)),

  /**
   * For each organization that is active, whose chain head is still where its move expects it
   * and all of whose listed capabilities are consumable: consumes them, stores its records and
   * moves its head on. The rows are locked (in id order) before the heads (in organization
   * order), as the locking path does, so two such statements never deadlock.
   */
  async checked(q, items, records, moves, at) {
    const { rows } = await q.query<{ capability_id: string; organization_id: string }>({
      name: "ledger_capability_consumes",
      text: checkedStatement({
        before: `consumable AS (
               SELECT c.capability_id, c.organization_id FROM capabilities c
                WHERE c.capability_id = ANY($8::text[]) AND ${CONSUMABLE_IN_ORGANIZATION}
                ORDER BY c.capability_id
                  FOR UPDATE OF c
             )`,
        movesAt: 11,
        condition: `${ORGANIZATION_ACTIVE("m.organization_id")}
                  AND (SELECT count(*) FROM consumable k WHERE k.organization_id = m.organization_id)
                    = (SELECT count(*) FROM unnest($16::text[]) AS o(id) WHERE o.id = m.organization_id)`,
        writes: [],
        result: `UPDATE capabilities c SET consumed_at = $10, consumed_by = ($9::text[])[array_position($8::text[], c.capability_id)]
              WHERE c.capability_id = ANY($8::text[]) AND c.organization_id IN (SELECT organization_id FROM head)
              RETURNING c.capability_id, c.organization_id`,
      }),
      values: [
        ...evidenceInsertValues(records),
        items.map((i) => i.capability.capability_id),
        items.map((i) => i.by),
        at,
        ...headMoveValues(moves),
        items.map((i) => i.capability.organization_id),
      ],
    });
    const written = new Set(rows.map((r) => r.organization_id));
    const consumed = new Set(rows.map((r) => r.capability_id));
    const results = new Map<ConsumeItem, ConsumeRecording>();
    for (const item of items) {
      // The row as read before, with what the statement set (it returns only the ids, not rows to parse again).
      if (consumed.has(item.capability.capability_id)) results.set(item, { consumed: { ...item.capability, consumed_at: at, consumed_by: item.by } });
    }
    return { written, results };
  },

  /** Postgres is the durable arbiter: it refuses a second consume even if Redis lost its marker. */
  async locked(tx, items, append) {
    const rows = await capabilitySql.consume(tx, items.map((i) => i.capability.capability_id), items.map((i) => i.by));
    const consumed = new Map(rows.map((r) => [r.capability_id, r]));
    const results: ConsumeRecording[] = [];
    const done: CapabilityRow[] = [];
    for (const item of items) {
      const row = consumed.get(item.capability.capability_id);
      // The first item of a capability takes the consume; a twin in the same group is a replay.
      if (row) {
        consumed.delete(item.capability.capability_id);
        done.push(row);
        results.push({ consumed: row });
      } else results.push({ refused: await capabilitySql.refusal(tx, item.capability.capability_id) });
    }
    await append(done.map((row) => consumeEntry(row, row.consumed_by!, row.consumed_at!)), new Date());
    return results;
  },

  collision: () => null,
};
