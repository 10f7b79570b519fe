import { NotFoundError } from "../errors.js";
import type {
  GovernanceDocumentRow,
  GovernanceDocumentSummary,
  GraphVersionChange,
  GraphVersionRow,
  GraphVersionSummary,
  InitialPolicy,
  NewPolicyVersion,
  PolicyHead,
  NewPolicyChange,
  PolicyChangeBasis,
  PolicyChangeRow,
  PolicyChangeStep,
  PolicyStore,
  PolicySummary,
  PolicyVersionChange,
  PolicyVersionRow,
  Publication,
  PublicationBasis,
} from "../policies.js";
import type { Database, Queryable } from "./database.js";
import type { EvidenceChain } from "./evidence-chain.js";

/** SQL for policies, graph versions, governance documents, bundles and heads. */
export const policySql = {
  async putBundle(q: Queryable, digest: string, bundle: Buffer): Promise<void> {
    await q.query("INSERT INTO policy_bundles (digest, bundle) VALUES ($1, $2) ON CONFLICT (digest) DO NOTHING", [digest, bundle]);
  },

  async bundle(q: Queryable, digest: string): Promise<Buffer | null> {
    const { rows } = await q.query<{ bundle: Buffer }>("SELECT bundle FROM policy_bundles WHERE digest = $1", [digest]);
    return rows[0]?.bundle ?? null;
  },

  // Head changes all write evidence naming their bundle; decisions cover the head an organization
  // was created with, which no evidence names. Without an index on either, the last two read the
  // organization's rows: this serves downloads, not the decision path.
  async organizationBundle(q: Queryable, organizationId: string, digest: string): Promise<Buffer | null> {
    const { rows } = await q.query<{ bundle: Buffer }>(
      `SELECT b.bundle FROM policy_bundles b
        WHERE b.digest = $2
          AND (EXISTS (SELECT 1 FROM policy_heads h WHERE h.organization_id = $1 AND h.bundle_digest = $2)
            OR EXISTS (SELECT 1 FROM evidence_records e
                        WHERE e.organization_id = $1
                          AND e.kind IN ('policy.published', 'graph.published', 'policy.rolled_back', 'policy.disabled')
                          AND e.document::jsonb #>> '{payload,bundle_digest}' = $2)
            OR EXISTS (SELECT 1 FROM decisions d WHERE d.organization_id = $1 AND d.bundle_digest = $2))`,
      [organizationId, digest],
    );
    return rows[0]?.bundle ?? null;
  },

  /** The organization's current head, or null. `lock` holds it for the transaction (publications serialize here). */
  async head(q: Queryable, organizationId: string, lock = false): Promise<PolicyHead | null> {
    const { rows } = await q.query<PolicyHead>(
      `SELECT bundle_digest, policy_versions, graph_version FROM policy_heads WHERE organization_id = $1${lock ? " FOR UPDATE" : ""}`,
      [organizationId],
    );
    return rows[0] ?? null;
  },

  /** Points the organization at a new bundle. */
  async setHead(q: Queryable, organizationId: string, head: PolicyHead): Promise<void> {
    await q.query(
      `INSERT INTO policy_heads (organization_id, bundle_digest, policy_versions, graph_version) VALUES ($1, $2, $3, $4)
       ON CONFLICT (organization_id) DO UPDATE SET bundle_digest = $2, policy_versions = $3, graph_version = $4, updated_at = now()`,
      [organizationId, head.bundle_digest, JSON.stringify(head.policy_versions), head.graph_version],
    );
  },

  /** Creates a policy; a collision on policies_pkey means the key is taken. */
  async insertPolicy(q: Queryable, organizationId: string, policyKey: string, description: string): Promise<void> {
    await q.query("INSERT INTO policies (organization_id, policy_key, description) VALUES ($1, $2, $3)", [organizationId, policyKey, description]);
  },

  /** Adds the next version of a policy (numbered under the policy row's lock); null when there is no such policy. */
  async insertVersion(q: Queryable, v: NewPolicyVersion): Promise<PolicyVersionRow | null> {
    const locked = await q.query("SELECT 1 FROM policies WHERE organization_id = $1 AND policy_key = $2 FOR UPDATE", [v.organization_id, v.policy_key]);
    if (locked.rows.length === 0) return null;
    const { rows } = await q.query<PolicyVersionRow>(
      `INSERT INTO policy_versions (organization_id, policy_key, version, state, source, rego, author, published_at)
       SELECT $1, $2, coalesce(max(version), 0) + 1, $3, $4, $5, $6, CASE WHEN $3 = 'active' THEN now() END
         FROM policy_versions WHERE organization_id = $1 AND policy_key = $2
       RETURNING *`,
      [v.organization_id, v.policy_key, v.state, JSON.stringify(v.source), v.rego, v.author],
    );
    return rows[0]!;
  },

  /**
   * Installs a new organization's first policy, active, and points its head at the policy's
   * bundle (already stored), inside the transaction creating the organization.
   */
  async installInitial(q: Queryable, organizationId: string, policy: InitialPolicy): Promise<void> {
    await policySql.insertPolicy(q, organizationId, policy.policy_key, policy.description);
    await policySql.insertVersion(q, {
      organization_id: organizationId,
      policy_key: policy.policy_key,
      state: "active",
      source: policy.source,
      rego: policy.rego,
      author: policy.author,
    });
    await policySql.setHead(q, organizationId, policy.head);
  },

  async policies(q: Queryable, organizationId: string): Promise<PolicySummary[]> {
    const { rows } = await q.query<PolicySummary>("SELECT policy_key, description FROM policies WHERE organization_id = $1 ORDER BY policy_key", [organizationId]);
    return rows;
  },

  async versions(q: Queryable, organizationId: string, policyKey?: string): Promise<PolicyVersionRow[]> {
    const { rows } = await q.query<PolicyVersionRow>(
      `SELECT * FROM policy_versions WHERE organization_id = $1 AND ($2::text IS NULL OR policy_key = $2) ORDER BY policy_key, version`,
      [organizationId, policyKey ?? null],
    );
    return rows;
  },

  /** One version, locked for the transaction, or null. */
  async lockVersion(q: Queryable, organizationId: string, policyKey: string, version: number): Promise<PolicyVersionRow | null> {
    const { rows } = await q.query<PolicyVersionRow>(
      "SELECT * FROM policy_versions WHERE organization_id = $1 AND policy_key = $2 AND version = $3 FOR UPDATE",
      [organizationId, policyKey, version],
    );
    return rows[0] ?? null;
  },

  /** Sets a version's state (and approver when given; the publication time when it becomes active); returns it. */
  async setVersionState(
    q: Queryable,
    organizationId: string,
    policyKey: string,
    version: number,
    state: PolicyVersionRow["state"],
    approver: string | null = null,
  ): Promise<PolicyVersionRow> {
    const { rows } = await q.query<PolicyVersionRow>(
      `UPDATE policy_versions SET state = $4, approver = coalesce($5, approver),
              published_at = CASE WHEN $4 = 'active' THEN now() ELSE published_at END
        WHERE organization_id = $1 AND policy_key = $2 AND version = $3
        RETURNING *`,
      [organizationId, policyKey, version, state, approver],
    );
    return rows[0]!;
  },

  /** The active version of each policy (the modules of the next bundle). */
  async activeVersions(q: Queryable, organizationId: string): Promise<PolicyVersionRow[]> {
    const { rows } = await q.query<PolicyVersionRow>(
      "SELECT * FROM policy_versions WHERE organization_id = $1 AND state = 'active' ORDER BY policy_key",
      [organizationId],
    );
    return rows;
  },

  /** Records which version a publication replaced (what a rollback from it restores). */
  async setPreviousVersion(q: Queryable, organizationId: string, policyKey: string, version: number, previous: number | null): Promise<void> {
    await q.query("UPDATE policy_versions SET previous_version = $4 WHERE organization_id = $1 AND policy_key = $2 AND version = $3", [
      organizationId,
      policyKey,
      version,
      previous,
    ]);
  },

  /** Whether the organization has the policy, its row then locked for the transaction. */
  async policyExists(q: Queryable, organizationId: string, policyKey: string): Promise<boolean> {
    const { rows } = await q.query("SELECT 1 FROM policies WHERE organization_id = $1 AND policy_key = $2 FOR UPDATE", [organizationId, policyKey]);
    return rows.length > 0;
  },

  /** The policy's change waiting for a second identity, locked for the transaction, or null. */
  async pendingChange(q: Queryable, organizationId: string, policyKey: string): Promise<PolicyChangeRow | null> {
    const { rows } = await q.query<PolicyChangeRow>(
      "SELECT * FROM policy_changes WHERE organization_id = $1 AND policy_key = $2 AND state = 'pending_approval' FOR UPDATE",
      [organizationId, policyKey],
    );
    return rows[0] ?? null;
  },

  /** Stores a change as pending; a second pending change of the policy collides on policy_changes_one_pending. */
  async insertChange(q: Queryable, c: NewPolicyChange): Promise<PolicyChangeRow> {
    const { rows } = await q.query<PolicyChangeRow>(
      `INSERT INTO policy_changes (change_id, organization_id, policy_key, kind, state, from_version, to_version, requested_by, note)
       VALUES ($1, $2, $3, $4, 'pending_approval', $5, $6, $7, $8) RETURNING *`,
      [c.change_id, c.organization_id, c.policy_key, c.kind, c.from_version, c.to_version, c.requested_by, c.note],
    );
    return rows[0]!;
  },

  /** Ends a pending change: applied (by `approvedBy`) or stale; returns it. */
  async closeChange(q: Queryable, changeId: string, state: "applied" | "stale", approvedBy: string | null = null): Promise<PolicyChangeRow> {
    const { rows } = await q.query<PolicyChangeRow>(
      `UPDATE policy_changes SET state = $2, approved_by = $3, applied_at = CASE WHEN $2 = 'applied' THEN date_trunc('milliseconds', now()) END
        WHERE change_id = $1 AND state = 'pending_approval' RETURNING *`,
      [changeId, state, approvedBy],
    );
    if (!rows[0]) throw new Error(`policy change ${changeId} is no longer pending`);
    return rows[0];
  },

  /**
   * Moves one version from state `from` to `to` (keeping its publication time); throws when it is
   * not in `from`, which the publication lock rules out.
   */
  async moveVersion(q: Queryable, organizationId: string, policyKey: string, version: number, from: PolicyVersionRow["state"], to: PolicyVersionRow["state"]): Promise<void> {
    const { rowCount } = await q.query("UPDATE policy_versions SET state = $5 WHERE organization_id = $1 AND policy_key = $2 AND version = $3 AND state = $4", [
      organizationId,
      policyKey,
      version,
      from,
      to,
    ]);
    if (rowCount !== 1) throw new Error(`policy ${policyKey} version ${version} is not ${from}`);
  },

  /** Stores a document; a collision on governance_documents_name means the name is taken. */
  async insertDocument(q: Queryable, d: Omit<GovernanceDocumentRow, "created_at">): Promise<GovernanceDocumentSummary> {
    const { rows } = await q.query<GovernanceDocumentSummary>(
      `INSERT INTO governance_documents (document_id, organization_id, name, kind, format, content, row_count, author)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
       RETURNING document_id, name, kind, format, row_count, author, created_at`,
      [d.document_id, d.organization_id, d.name, d.kind, d.format, d.content, d.row_count, d.author],
    );
    return rows[0]!;
  },

  async documents(q: Queryable, organizationId: string, ids?: readonly string[]): Promise<Omit<GovernanceDocumentRow, "organization_id">[]> {
    const { rows } = await q.query<Omit<GovernanceDocumentRow, "organization_id">>(
      `SELECT document_id, name, kind, format, content, row_count, author, created_at FROM governance_documents
        WHERE organization_id = $1 AND deleted_at IS NULL AND ($2::text[] IS NULL OR document_id = ANY($2)) ORDER BY created_at, document_id`,
      [organizationId, ids && ids.length ? ids : null],
    );
    return rows;
  },

  /** Marks a document deleted (the table is history: nothing is removed); false when there was no such live document. */
  async deleteDocument(q: Queryable, organizationId: string, documentId: string): Promise<boolean> {
    const { rowCount } = await q.query(
      "UPDATE governance_documents SET deleted_at = now() WHERE organization_id = $1 AND document_id = $2 AND deleted_at IS NULL",
      [organizationId, documentId],
    );
    return rowCount === 1;
  },

  /** Adds the next graph version as a draft, numbered under a per-organization advisory lock. */
  async insertGraphVersion(q: Queryable, organizationId: string, graph: unknown, author: string): Promise<GraphVersionRow> {
    await q.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`graph:${organizationId}`]);
    const { rows } = await q.query<GraphVersionRow>(
      `INSERT INTO graph_versions (organization_id, version, state, graph, author)
       SELECT $1, coalesce(max(version), 0) + 1, 'draft', $2, $3 FROM graph_versions WHERE organization_id = $1
       RETURNING *`,
      [organizationId, JSON.stringify(graph), author],
    );
    return rows[0]!;
  },

  /** A graph version, or the active one when `version` is null. */
  async graphVersion(q: Queryable, organizationId: string, version: number | null): Promise<GraphVersionRow | null> {
    const { rows } = await q.query<GraphVersionRow>(
      version === null
        ? "SELECT * FROM graph_versions WHERE organization_id = $1 AND state = 'active'"
        : "SELECT * FROM graph_versions WHERE organization_id = $1 AND version = $2",
      version === null ? [organizationId] : [organizationId, version],
    );
    return rows[0] ?? null;
  },

  /** Every graph version, newest first, without its graph. */
  async graphVersions(q: Queryable, organizationId: string): Promise<GraphVersionSummary[]> {
    const { rows } = await q.query<GraphVersionSummary>(
      `SELECT organization_id, version, state, author, approver, created_at, published_at FROM graph_versions
        WHERE organization_id = $1 ORDER BY version DESC`,
      [organizationId],
    );
    return rows;
  },

  /** One graph version, locked for the transaction, or null. */
  async lockGraphVersion(q: Queryable, organizationId: string, version: number): Promise<GraphVersionRow | null> {
    const { rows } = await q.query<GraphVersionRow>("SELECT * FROM graph_versions WHERE organization_id = $1 AND version = $2 FOR UPDATE", [organizationId, version]);
    return rows[0] ?? null;
  },

  /** Sets a graph version's state (and approver when given); returns it. */
  async setGraphVersionState(q: Queryable, organizationId: string, version: number, change: GraphVersionChange): Promise<GraphVersionRow> {
    const { rows } = await q.query<GraphVersionRow>(
      "UPDATE graph_versions SET state = $3, approver = coalesce($4, approver) WHERE organization_id = $1 AND version = $2 RETURNING *",
      [organizationId, version, change.state, change.approver],
    );
    return rows[0]!;
  },

  /** Makes `version` the active graph and supersedes the previous one; returns it. */
  async activateGraph(q: Queryable, organizationId: string, version: number): Promise<GraphVersionRow> {
    await q.query("UPDATE graph_versions SET state = 'superseded' WHERE organization_id = $1 AND state = 'active'", [organizationId]);
    const { rows } = await q.query<GraphVersionRow>(
      "UPDATE graph_versions SET state = 'active', published_at = date_trunc('milliseconds', now()) WHERE organization_id = $1 AND version = $2 RETURNING *",
      [organizationId, version],
    );
    return rows[0]!;
  },
};

