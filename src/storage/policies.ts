/** A policy version as stored. */
export interface PolicyVersionRow {
  organization_id: string;
  policy_key: string;
  version: number;
  state: "draft" | "in_review" | "approved" | "active" | "superseded" | "disabled";
  source: { rules?: unknown; rules_yaml?: string; rego?: string };
  rego: string;
  author: string;
  approver: string | null;
  created_at: Date;
  published_at: Date | null;
  /** The policy's version that was active when this one was published (what a rollback from it restores), or null. */
  previous_version: number | null;
}

/** A version to add: numbered by the store (one more than the policy's last). */
export interface NewPolicyVersion {
  organization_id: string;
  policy_key: string;
  state: PolicyVersionRow["state"];
  source: object;
  rego: string;
  author: string;
}

/** A policy's key and description (its versions are read apart). */
export interface PolicySummary {
  policy_key: string;
  description: string;
}

/** What an organization evaluates against: a stored bundle and what was compiled into it. */
export interface PolicyHead {
  bundle_digest: string;
  policy_versions: Record<string, number>;
  graph_version: number;
}

/** An authority graph version as stored: draft → approved (by an identity other than its author: the domain checks it, the store does not) → active → superseded. */
export interface GraphVersionRow {
  organization_id: string;
  version: number;
  state: "draft" | "approved" | "active" | "superseded";
  graph: unknown;
  author: string;
  approver: string | null;
  created_at: Date;
  published_at: Date | null;
}

/** A graph version without its graph. */
export type GraphVersionSummary = Omit<GraphVersionRow, "graph">;

/** A change of a graph version's state computed from the version as it stands under lock. */
export interface GraphVersionChange {
  state: GraphVersionRow["state"];
  /** Set as the approver; null leaves it as it is. */
  approver: string | null;
}

/** A governance document as stored (the source of generated graphs); `name` is unique among the organization's documents. */
export interface GovernanceDocumentRow {
  document_id: string;
  organization_id: string;
  name: string;
  kind: string;
  format: string;
  content: string;
  /** Data rows, counted when it was parsed at upload. */
  row_count: number;
  author: string;
  created_at: Date;
}

/** A governance document without its content. */
export type GovernanceDocumentSummary = Pick<GovernanceDocumentRow, "document_id" | "name" | "kind" | "format" | "row_count" | "author" | "created_at">;

/**
 * The policy a new organization starts with, active at version 1, and the bundle its head points
 * at (stored beforehand with `putBundle`). Installed by the organization store, in the
 * transaction that creates the organization.
 */
export interface InitialPolicy {
  policy_key: string;
  description: string;
  source: object;
  rego: string;
  author: string;
  head: PolicyHead;
}

/** What a publication is computed from, read under the organization's publication lock. */
export interface PublicationBasis {
  /** The active version of each policy, by policy key. */
  activeVersions: PolicyVersionRow[];
  /** The active graph version, or null before the first graph publication. */
  activeGraph: GraphVersionRow | null;
}

/** What a publication stores: the bundle built, the head pointing at it, and its evidence. */
export interface Publication {
  bundle: { digest: string; bytes: Buffer };
  head: PolicyHead;
  /** The kind, subject and payload of the publication's evidence record. */
  evidence: { kind: string; subjectId: string; payload: Record<string, unknown> };
}

/** A change of a version's state computed from the version as it stands under lock. */
export interface PolicyVersionChange {
  state: PolicyVersionRow["state"];
  /** Set as the approver; null leaves it as it is. */
  approver: string | null;
}

/**
 * A four-eyes change of a policy's active version: requested by one identity, applied by another
 * (docs/architecture.md, Policies). `stale` when the active version moved before it was applied.
 */
export interface PolicyChangeRow {
  change_id: string;
  organization_id: string;
  policy_key: string;
  kind: "rollback" | "disable";
  state: "pending_approval" | "applied" | "stale";
  /** The version active when the change was requested. */
  from_version: number;
  /** The version active once applied; 0 for a disable. */
  to_version: number;
  requested_by: string;
  approved_by: string | null;
  note: string;
  requested_at: Date;
  applied_at: Date | null;
}

/** A change to request (pending_approval). */
export type NewPolicyChange = Pick<PolicyChangeRow, "change_id" | "organization_id" | "policy_key" | "kind" | "from_version" | "to_version" | "requested_by" | "note">;

/** What a change of one policy is decided from, read under the organization's publication lock. */
export interface PolicyChangeBasis extends PublicationBasis {
  /** The policy's active version, or null when none is. */
  active: PolicyVersionRow | null;
  /** The version `active.previous_version` names (what a rollback restores), or null. */
  previous: PolicyVersionRow | null;
  /** The policy's change waiting for a second identity, or null. */
  pending: PolicyChangeRow | null;
}

/** What to do, decided from a PolicyChangeBasis. */
export type PolicyChangeStep =
  /** Store a new pending change. */
  | { step: "request"; change: NewPolicyChange }
  /** Apply the pending change, approved by `approvedBy`, with this publication. */
  | { step: "apply"; approvedBy: string; publication: Publication }
  /** Mark the pending change stale (the active version moved since it was requested). */
  | { step: "stale" };

/**
 * Runtime policies and their versions, the authority graph's versions and the governance
 * documents they are generated from, the compiled bundles, and each organization's head (what
 * it evaluates against). Publications of one organization serialize on its head.
 */
export interface PolicyStore {
  /** Stores a bundle under its digest; storing one that is already there does nothing. */
  putBundle(digest: string, bundle: Buffer): Promise<void>;

  /** The bundle stored under `digest`, or null when there is none. */
  bundle(digest: string): Promise<Buffer | null>;

