import { readFileSync } from "node:fs";

/*
 * Prints the table of the hostile suite's run (test/hostile/report.ts): the
 * rows the tests recorded in HOSTILE_REPORT (test/hostile/ and the e2e files
 * scripts/test-hostile.sh runs with it), then, for a scenario whose file
 * recorded no row, which file covers it. Exits 1 when a row has failures or
 * none was recorded.
 */

interface Row {
  order: number;
  attack: string;
  probes: number;
  failures: number;
  note?: string;
  scale: string;
}

const file = process.argv[2];
if (!file) throw new Error("usage: tsx test/hostile/print-table.ts REPORT_FILE");
let text = "";
try {
  text = readFileSync(file, "utf8");
} catch {
  // No file: no test recorded a row.
}
const rows = text
  .split("\n")
  .filter((l) => l.trim() !== "")
  .map((l) => JSON.parse(l) as Row)
  .sort((a, b) => a.order - b.order);

/** The rows the e2e files record (their `order`), and what to print when one did not. */
const FROM_E2E: [number, string, string][] = [
  [5, "SIGKILL under load (0 lost, chain verifies)", "test/e2e/evidence.test.ts"],
  [6, "Postgres stopped and frozen (503 in time, recovery)", "test/e2e/postgres-outage.test.ts"],
  [7, "Redis stopped and frozen (one winner, answers within 1 s)", "test/e2e/capabilities-redis-loss.test.ts"],
  [8, "slowloris (connections closed, per-address cap)", "test/e2e/connection-limits.test.ts"],
  [9, "noisy tenant (other tenant's p99 ratio)", "test/e2e/policy-time-limit.test.ts"],
];
const NOT_YET = FROM_E2E.filter(([order]) => !rows.some((r) => r.order === order)).map(([, attack, file]) => [attack, file] as const);

const fmt = (n: number) => n.toLocaleString("en-US");
const table: string[][] = [["attack", "probes", "failures", "notes"]];
for (const r of rows) table.push([r.attack, fmt(r.probes), fmt(r.failures), r.note ?? ""]);
for (const [attack, file] of NOT_YET) table.push([attack, "-", "-", `covered by ${file}, recorded no row in this run`]);
const widths = table[0]!.map((_, i) => Math.max(...table.map((r) => r[i]!.length)));
const line = (r: string[]) => `| ${r.map((c, i) => (i === 1 || i === 2 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join(" | ")} |`;
console.log(`\nHostile suite (${rows[0]?.scale ?? "no"} scale), one run:\n`);
console.log(line(table[0]!));
console.log(`|${widths.map((w, i) => (i === 1 || i === 2 ? `${"-".repeat(w + 1)}:` : "-".repeat(w + 2))).join("|")}|`);
for (const r of table.slice(1)) console.log(line(r));
const failed = rows.filter((r) => r.failures > 0);
if (rows.length === 0) {
  console.error("\nno row was recorded: the hostile tests did not run");
  process.exit(1);
}
if (failed.length) {
  console.error(`\n${failed.length} row(s) with failures`);
  process.exit(1);
}