/** The PolicyStore on Postgres; publications append their evidence to `chain` in their transaction. */
export class PostgresPolicyStore implements PolicyStore {
  constructor(
    private readonly db: Database,
    private readonly chain: EvidenceChain,
  ) {}

  putBundle(digest: string, bundle: Buffer): Promise<void> {
    return policySql.putBundle(this.db.pool, digest, bundle);
  }

  bundle(digest: string): Promise<Buffer | null> {
    return policySql.bundle(this.db.pool, digest);
  }

  organizationBundle(organizationId: string, digest: string): Promise<Buffer | null> {
    return policySql.organizationBundle(this.db.pool, organizationId, digest);
  }

  head(organizationId: string): Promise<PolicyHead | null> {
    return policySql.head(this.db.pool, organizationId);
  }

  createPolicy(description: string, first: NewPolicyVersion): Promise<PolicyVersionRow> {
    return this.db.transaction(async (tx) => {
      await policySql.insertPolicy(tx, first.organization_id, first.policy_key, description);
      return (await policySql.insertVersion(tx, first))!;
    });
  }

  addVersion(version: NewPolicyVersion): Promise<PolicyVersionRow> {
    return this.db.transaction(async (tx) => {
      const row = await policySql.insertVersion(tx, version);
      if (!row) throw new NotFoundError("policy");
      return row;
    });
  }

