import type { Queryable } from "./database.js";

/** A policy version row. */
export interface PolicyVersionRow {
  organization_id: string;
  policy_key: string;
  version: number;
  state: "draft" | "in_review" | "approved" | "active" | "superseded";
  source: { rules?: unknown; rules_yaml?: string; rego?: string };
  rego: string;
  author: string;
  approver: string | null;
  created_at: Date;
  published_at: Date | null;
}

/** What an organization evaluates against. */
export interface PolicyHead {
  bundle_digest: string;
  policy_versions: Record<string, number>;
  graph_version: number;
}

/** A graph version row. */
export interface GraphVersionRow {
  organization_id: string;
  version: number;
  state: "draft" | "active" | "superseded";
  graph: unknown;
  created_at: Date;
  published_at: Date | null;
}

/** SQL for policies, graph versions, governance documents and bundles. */
export const policyStore = {
  /** Stores a bundle once per digest. */
  async putBundle(q: Queryable, digest: string, bundle: Buffer): Promise<void> {
    await q.query("INSERT INTO policy_bundles (digest, bundle) VALUES ($1, $2) ON CONFLICT (digest) DO NOTHING", [digest, bundle]);
  },

  /** The bundle bytes, or null. */
  async bundle(q: Queryable, digest: string): Promise<Buffer | null> {
    const { rows } = await q.query<{ bundle: Buffer }>("SELECT bundle FROM policy_bundles WHERE digest = $1", [digest]);
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

  /** Creates a policy; a unique violation means the key is taken. */
  async insertPolicy(q: Queryable, organizationId: string, policyKey: string, description: string): Promise<void> {
    await q.query("INSERT INTO policies (organization_id, policy_key, description) VALUES ($1, $2, $3)", [organizationId, policyKey, description]);
  },

  /** Adds the next version of a policy (numbered under the policy row's lock). */
  async insertVersion(
    q: Queryable,
    v: { organization_id: string; policy_key: string; state: PolicyVersionRow["state"]; source: object; rego: string; author: string },
  ): Promise<PolicyVersionRow> {
    await q.query("SELECT 1 FROM policies WHERE organization_id = $1 AND policy_key = $2 FOR UPDATE", [v.organization_id, v.policy_key]);
    const { rows } = await q.query<PolicyVersionRow>(
      `INSERT INTO policy_versions (organization_id, policy_key, version, state, source, rego, author, published_at)
       SELECT $1, $2, coalesce(max(version), 0) + 1, $3, $4, $5, $6, CASE WHEN $3 = 'active' THEN now() END
         FROM policy_versions WHERE organization_id = $1 AND policy_key = $2
       RETURNING *`,
      [v.organization_id, v.policy_key, v.state, JSON.stringify(v.source), v.rego, v.author],
    );
    return rows[0]!;
  },

  /** Policies of the organization with their descriptions. */
  async policies(q: Queryable, organizationId: string): Promise<{ policy_key: string; description: string }[]> {
    const { rows } = await q.query("SELECT policy_key, description FROM policies WHERE organization_id = $1 ORDER BY policy_key", [organizationId]);
    return rows;
  },

  /** Versions of the organization's policies (one policy when `policyKey` is given), in version order. */
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

  /** Sets a version's state (and approver / publication time when given). */
  async setVersionState(q: Queryable, organizationId: string, policyKey: string, version: number, state: PolicyVersionRow["state"], approver?: string): Promise<void> {
    await q.query(
      `UPDATE policy_versions SET state = $4, approver = coalesce($5, approver),
              published_at = CASE WHEN $4 = 'active' THEN now() ELSE published_at END
        WHERE organization_id = $1 AND policy_key = $2 AND version = $3`,
      [organizationId, policyKey, version, state, approver ?? null],
    );
  },

  /** The active version of each policy (the modules of the next bundle). */
  async activeVersions(q: Queryable, organizationId: string): Promise<PolicyVersionRow[]> {
    const { rows } = await q.query<PolicyVersionRow>(
      "SELECT * FROM policy_versions WHERE organization_id = $1 AND state = 'active' ORDER BY policy_key",
      [organizationId],
    );
    return rows;
  },

  /** Stores a governance document. */
  async insertDocument(q: Queryable, d: { document_id: string; organization_id: string; kind: string; format: string; content: string }) {
    const { rows } = await q.query<{ document_id: string; kind: string; format: string; created_at: Date }>(
      `INSERT INTO governance_documents (document_id, organization_id, kind, format, content) VALUES ($1, $2, $3, $4, $5)
       RETURNING document_id, kind, format, created_at`,
      [d.document_id, d.organization_id, d.kind, d.format, d.content],
    );
    return rows[0]!;
  },

  /** The organization's documents (all, or the given ids), oldest first. */
  async documents(q: Queryable, organizationId: string, ids?: readonly string[]) {
    const { rows } = await q.query<{ document_id: string; kind: string; format: string; content: string; created_at: Date }>(
      `SELECT document_id, kind, format, content, created_at FROM governance_documents
        WHERE organization_id = $1 AND ($2::text[] IS NULL OR document_id = ANY($2)) ORDER BY created_at, document_id`,
      [organizationId, ids && ids.length ? ids : null],
    );
    return rows;
  },

  /** Adds the next graph version as a draft. */
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

  /** Makes `version` the active graph and supersedes the previous one. */
  async activateGraph(q: Queryable, organizationId: string, version: number): Promise<void> {
    await q.query("UPDATE graph_versions SET state = 'superseded' WHERE organization_id = $1 AND state = 'active'", [organizationId]);
    await q.query("UPDATE graph_versions SET state = 'active', published_at = now() WHERE organization_id = $1 AND version = $2", [organizationId, version]);
  },
};
