import { CellReader, isRecord, shown } from "./cell-reader.js";
import { parseCsv } from "./csv.js";
import type { GovernanceDocument, GovernanceError, GovernanceKind, ParsedGovernanceDocument, TextPosition } from "./graph-types.js";
import { parseText, type Path } from "./source.js";

/** The CSV header of each kind, which is also the set of keys a YAML/JSON row may have. */
export const GOVERNANCE_COLUMNS: Record<GovernanceKind, readonly string[]> = {
  signing_schedule: ["principal", "role", "reports_to"],
  delegation_of_authority: ["holder", "delegate", "action", "currency", "max_amount", "valid_until"],
  approval_matrix: ["action", "currency", "up_to_amount", "approvals_required"],
};

/**
 * Parses one governance document (CSV with the exact header of its kind, or YAML/JSON: a
 * top-level list of row objects keyed by the same column names) and validates each field.
 * Used at upload, so a document that does not parse is never stored; every error names the
 * file line (the CSV header is line 1), the column where known, and echoes the bad value.
 */
export function parseGovernanceDocument(doc: GovernanceDocument): ParsedGovernanceDocument {
  const errors: GovernanceError[] = [];
  const fail: Fail = (at, field, code, message) =>
    void errors.push({ document_id: doc.document_id, line: at?.line ?? null, ...(at?.column ? { column: at.column } : {}), field, code, message });
  const columns = GOVERNANCE_COLUMNS[doc.kind];
  if (!columns) {
    fail(undefined, null, "invalid_kind", `unknown document kind ${shown(doc.kind)}`);
    return { ok: false, errors };
  }
  const records = readRecords(doc, columns, fail);
  const rows: { line: number }[] = [];
  const located = new Map<object, SourceRow>();
  for (const record of records) {
    const cell = new CellReader(record.cells, record.typed, (field, code, message) => fail(record.at(field), field, code, message), columns);
    const row = readRow(doc.kind, record.line, cell);
    rows.push(row);
    located.set(row, record);
  }
  if (errors.length > 0) return { ok: false, errors: byLine(errors, [doc.document_id]) };
  const at = (row: object, field: string): TextPosition | undefined => located.get(row)?.at(field);
  return { ok: true, kind: doc.kind, rows, at } as unknown as ParsedGovernanceDocument;
}

type Fail = (at: Partial<TextPosition> | undefined, field: string | null, code: string, message: string) => void;

/** A row as cells, with its file line and where each of its fields is in the text. */
interface SourceRow {
  line: number;
  cells: { [column: string]: unknown };
  typed: boolean;
  at: (field: string) => TextPosition | undefined;
}

function readRecords(doc: GovernanceDocument, columns: readonly string[], fail: Fail): SourceRow[] {
  if (doc.format === "csv") return readCsv(doc.content, columns, fail);
  let value: unknown;
  let locate: (path: Path) => TextPosition | undefined = () => undefined;
  if (doc.format === "json") {
    try {
      value = JSON.parse(doc.content);
    } catch (error) {
      // V8 names the offset of the first bad character; the end of the text when it ran out.
      const offset = /at position (\d+)/.exec((error as Error).message)?.[1];
      fail(positionOf(doc.content, offset === undefined ? doc.content.length : Number(offset)), null, "invalid_json", (error as Error).message);
      return [];
    }
    // JSON is YAML, so the YAML parser supplies the positions of a document JSON.parse accepted.
    const positions = parseText(doc.content);
    if (positions.ok) locate = positions.locate;
  } else if (doc.format === "yaml") {
    const parsed = parseText(doc.content);
    if (!parsed.ok) {
      for (const e of parsed.errors) fail(e, null, "invalid_yaml", e.message);
      return [];
    }
    value = parsed.value;
    locate = parsed.locate;
  } else {
    fail(undefined, null, "invalid_format", `unknown format ${shown(doc.format)} (use csv, yaml or json)`);
    return [];
  }
  if (!Array.isArray(value)) {
    fail(locate([]) ?? { line: 1, column: 1 }, null, "invalid_document", `the document must be a list of rows (found ${describe(value)})`);
    return [];
  }
  return value.flatMap((cells: unknown, index): SourceRow[] => {
    const start = locate([index]) ?? { line: 1, column: 1 };
    if (isRecord(cells)) return [{ line: start.line, cells, typed: true, at: (field) => locate([index, field]) ?? start }];
    fail(start, null, "invalid_row", `each row must be an object (found ${shown(cells)})`);
    return [];
  });
}

