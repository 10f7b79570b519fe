import { useEffect, useRef } from "react";

/**
 * What an action did, announced, and focused when it changes: the button that did it is gone
 * with the state it belonged to, and the focus must not fall back to the page's top.
 */
export function FocusedStatus({ text, testId }: { text: string; testId: string }) {
  const ref = useRef<HTMLParagraphElement>(null);
  useEffect(() => {
    if (text) ref.current?.focus();
  }, [text]);
  if (!text) return null;
  return (
    <p role="status" className="ok" data-testid={testId} tabIndex={-1} ref={ref}>
      {text}
    </p>
  );
}
