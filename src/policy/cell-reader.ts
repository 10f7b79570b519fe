import { ROLE_PREFIX } from "./graph-index.js";
import { ACTION_PATTERN } from "./rules.js";

const ROLE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
const CURRENCY = /^[A-Z]{3}$/;
const CSV_AMOUNT = /^\d+(\.\d+)?$/;
const CSV_COUNT = /^\d+$/;
const MAX_APPROVALS = 10;

type ReportCell = (field: string, code: string, message: string) => void;

/**
 * Reads and checks the fields of one row, whether CSV cells (strings) or typed YAML/JSON
 * values, reporting each problem against its field and returning null for a bad value. Used
 * for governance document rows and for the entries of a directly authored graph alike, so
 * both are held to the same rules.
 */
export class CellReader {
  constructor(
    private readonly cells: Record<string, unknown>,
    private readonly typed: boolean,
    private readonly report: ReportCell,
    columns: readonly string[],
  ) {
    for (const key of Object.keys(cells)) {
      if (!columns.includes(key)) report(key, "unknown_field", `unknown field "${key}" (allowed: ${columns.join(", ")})`);
    }
  }

  // A string field, trimmed; "" and absent/null mean empty.
  private text(field: string, required: boolean): string | null | undefined {
    const raw = this.cells[field];
    if (raw === undefined || raw === null || raw === "") {
      if (required) this.report(field, "missing_field", `${field} is required`);
      return null;
    }
    if (typeof raw !== "string") {
      this.report(field, "invalid_type", `${field} must be a string (found ${shown(raw)})`);
      return undefined;
    }
    const value = raw.trim();
    if (value === "" && required) this.report(field, "missing_field", `${field} is required`);
    return value === "" ? null : value;
  }

  name(field: string, required: boolean): string | null {
    const value = this.text(field, required);
    if (value == null) return null;
    if (!ROLE_NAME.test(value)) return this.invalid(field, value, `a role name must match ${ROLE_NAME.source}`);
    return value;
  }

  ref(field: string, required: boolean): string | null {
    const value = this.text(field, required);
    if (value == null) return null;
    if (value.startsWith(ROLE_PREFIX)) return this.invalid(field, value, `${field} must be a principal's external_ref, not a role`);
    return value;
  }

  holder(field: string): string | null {
    const value = this.text(field, true);
    if (value == null) return null;
    if (value.startsWith(ROLE_PREFIX) && !ROLE_NAME.test(value.slice(ROLE_PREFIX.length))) {
      return this.invalid(field, value, `a role holder must be role:<name> with a name matching ${ROLE_NAME.source}`);
    }
    return value;
  }

  action(field: string): string | null {
    const value = this.text(field, true);
    if (value == null) return null;
    return ACTION_PATTERN.test(value) ? value : this.invalid(field, value, `an action must match ${ACTION_PATTERN.source}`);
  }

  currency(field: string): string | null {
    const value = this.text(field, true);
    if (value == null) return null;
    return CURRENCY.test(value) ? value : this.invalid(field, value, "a currency must be a three-letter ISO 4217 code in capitals");
  }

  amount(field: string): number | null {
    const value = this.number(field, CSV_AMOUNT);
    if (value === null) return null;
    if (value < 0) {
      this.report(field, "negative_amount", `${field} must not be negative (found ${shown(this.cells[field])})`);
      return null;
    }
    return value;
  }

  count(field: string): number | null {
    const value = this.number(field, CSV_COUNT);
    if (value === null) return null;
    if (!Number.isInteger(value) || value < 0 || value > MAX_APPROVALS) {
      return this.invalid(field, this.cells[field], `${field} must be a whole number from 0 to ${MAX_APPROVALS}`);
    }
    return value;
  }

  // An optional ISO date (YYYY-MM-DD); undefined when present but invalid.
  date(field: string): string | null | undefined {
    const value = this.text(field, false);
    if (value == null) return value;
    // A real calendar day: Date rolls 2026-02-30 over to March, so compare the round trip.
    const time = /^\d{4}-\d{2}-\d{2}$/.test(value) ? Date.parse(`${value}T00:00:00Z`) : NaN;
    const valid = !Number.isNaN(time) && new Date(time).toISOString().startsWith(value);
    if (valid) return value;
    this.report(field, "invalid_date", `${field} must be an ISO date, YYYY-MM-DD (found ${shown(value)})`);
    return undefined;
  }

  private number(field: string, csvPattern: RegExp): number | null {
    const raw = this.cells[field];
    if (raw === undefined || raw === null || raw === "") {
      this.report(field, "missing_field", `${field} is required`);
      return null;
    }
    if (this.typed) {
      if (typeof raw === "number" && Number.isFinite(raw)) return raw;
      return this.invalid(field, raw, `${field} must be a number`);
    }
    const text = String(raw).trim();
    if (/^-\d/.test(text)) {
      this.report(field, "negative_amount", `${field} must not be negative (found ${shown(text)})`);
      return null;
    }
    return csvPattern.test(text) ? Number(text) : this.invalid(field, text, `${field} must be a plain decimal number such as 1500 or 1500.50`);
  }

  // The message ends with the value as found, so an author sees what to fix without the file open.
  private invalid(field: string, value: unknown, rule: string): null {
    this.report(field, "invalid_value", `${rule} (found ${shown(value)})`);
    return null;
  }
}

/** A value as an error message quotes it: JSON, cut to a readable length. */
export function shown(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

/** Whether a parsed YAML/JSON value is a plain object (not null, not a list). */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
