import { EvidenceLog } from "../../src/domain/evidence-log.js";
import { createDatabase, type Database } from "../../src/storage/postgres/database.js";
import { EvidenceChain } from "../../src/storage/postgres/evidence-chain.js";
import { PostgresEvidenceStore } from "../../src/storage/postgres/evidence.js";
import { createTestDatabase, startService, type TestService } from "./service.js";

/** What a storage contract suite builds its store under test on. */
export interface StoreDatabase<F> {
  url: string;
  db: Database;
  evidence: PostgresEvidenceStore;
  log: EvidenceLog;
  chain: EvidenceChain;
  /** What `prepare` made. */
  fixtures: F;
}

/**
 * A database of one storage contract suite's own (test/integration/*-store.test.ts): a service
 * migrates it and `prepare` makes the suite's fixtures through that service's API (with `db`
 * already open, for readings taken meanwhile); then the service leaves, so nothing but the store
 * under test writes there. Returns the pool, the evidence store and log, and a chain of its own.
 */
export async function storeDatabase<F = void>(name: string, prepare?: (svc: TestService, db: Database) => Promise<F>): Promise<StoreDatabase<F>> {
  const url = await createTestDatabase(name);
  const svc = await startService({ DATABASE_URL: url, MANDATE_MIGRATION_DATABASE_URL: url });
  const db = createDatabase(url, 8);
  let fixtures: F;
  try {
    fixtures = prepare ? await prepare(svc, db) : (undefined as F);
  } catch (err) {
    await db.close();
    throw err;
  } finally {
    await svc.close();
  }
  const evidence = new PostgresEvidenceStore(db);
  const log = await EvidenceLog.open(evidence);
  return { url, db, evidence, log, chain: new EvidenceChain(db, () => log.keys), fixtures };
}

/** `count` organizations made through `svc`'s API; their ids. */
export async function newOrganizations(svc: TestService, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) ids.push((await svc.newOrg()).organizationId);
  return ids;
}
