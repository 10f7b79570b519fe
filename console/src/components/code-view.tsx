import type { Element, Root, RootContent } from "hast";
import { refractor } from "refractor/core";
import csv from "refractor/csv";
import json from "refractor/json";
import rego from "refractor/rego";
import yaml from "refractor/yaml";
import { Fragment, useMemo, type ReactNode } from "react";

refractor.register(rego);
refractor.register(yaml);
refractor.register(json);
refractor.register(csv);

/** The languages the console shows: generated Rego, rules documents, governance documents. */
export type CodeLanguage = "rego" | "yaml" | "json" | "csv";

/** A note shown under one line of the code (an error the API located there). */
export interface LineNote {
  line: number;
  column?: number;
  message: string;
}

/** A run of text and the token classes Prism gave it. */
interface Segment {
  text: string;
  classes: string;
}

/** Flattens refractor's tree into runs of text with their classes, then cuts them into lines. */
function toLines(tree: Root): Segment[][] {
  const lines: Segment[][] = [[]];
  const walk = (node: RootContent, classes: string) => {
    if (node.type === "text") {
      const parts = node.value.split("\n");
      parts.forEach((part, i) => {
        if (i > 0) lines.push([]);
        if (part) lines[lines.length - 1]!.push({ text: part, classes });
      });
    } else if (node.type === "element") {
      const own = ((node as Element).properties.className as string[] | undefined) ?? [];
      const joined = [classes, ...own].filter(Boolean).join(" ");
      for (const child of node.children) walk(child, joined);
    }
  };
  for (const child of tree.children) walk(child, "");
  // A text ending with a newline has no empty last line to show.
  if (lines.length > 1 && lines[lines.length - 1]!.length === 0) lines.pop();
  return lines;
}

/**
 * Source with syntax highlighting (refractor: Prism's grammars as a tree, rendered as React
 * elements with classes, so no HTML string and no inline style meets the console's CSP), line
 * numbers, and the API's located errors shown under the line they name.
 */
export function CodeView({ code, language, label, notes = [], testId }: { code: string; language: CodeLanguage; label: string; notes?: LineNote[]; testId?: string }) {
  const lines = useMemo(() => toLines(refractor.highlight(code, language)), [code, language]);
  const byLine = new Map<number, LineNote[]>();
  for (const n of notes) byLine.set(n.line, [...(byLine.get(n.line) ?? []), n]);
  // A note past the last line (an error "at the end of the text") still shows, after it.
  const last = Math.max(lines.length, ...notes.map((n) => n.line));
  const rows: ReactNode[] = [];
  for (let i = 1; i <= last; i++) {
    const here = byLine.get(i);
    rows.push(
      <Fragment key={i}>
        <span className={here ? "code-line code-line-error" : "code-line"} data-line={i}>
          <span className="code-ln" aria-hidden="true">
            {i}
          </span>
          <span className="code-text">
            {(lines[i - 1] ?? []).map((s, j) =>
              s.classes ? (
                <span key={j} className={s.classes}>
                  {s.text}
                </span>
              ) : (
                <Fragment key={j}>{s.text}</Fragment>
              ),
            )}
          </span>
        </span>
        {here?.map((n, k) => (
          <span key={`n${k}`} className="code-note" data-testid="line-note" data-line={n.line}>
            {"Line "}
            {n.line}
            {n.column ? `, column ${n.column}` : ""}: {n.message}
          </span>
        ))}
      </Fragment>,
    );
  }
  return (
    <pre className={`code language-${language}`} tabIndex={0} aria-label={label} data-testid={testId}>
      <code>{rows}</code>
    </pre>
  );
}
