import { CellReader, isRecord } from "./cell-reader.js";
import { parseCsv } from "./csv.js";
import type { GovernanceDocument, GovernanceError, GovernanceKind, ParsedGovernanceDocument } from "./graph-types.js";
import { parseText } from "./source.js";

/** The CSV header of each kind, which is also the set of keys a YAML/JSON row may have. */
export const GOVERNANCE_COLUMNS: Record<GovernanceKind, readonly string[]> = {
  signing_schedule: ["principal", "role", "reports_to"],
  delegation_of_authority: ["holder", "delegate", "action", "currency", "max_amount", "valid_until"],
  approval_matrix: ["action", "currency", "up_to_amount", "approvals_required"],
};

/**
 * Parses one governance document (CSV with the exact header of its kind, or YAML/JSON: a
 * top-level list of row objects keyed by the same column names) and validates each field.
 * Used at upload, so a bad document is refused with its row errors before any generation.
 */
export function parseGovernanceDocument(doc: GovernanceDocument): ParsedGovernanceDocument {
  const errors: GovernanceError[] = [];
  const fail: Fail = (row, field, code, message, at) =>
    void errors.push({ document_id: doc.document_id, row, field, code, message, ...at });
  const columns = GOVERNANCE_COLUMNS[doc.kind];
  if (!columns) {
    fail(null, null, "invalid_kind", `unknown document kind "${String(doc.kind)}"`);
    return { ok: false, errors };
  }
  const records = readRecords(doc, columns, fail);
  const rows: unknown[] = [];
  for (const { row, cells, typed } of records) {
    const cell = new CellReader(cells, typed, (field, code, message) => fail(row, field, code, message), columns);
    rows.push(readRow(doc.kind, row, cell));
  }
  if (errors.length > 0) return { ok: false, errors: byRow(errors, [doc.document_id]) };
  return { ok: true, kind: doc.kind, rows } as ParsedGovernanceDocument;
}

type Fail = (row: number | null, field: string | null, code: string, message: string, at?: { line: number; column: number }) => void;

// The rows of a document as cell maps, each with the row number errors should cite.
function readRecords(
  doc: GovernanceDocument,
  columns: readonly string[],
  fail: Fail,
): { row: number; cells: Record<string, unknown>; typed: boolean }[] {
  if (doc.format === "csv") {
    const parsed = parseCsv(doc.content);
    if (!parsed.ok) {
      const { line, column } = parsed;
      fail(null, null, "invalid_csv", `line ${line}, column ${column}: ${parsed.message}`, { line, column });
      return [];
    }
    const [header, ...data] = parsed.records;
    const names = header?.fields.map((f) => f.trim()) ?? [];
    if (names.join(",") !== columns.join(",")) {
      fail(null, null, "invalid_header", `the header must be exactly "${columns.join(",")}" (found "${names.join(",")}")`);
      return [];
    }
    return data.flatMap((record, i) => {
      const row = i + 1;
      if (record.fields.every((f) => f.trim() === "")) return [];
      if (record.fields.length !== columns.length) {
        // The column is the first field missing, or the first one too many.
        const at = { line: record.line, column: Math.min(record.fields.length, columns.length) + 1 };
        fail(row, null, "invalid_row", `expected ${columns.length} fields, found ${record.fields.length} (line ${record.line})`, at);
        return [];
      }
      return [{ row, cells: Object.fromEntries(columns.map((c, k) => [c, record.fields[k]])), typed: false }];
    });
  }
  let value: unknown;
  if (doc.format === "json") {
    try {
      value = JSON.parse(doc.content);
    } catch (error) {
      fail(null, null, "invalid_json", (error as Error).message);
      return [];
    }
  } else if (doc.format === "yaml") {
    const parsed = parseText(doc.content);
    if (!parsed.ok) {
      for (const e of parsed.errors) fail(null, null, "invalid_yaml", e.line === undefined ? e.message : `line ${e.line}: ${e.message}`);
      return [];
    }
    value = parsed.value;
  } else {
    fail(null, null, "invalid_format", `unknown format "${String(doc.format)}" (use csv, yaml or json)`);
    return [];
  }
  if (!Array.isArray(value)) {
    fail(null, null, "invalid_document", "the document must be a list of rows");
    return [];
  }
  return value.flatMap((cells, row) => {
    if (isRecord(cells)) return [{ row, cells, typed: true }];
    fail(row, null, "invalid_row", "each row must be an object");
    return [];
  });
}

function readRow(kind: GovernanceKind, row: number, cell: CellReader): unknown {
  switch (kind) {
    case "signing_schedule":
      return { row, principal: cell.ref("principal", false), role: cell.name("role", true), reports_to: cell.name("reports_to", false) };
    case "delegation_of_authority":
      return {
        row,
        holder: cell.holder("holder"),
        delegate: cell.ref("delegate", false),
        action: cell.action("action"),
        currency: cell.currency("currency"),
        max_amount: cell.amount("max_amount"),
        valid_until: cell.date("valid_until") ?? null,
      };
    case "approval_matrix":
      return {
        row,
        action: cell.action("action"),
        currency: cell.currency("currency"),
        up_to_amount: cell.amount("up_to_amount"),
        approvals_required: cell.count("approvals_required"),
      };
  }
}

/**
 * Orders errors as a reader scans the documents: by document, then row (document-level
 * problems first); the sort is stable, so a row's errors keep their column order.
 */
export function byRow(errors: GovernanceError[], documentIds: string[]): GovernanceError[] {
  const position = (e: GovernanceError): [number, number] => [documentIds.indexOf(e.document_id), e.row ?? -1];
  return [...errors].sort((a, b) => {
    const [da, ra] = position(a);
    const [db, rb] = position(b);
    return da - db || ra - rb;
  });
}