  policies(organizationId: string): Promise<PolicySummary[]> {
    return policySql.policies(this.db.pool, organizationId);
  }

  versions(organizationId: string, policyKey?: string): Promise<PolicyVersionRow[]> {
    return policySql.versions(this.db.pool, organizationId, policyKey);
  }

  changeVersion(organizationId: string, policyKey: string, version: number, step: (current: PolicyVersionRow) => PolicyVersionChange): Promise<PolicyVersionRow> {
    return this.db.transaction(async (tx) => {
      const current = await policySql.lockVersion(tx, organizationId, policyKey, version);
      if (!current) throw new NotFoundError("policy version");
      const change = step(current);
      return policySql.setVersionState(tx, organizationId, policyKey, version, change.state, change.approver);
    });
  }

  publishVersion(
    organizationId: string,
    policyKey: string,
    version: number,
    publish: (target: PolicyVersionRow, basis: PublicationBasis) => Promise<Publication>,
  ): Promise<PolicyVersionRow> {
    return this.db.transaction(async (tx) => {
      await policySql.head(tx, organizationId, true);
      const target = await policySql.lockVersion(tx, organizationId, policyKey, version);
      if (!target) throw new NotFoundError("policy version");
      const basis = await this.basis(tx, organizationId);
      const publication = await publish(target, basis);
      await this.storeHead(tx, organizationId, publication);
      for (const m of basis.activeVersions) {
        if (m.policy_key === policyKey) await policySql.setVersionState(tx, organizationId, policyKey, m.version, "superseded");
      }
      await policySql.setVersionState(tx, organizationId, policyKey, version, "active");
      const previous = basis.activeVersions.find((m) => m.policy_key === policyKey)?.version ?? null;
      await policySql.setPreviousVersion(tx, organizationId, policyKey, version, previous);
      await this.chain.append(tx, [{ organizationId, ...publication.evidence }]);
      return { ...target, state: "active" as const, previous_version: previous };
    });
  }

