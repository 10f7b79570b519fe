import { CsvError, parse } from "csv-parse/sync";

/** One CSV record: its fields and the 1-based line it starts on. */
export interface CsvRecord {
  fields: string[];
  line: number;
}

/**
 * The records of a CSV text, or the first syntax error. `line` is 1-based and counts line
 * feeds; `column` is the 1-based number of the field (CSV column) the error is in, and the
 * line is the one that field starts on.
 */
export type CsvParse = { ok: true; records: CsvRecord[] } | { ok: false; line: number; column: number; message: string };

/**
 * Parses RFC 4180 CSV: comma-separated fields, CRLF or LF record ends, double-quoted fields
 * that may hold commas, line breaks and doubled quotes. A UTF-8 byte order mark is ignored,
 * a final line break does not start an empty record, a blank line is a record of one empty
 * field, and fields are returned untrimmed (callers trim). Stray quotes and bare carriage
 * returns are errors rather than guesses, because a governance document that is misread
 * grants the wrong authority.
 *
 * A record whose field count differs from the first record's is still returned, so that the
 * caller can refuse it by its row while reporting the other rows too; any other error stops
 * the parse.
 */
export function parseCsv(text: string): CsvParse {
  // csv-parse reports byte offsets into the UTF-8 text (a byte order mark included); lines
  // are counted here from those, since its own line count also counts carriage returns
  // inside quoted fields.
  const bytes = Buffer.from(text, "utf8");
  const lineAt = (offset: number): number => {
    let line = 1;
    for (let at = bytes.indexOf(0x0a); at !== -1 && at < offset; at = bytes.indexOf(0x0a, at + 1)) line++;
    return line;
  };
  const records: CsvRecord[] = [];
  // Byte offset where the next record starts: the end (delimiter included) of the previous one.
  let recordStart = 0;
  const take = (fields: string[], end: number): void => {
    records.push({ fields, line: lineAt(recordStart) });
    recordStart = end;
  };
  try {
    parse(text, {
      bom: true,
      delimiter: ",",
      quote: '"',
      escape: '"',
      record_delimiter: ["\r\n", "\n"],
      relax_quotes: false,
      relax_column_count: false,
      skip_empty_lines: false,
      trim: false,
      // Only a wrong field count reaches on_skip without being rethrown: see above.
      skip_records_with_error: true,
      on_skip: (err) => {
        if (err instanceof CsvError && err.code === "CSV_RECORD_INCONSISTENT_FIELDS_LENGTH") {
          take(err.record as string[], err.bytes as number);
          return undefined;
        }
        throw err;
      },
      cast: (value, context) => {
        if (!context.quoting && value.includes("\r")) throw new BareCarriageReturn(context.bytes, Number(context.column));
        return value;
      },
      on_record: (record: string[], context) => {
        take(record, context.bytes);
        return record;
      },
    });
  } catch (err) {
    if (err instanceof BareCarriageReturn) {
      // The field is unquoted, so it holds no line feed: its end is on the line it starts on.
      return { ok: false, line: lineAt(err.end), column: err.field + 1, message: "a carriage return must be followed by a line feed" };
    }
    if (!(err instanceof CsvError) || typeof err.bytes !== "number" || typeof err.column !== "number") throw err;
    // `bytes` is the last field or record boundary before the error: the delimiter just before
    // the offending field, or the start of its record.
    return { ok: false, line: lineAt(err.bytes), column: err.column + 1, message: MESSAGES[err.code] ?? err.message };
  }
  return { ok: true, records };
}

// What each syntax error csv-parse raises under these options means to the author.
const MESSAGES: Partial<Record<CsvError["code"], string>> = {
  CSV_QUOTE_NOT_CLOSED: "a quoted field is never closed",
  INVALID_OPENING_QUOTE: "a quote inside an unquoted field (quote the whole field and double the quote)",
  CSV_INVALID_CLOSING_QUOTE: "unexpected character after a closing quote",
};

class BareCarriageReturn extends Error {
  constructor(
    readonly end: number,
    readonly field: number,
  ) {
    super("a carriage return must be followed by a line feed");
  }
}
