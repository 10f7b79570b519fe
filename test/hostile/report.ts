import { appendFileSync } from "node:fs";

/*
 * The hostile suite's figures. Each test records one row: what was tried, how
 * many probes, how many failures (a failure = the defended property broke).
 * `npm run test:hostile` sets HOSTILE_SCALE=full and HOSTILE_REPORT=<file>;
 * each row is appended there as a JSON line and test/hostile/print-table.ts prints
 * the table after vitest. Under `npm test` (short scale, no HOSTILE_REPORT) the
 * row is only logged.
 */

/** Full scale under `npm run test:hostile`; the short scale (the default) under `npm test`. */
export const FULL = process.env.HOSTILE_SCALE === "full";

/** `short` at the short scale, `full` at full scale. */
export const scaled = (short: number, full: number): number => (FULL ? full : short);

/** One row of the table. */
export interface HostileRow {
  /** Position in the table (rows print in this order). */
  order: number;
  attack: string;
  probes: number;
  failures: number;
  /** Extra figures or a remark. */
  note?: string;
}

/** Records a row (and logs it). Call before asserting, so a failing row is still printed. */
export function recordRow(row: HostileRow): void {
  console.log(`[hostile] ${row.attack}: ${row.probes} probes, ${row.failures} failures${row.note ? ` (${row.note})` : ""}`);
  const file = process.env.HOSTILE_REPORT;
  if (file) appendFileSync(file, `${JSON.stringify({ ...row, scale: FULL ? "full" : "short" })}\n`);
}