  changePolicy(
    organizationId: string,
    policyKey: string,
    decide: (basis: PolicyChangeBasis) => Promise<PolicyChangeStep>,
  ): Promise<{ step: PolicyChangeStep["step"]; change: PolicyChangeRow }> {
    return this.db.transaction(async (tx) => {
      await policySql.head(tx, organizationId, true);
      if (!(await policySql.policyExists(tx, organizationId, policyKey))) throw new NotFoundError("policy");
      const basis = await this.basis(tx, organizationId);
      const active = basis.activeVersions.find((v) => v.policy_key === policyKey) ?? null;
      const previous = active?.previous_version ? await policySql.lockVersion(tx, organizationId, policyKey, active.previous_version) : null;
      const pending = await policySql.pendingChange(tx, organizationId, policyKey);
      const step = await decide({ ...basis, active, previous, pending });
      if (step.step === "request") return { step: step.step, change: await policySql.insertChange(tx, step.change) };
      if (!pending) throw new Error(`no pending change of ${policyKey} to ${step.step}`);
      if (step.step === "stale") return { step: step.step, change: await policySql.closeChange(tx, pending.change_id, "stale") };
      // Applied as publishVersion applies a publication: the bundle and head, the versions, the evidence.
      await this.storeHead(tx, organizationId, step.publication);
      if (pending.kind === "rollback") {
        await policySql.moveVersion(tx, organizationId, policyKey, pending.from_version, "active", "superseded");
        await policySql.moveVersion(tx, organizationId, policyKey, pending.to_version, "superseded", "active");
      } else {
        await policySql.moveVersion(tx, organizationId, policyKey, pending.from_version, "active", "disabled");
      }
      const change = await policySql.closeChange(tx, pending.change_id, "applied", step.approvedBy);
      await this.chain.append(tx, [{ organizationId, ...step.publication.evidence }]);
      return { step: step.step, change };
    });
  }

