import { readdirSync } from "node:fs";
import path from "node:path";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { repoRoot } from "../support/process.js";
import { createTestDatabase, startService } from "../support/service.js";

/*
 * Migrations run at start-up under an advisory lock: any number of replicas
 * starting at the same instant on an empty database all come up, each
 * migration is applied exactly once, and a restart applies nothing.
 */

describe("start-up migrations", () => {
  it("four replicas starting at once on an empty database all come up; each migration applies once", async () => {
    const url = await createTestDatabase("migrate");
    const logs: Record<string, unknown>[][] = [[], [], [], []];
    const services = await Promise.all(logs.map((l) => startService({ DATABASE_URL: url }, { logs: l })));
    try {
      const answers = await Promise.all(services.map((s) => s.v1("GET", "/v1/organization")));
      expect(answers.map((r) => r.status)).toEqual([401, 401, 401, 401]);

      const files = readdirSync(path.join(repoRoot, "src/storage/postgres/migrations")).filter((f) => f.endsWith(".sql")).sort();
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        const { rows } = await client.query<{ version: string }>("SELECT version FROM schema_migrations ORDER BY version");
        expect(rows.map((r) => r.version)).toEqual(files);
      } finally {
        await client.end();
      }
      // Exactly one replica applied them; the others found them applied.
      const appliers = logs.filter((l) => l.some((e) => e.msg === "migrations applied"));
      expect(appliers).toHaveLength(1);
    } finally {
      await Promise.all(services.map((s) => s.close()));
    }

    const restartLogs: Record<string, unknown>[] = [];
    const again = await startService({ DATABASE_URL: url }, { logs: restartLogs });
    await again.close();
    expect(restartLogs.filter((e) => e.msg === "migrations applied")).toEqual([]);
  });
});