function readCsv(content: string, columns: readonly string[], fail: Fail): SourceRow[] {
  const parsed = parseCsv(content);
  if (!parsed.ok) {
    fail(parsed, null, "invalid_csv", parsed.message);
    return [];
  }
  const [header, ...data] = parsed.records;
  const names = header?.fields.map((f) => f.trim()) ?? [];
  if (names.join(",") !== columns.join(",")) {
    const differs = columns.findIndex((c, k) => names[k] !== c);
    const column = (differs === -1 ? columns.length : differs) + 1;
    fail({ line: header?.line ?? 1, column }, null, "invalid_header", `the header must be exactly "${columns.join(",")}" (found ${shown(names.join(","))})`);
    return [];
  }
  return data.flatMap((record): SourceRow[] => {
    if (record.fields.every((f) => f.trim() === "")) return [];
    if (record.fields.length !== columns.length) {
      // The column is the first field missing, or the first one too many.
      const column = Math.min(record.fields.length, columns.length) + 1;
      fail({ line: record.line, column }, null, "invalid_row", `expected ${columns.length} fields, found ${record.fields.length} (${shown(record.fields.join(","))})`);
      return [];
    }
    return [
      {
        line: record.line,
        cells: Object.fromEntries(columns.map((c, k) => [c, record.fields[k]])),
        typed: false,
        at: (field) => ({ line: record.line, column: columns.indexOf(field) + 1 }),
      },
    ];
  });
}

// A row's fields, null where invalid (the document is then refused, so no null reaches a graph).
function readRow(kind: GovernanceKind, line: number, cell: CellReader): { line: number; [field: string]: unknown } {
  switch (kind) {
    case "signing_schedule":
      return { line, principal: cell.ref("principal", false), role: cell.name("role", true), reports_to: cell.name("reports_to", false) };
    case "delegation_of_authority":
      return {
        line,
        holder: cell.holder("holder"),
        delegate: cell.ref("delegate", false),
        action: cell.action("action"),
        currency: cell.currency("currency"),
        max_amount: cell.amount("max_amount"),
        valid_until: cell.date("valid_until") ?? null,
      };
    case "approval_matrix":
      return {
        line,
        action: cell.action("action"),
        currency: cell.currency("currency"),
        up_to_amount: cell.amount("up_to_amount"),
        approvals_required: cell.count("approvals_required"),
      };
  }
}

// A 1-based line and column of a character offset into a text.
function positionOf(text: string, offset: number): TextPosition {
  const before = text.slice(0, offset);
  const lineStart = before.lastIndexOf("\n") + 1;
  return { line: before.split("\n").length, column: offset - lineStart + 1 };
}

function describe(value: unknown): string {
  if (value === null || value === undefined) return "nothing";
  return isRecord(value) ? "an object" : shown(value);
}

/**
 * Orders errors as a reader scans the documents: by document, then line (problems of the
 * document as a whole first); the sort is stable, so a line's errors keep their column order.
 */
export function byLine(errors: GovernanceError[], documentIds: readonly string[]): GovernanceError[] {
  const position = (e: GovernanceError): [number, number] => [documentIds.indexOf(e.document_id), e.line ?? -1];
  return [...errors].sort((a, b) => {
    const [da, la] = position(a);
    const [db, lb] = position(b);
    return da - db || la - lb;
  });
}