  addDocument(document: Omit<GovernanceDocumentRow, "created_at">): Promise<GovernanceDocumentSummary> {
    return policySql.insertDocument(this.db.pool, document);
  }

  documents(organizationId: string, ids?: readonly string[]): Promise<Omit<GovernanceDocumentRow, "organization_id">[]> {
    return policySql.documents(this.db.pool, organizationId, ids);
  }

  addGraphVersion(organizationId: string, graph: unknown, author: string): Promise<GraphVersionRow> {
    return this.db.transaction((tx) => policySql.insertGraphVersion(tx, organizationId, graph, author));
  }

  activeGraph(organizationId: string): Promise<GraphVersionRow | null> {
    return policySql.graphVersion(this.db.pool, organizationId, null);
  }

  deleteDocument(organizationId: string, documentId: string): Promise<boolean> {
    return policySql.deleteDocument(this.db.pool, organizationId, documentId);
  }

  graphVersions(organizationId: string): Promise<GraphVersionSummary[]> {
    return policySql.graphVersions(this.db.pool, organizationId);
  }

  changeGraphVersion(organizationId: string, version: number, step: (current: GraphVersionRow) => GraphVersionChange): Promise<GraphVersionRow> {
    return this.db.transaction(async (tx) => {
      const current = await policySql.lockGraphVersion(tx, organizationId, version);
      if (!current) throw new NotFoundError("graph version");
      return policySql.setGraphVersionState(tx, organizationId, version, step(current));
    });
  }

