import { LineCounter, isMap, isSeq, parseDocument, type Node } from "yaml";

/** A path into a parsed document: object keys and array indexes. */
export type Path = readonly (string | number)[];

/** A 1-based line and column in a source text. */
export interface Position {
  line: number;
  column: number;
}

/** A YAML (or JSON, which is YAML) text parsed with the means to point back into it. */
export type ParsedText =
  | { ok: true; value: unknown; locate: (path: Path) => Position | undefined }
  | { ok: false; errors: { line?: number; column?: number; message: string }[] };

/** Parses YAML or JSON text keeping node positions, so validation errors can name a line and column. */
export function parseText(text: string): ParsedText {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false });
  if (doc.errors.length > 0) {
    return {
      ok: false,
      errors: doc.errors.map((error) => {
        const { line, col } = lineCounter.linePos(error.pos[0]);
        return { line, column: col, message: error.message };
      }),
    };
  }
  const locate = (path: Path): Position | undefined => {
    // Walk as deep as the path exists: a missing key is reported where its parent is.
    let node: unknown = doc.contents;
    let found: Node | undefined = isNode(node) ? node : undefined;
    for (const segment of path) {
      const next = child(node, segment);
      if (next === undefined) break;
      node = next;
      if (isNode(next)) found = next;
    }
    const offset = found?.range?.[0];
    if (offset === undefined) return undefined;
    const { line, col } = lineCounter.linePos(offset);
    return { line, column: col };
  };
  return { ok: true, value: doc.toJS({ maxAliasCount: 100 }), locate };
}

/** Renders a path the way error messages and API `field`s name it: `rules[2].when.amount`. */
export function renderPath(path: Path): string {
  let out = "";
  for (const segment of path) {
    out += typeof segment === "number" ? `[${segment}]` : out === "" ? segment : `.${segment}`;
  }
  return out;
}

function child(node: unknown, segment: string | number): unknown {
  if (isSeq(node) && typeof segment === "number") return node.items[segment];
  if (isMap(node)) {
    for (const pair of node.items) {
      const key = isNode(pair.key) && "value" in pair.key ? pair.key.value : pair.key;
      if (key === segment) return pair.value ?? pair.key;
    }
  }
  return undefined;
}

function isNode(value: unknown): value is Node {
  return typeof value === "object" && value !== null && "range" in value;
}
