import type { ReactNode } from "react";

/**
 * A table with its column headers, in a wrapper that scrolls sideways on a narrow screen and
 * takes focus, so a keyboard can scroll it too (named "<label> (scrollable)" for screen readers).
 * `children` is the table's body; a falsy column is left out (a column only some users see).
 */
export function ScrollTable({
  label,
  testId,
  className,
  wrapClassName,
  caption,
  columns,
  children,
}: {
  label: string;
  testId?: string;
  className?: string;
  wrapClassName?: string;
  caption?: ReactNode;
  columns: readonly ReactNode[];
  children: ReactNode;
}) {
  return (
    <div className={wrapClassName ? `table-wrap ${wrapClassName}` : "table-wrap"} tabIndex={0} role="group" aria-label={`${label} (scrollable)`}>
      <table data-testid={testId} className={className}>
        {caption !== undefined && <caption>{caption}</caption>}
        <thead>
          <tr>
            {columns.filter(Boolean).map((c, i) => (
              <th key={i} scope="col">
                {c}
              </th>
            ))}
          </tr>
        </thead>
        {children}
      </table>
    </div>
  );
}