  graphVersion(organizationId: string, version: number): Promise<GraphVersionRow | null> {
    return policySql.graphVersion(this.db.pool, organizationId, version);
  }

  publishGraph(organizationId: string, version: number, publish: (target: GraphVersionRow, basis: PublicationBasis) => Promise<Publication>): Promise<GraphVersionRow> {
    return this.db.transaction(async (tx) => {
      await policySql.head(tx, organizationId, true);
      const target = await policySql.lockGraphVersion(tx, organizationId, version);
      if (!target) throw new NotFoundError("graph version");
      const publication = await publish(target, await this.basis(tx, organizationId));
      await this.storeHead(tx, organizationId, publication);
      const active = await policySql.activateGraph(tx, organizationId, version);
      await this.chain.append(tx, [{ organizationId, ...publication.evidence }]);
      return active;
    });
  }

  /** What a publication is built from, read under the publication lock. */
  private async basis(tx: Queryable, organizationId: string): Promise<PublicationBasis> {
    return { activeVersions: await policySql.activeVersions(tx, organizationId), activeGraph: await policySql.graphVersion(tx, organizationId, null) };
  }

  /** Stores a publication's bundle and points the organization's head at it. */
  private async storeHead(tx: Queryable, organizationId: string, publication: Publication): Promise<void> {
    await policySql.putBundle(tx, publication.bundle.digest, publication.bundle.bytes);
    await policySql.setHead(tx, organizationId, publication.head);
  }
}