  /**
   * The bundle stored under `digest` when the organization has used it: its head points at it,
   * a publication, rollback or disable of the organization recorded it as its bundle_digest
   * (evidence), or one of its decisions was evaluated with it. Null otherwise, whether or not
   * another organization's bundle has that digest (never a leak).
   */
  organizationBundle(organizationId: string, digest: string): Promise<Buffer | null>;

  /** The organization's head, or null when it has none. */
  head(organizationId: string): Promise<PolicyHead | null>;

  /**
   * Creates a policy with its first version; returns the version. Throws CollisionError
   * (key `policies_pkey`) when the organization already has a policy with that key.
   */
  createPolicy(description: string, first: NewPolicyVersion): Promise<PolicyVersionRow>;

  /**
   * Adds the next version of a policy, numbered one past its last under the policy's lock;
   * returns it. Throws NotFoundError when the organization has no such policy.
   */
  addVersion(version: NewPolicyVersion): Promise<PolicyVersionRow>;

  /** The organization's policies, by key. */
  policies(organizationId: string): Promise<PolicySummary[]>;

  /** Versions of the organization's policies (of one policy when `policyKey` is given), by key and version. */
  versions(organizationId: string, policyKey?: string): Promise<PolicyVersionRow[]>;

  /**
   * Changes one version's state atomically: locks the version, hands it to `step` (which returns
   * the change, or throws to refuse it, writing nothing) and stores the change. Returns the
   * version as changed. Throws NotFoundError when the organization has no such version.
   */
  changeVersion(organizationId: string, policyKey: string, version: number, step: (current: PolicyVersionRow) => PolicyVersionChange): Promise<PolicyVersionRow>;

  /**
   * Publishes a version in one transaction, under the organization's publication lock: locks
   * the version and hands it with the publication's basis to `publish`, which builds the
   * bundle (asynchronously: it compiles) and returns the publication, or throws to refuse it,
   * writing nothing. Then stores the bundle and the head, supersedes the policy's previously
   * active version, activates this one and appends the evidence record. Returns the version as
   * `publish` saw it, with its state `active`. Throws NotFoundError when the organization has
   * no such version.
   */
  publishVersion(
    organizationId: string,
    policyKey: string,
    version: number,
    publish: (target: PolicyVersionRow, basis: PublicationBasis) => Promise<Publication>,
  ): Promise<PolicyVersionRow>;

  /**
   * Requests, applies or retires a change of one policy's active version in one transaction,
   * under the organization's publication lock: reads the basis and hands it to `decide`, which
   * returns the step (asynchronously: applying compiles) or throws to refuse it, writing nothing.
   * `request` stores the change as pending (at most one per policy: the store refuses a second
   * with CollisionError `policy_changes_one_pending`). `apply` stores the bundle and the head as a
   * publication does, moves the versions (rollback: `from_version` superseded, `to_version` active;
   * disable: `from_version` disabled), marks the pending change applied and appends the evidence
   * record. `stale` marks the pending change stale and commits. Returns the step taken with the
   * change as stored. Throws NotFoundError when the organization has no such policy.
   */
  changePolicy(
    organizationId: string,
    policyKey: string,
    decide: (basis: PolicyChangeBasis) => Promise<PolicyChangeStep>,
  ): Promise<{ step: PolicyChangeStep["step"]; change: PolicyChangeRow }>;

  /**
   * Stores a governance document; returns it without its content. Throws CollisionError (key
   * `governance_documents_name`) when another of the organization's documents has its name.
   */
  addDocument(document: Omit<GovernanceDocumentRow, "created_at">): Promise<GovernanceDocumentSummary>;

  /** The organization's governance documents (all of them, or those of `ids` that exist), oldest first; deleted ones are gone. */
  documents(organizationId: string, ids?: readonly string[]): Promise<Omit<GovernanceDocumentRow, "organization_id">[]>;

  /**
   * Deletes one of the organization's documents: it is no longer listed nor generated from,
   * and its name is free again; graph versions generated from it are untouched. Returns false
   * when the organization has no such document (never had, or already deleted).
   */
  deleteDocument(organizationId: string, documentId: string): Promise<boolean>;

  /** Adds the organization's next graph version, as a draft by `author`; returns it. */
  addGraphVersion(organizationId: string, graph: unknown, author: string): Promise<GraphVersionRow>;

  /** The organization's active graph version, or null before the first graph publication. */
  activeGraph(organizationId: string): Promise<GraphVersionRow | null>;

  /** Every graph version of the organization, whatever its state, newest first, without graphs. */
  graphVersions(organizationId: string): Promise<GraphVersionSummary[]>;

  /** One of the organization's graph versions, in any state, or null when it has no such version. */
  graphVersion(organizationId: string, version: number): Promise<GraphVersionRow | null>;

  /**
   * Changes one graph version's state atomically: locks the version, hands it to `step` (which
   * returns the change, or throws to refuse it, writing nothing) and stores the change. Returns
   * the version as changed. Throws NotFoundError when the organization has no such version.
   */
  changeGraphVersion(organizationId: string, version: number, step: (current: GraphVersionRow) => GraphVersionChange): Promise<GraphVersionRow>;

  /**
   * Publishes a graph version in one transaction, under the organization's publication lock:
   * locks the version and hands it with the publication's basis to `publish` (as in
   * `publishVersion`), then stores the bundle and the head, supersedes the previously active
   * graph, activates this one and appends the evidence record. Returns the version as
   * activated. Throws NotFoundError when the organization has no such graph version.
   */
  publishGraph(organizationId: string, version: number, publish: (target: GraphVersionRow, basis: PublicationBasis) => Promise<Publication>): Promise<GraphVersionRow>;
}
