import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Database } from "./database.js";
import { grantServiceRole } from "./roles.js";

const migrationsDir = path.join(path.dirname(fileURLToPath(import.meta.url)), "migrations");

/** Any fixed number; every replica takes the same lock so only one migrates at a time. */
const MIGRATION_LOCK = 727_274_001;

/**
 * Applies every migration in `migrations/` not yet applied, in file-name order,
 * each in its own transaction, under a session advisory lock so replicas
 * starting together never race. Then, when `serviceRole` is given and is not the role migrating
 * (the tables' owner), gives it exactly its grants (roles.ts), every time, in one transaction.
 * `afterMigrate` runs after, under the same lock (for one-time bootstrap such as creating the
 * evidence key, which may use the service's own pool).
 */
export async function migrate(db: Database, afterMigrate?: () => Promise<void>, serviceRole?: string): Promise<string[]> {
  const files = (await readdir(migrationsDir)).filter((f) => f.endsWith(".sql")).sort();
  const applied: string[] = [];
  await db.session(async (lock) => {
    await lock.query("SELECT pg_advisory_lock($1)", [MIGRATION_LOCK]);
    await lock.query(
      "CREATE TABLE IF NOT EXISTS schema_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
    );
    const done = new Set((await lock.query<{ version: string }>("SELECT version FROM schema_migrations")).rows.map((r) => r.version));
    for (const file of files) {
      if (done.has(file)) continue;
      const sql = await readFile(path.join(migrationsDir, file), "utf8");
      await db.transaction(async (tx) => {
        await tx.query(sql);
        await tx.query("INSERT INTO schema_migrations (version) VALUES ($1)", [file]);
      });
      applied.push(file);
    }
    if (serviceRole !== undefined) {
      const { rows } = await lock.query<{ owner: string }>("SELECT current_user AS owner");
      if (rows[0]?.owner !== serviceRole) await db.transaction((tx) => grantServiceRole(tx, serviceRole));
    }
    if (afterMigrate) await afterMigrate();
    await lock.query("SELECT pg_advisory_unlock($1)", [MIGRATION_LOCK]);
  });
  return applied;
}
