import type { Queryable } from "./database.js";

/*
 * Two roles (docs/architecture.md, The evidence chain: Roles). The owner role owns the schema
 * and every table, and migrations run as it; the service role, which the service's pool logs in
 * as, owns nothing, is no superuser, and holds only the grants below. So a process holding the
 * service's credentials cannot disable the evidence chain's triggers, alter or drop a table,
 * update or delete history, nor run a program from COPY. The embedded cluster makes both
 * (embedded.ts); an external database's administrator does (README, External Postgres).
 */

/** The embedded cluster's owner role: owns the `mandate` database, its schema and tables. */
export const OWNER_ROLE = "mandate_owner";
/** The embedded cluster's service role: LOGIN, owns nothing. */
export const SERVICE_ROLE = "mandate_service";

type Privilege = "SELECT" | "INSERT" | "UPDATE" | "DELETE";

/**
 * What the service role may do, table by table: the least its statements need (src/storage/
 * postgres/*.ts). History is SELECT, INSERT only. UPDATE where a row changes state, is upserted
 * (ON CONFLICT DO UPDATE) or is locked (SELECT … FOR UPDATE/SHARE needs it). No DELETE or
 * TRUNCATE on anything that is history; DELETE only on webhook_deliveries, a work queue whose rows
 * the retention window trims (the events they carried stay in evidence_records); no sequences
 * (every id is text). A migration that adds a table adds it here
 * (test/integration/postgres-roles.test.ts checks that every table has an entry).
 */
export const SERVICE_GRANTS: Readonly<Record<string, readonly Privilege[]>> = {
  // Append-only history.
  evidence_records: ["SELECT", "INSERT"],
  sandbox_signups: ["SELECT", "INSERT"],
  principals: ["SELECT", "INSERT"],
  policy_bundles: ["SELECT", "INSERT"],
  integration_actions: ["SELECT", "INSERT"],
  execution_receipts: ["SELECT", "INSERT"],
  adapter_reports: ["SELECT", "INSERT"],
  reconciliations: ["SELECT", "INSERT"],
  // Claimed by the certificates' and adapters' insert trigger, in the service's own statement.
  public_keys: ["SELECT", "INSERT"],
  // Rows with a state, a chain head, an upsert or a row lock.
  // Deleting a governance document marks it (deleted_at); the row stays.
  governance_documents: ["SELECT", "INSERT", "UPDATE"],
  evidence_heads: ["SELECT", "INSERT", "UPDATE"],
  evidence_keys: ["SELECT", "INSERT", "UPDATE"],
  organizations: ["SELECT", "INSERT", "UPDATE"],
  api_keys: ["SELECT", "INSERT", "UPDATE"],
  agents: ["SELECT", "INSERT", "UPDATE"],
  certificates: ["SELECT", "INSERT", "UPDATE"],
  policies: ["SELECT", "INSERT", "UPDATE"],
  policy_versions: ["SELECT", "INSERT", "UPDATE"],
  policy_heads: ["SELECT", "INSERT", "UPDATE"],
  policy_changes: ["SELECT", "INSERT", "UPDATE"],
  graph_versions: ["SELECT", "INSERT", "UPDATE"],
  decisions: ["SELECT", "INSERT", "UPDATE"],
  integrations: ["SELECT", "INSERT", "UPDATE"],
  contract_versions: ["SELECT", "INSERT", "UPDATE"],
  adapters: ["SELECT", "INSERT", "UPDATE"],
  capabilities: ["SELECT", "INSERT", "UPDATE"],
  // Deleting a webhook marks it (deleted_at); cursors move with the deliveries they enqueue.
  webhooks: ["SELECT", "INSERT", "UPDATE"],
  webhook_cursors: ["SELECT", "INSERT", "UPDATE"],
  // A queue, not history: delivered and failed rows are trimmed after the event retention.
  webhook_deliveries: ["SELECT", "INSERT", "UPDATE", "DELETE"],
  // schema_migrations: none (migrations only).
};

/** `name` as a quoted SQL identifier. */
export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/**
 * Gives `role` exactly SERVICE_GRANTS in schema public (whatever it held before is revoked
 * first), as the tables' owner. Idempotent: run after every migration pass, so a role created
 * after the schema, or a table added by a later migration, gets its grants on the next start.
 */
export async function grantServiceRole(q: Queryable, role: string): Promise<void> {
  const grantee = quoteIdent(role);
  await q.query(`REVOKE ALL ON ALL TABLES IN SCHEMA public FROM ${grantee}`);
  await q.query(`REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM ${grantee}`);
  await q.query(`GRANT USAGE ON SCHEMA public TO ${grantee}`);
  for (const [table, privileges] of Object.entries(SERVICE_GRANTS)) {
    await q.query(`GRANT ${privileges.join(", ")} ON TABLE ${quoteIdent(table)} TO ${grantee}`);
  }
}
