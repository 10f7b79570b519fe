/** One CSV record: its fields and the 1-based line it starts on. */
export interface CsvRecord {
  fields: string[];
  line: number;
}

/** The records of a CSV text, or the first syntax error with its line. */
export type CsvParse = { ok: true; records: CsvRecord[] } | { ok: false; line: number; message: string };

/**
 * Parses RFC 4180 CSV: comma-separated fields, CRLF or LF record ends, double-quoted fields
 * that may hold commas, line breaks and doubled quotes. A UTF-8 byte order mark is ignored,
 * and a final line break does not start an empty record. Stray quotes are errors rather
 * than guesses, because a governance document that is misread grants the wrong authority.
 */
export function parseCsv(text: string): CsvParse {
  const records: CsvRecord[] = [];
  const src = text.startsWith("\uFEFF") ? text.slice(1) : text;
  if (src.length === 0) return { ok: true, records: [] };
  let line = 1;
  let fields: string[] = [];
  let recordLine = 1;
  let i = 0;
  const endRecord = (): void => {
    records.push({ fields, line: recordLine });
    fields = [];
  };
  while (i <= src.length) {
    // At the start of a field.
    if (src[i] === '"') {
      const startLine = line;
      let value = "";
      i++;
      for (;;) {
        if (i >= src.length) return { ok: false, line: startLine, message: "a quoted field is never closed" };
        const ch = src[i] as string;
        if (ch === '"') {
          if (src[i + 1] === '"') {
            value += '"';
            i += 2;
            continue;
          }
          i++;
          break;
        }
        if (ch === "\n") line++;
        value += ch;
        i++;
      }
      fields.push(value);
      if (i < src.length && src[i] !== "," && src[i] !== "\n" && !(src[i] === "\r" && src[i + 1] === "\n")) {
        return { ok: false, line, message: "unexpected character after a closing quote" };
      }
    } else {
      let end = i;
      while (end < src.length && src[end] !== "," && src[end] !== "\n" && src[end] !== "\r") end++;
      if (src[end] === "\r" && src[end + 1] !== "\n") return { ok: false, line, message: "a carriage return must be followed by a line feed" };
      const value = src.slice(i, end);
      if (value.includes('"')) return { ok: false, line, message: "a quote inside an unquoted field (quote the whole field and double the quote)" };
      fields.push(value);
      i = end;
    }
    // After a field: a comma, a record end, or the end of the text.
    if (i >= src.length) {
      // A final line break leaves one empty field behind: that is not a record.
      if (!(fields.length === 1 && fields[0] === "" && src.endsWith("\n"))) endRecord();
      break;
    }
    if (src[i] === ",") {
      i++;
      continue;
    }
    i += src[i] === "\r" ? 2 : 1;
    line++;
    endRecord();
    recordLine = line;
  }
  return { ok: true, records };
}
