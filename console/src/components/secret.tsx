import { useId, useState } from "react";

/** A secret shown once, read-only, with a button that copies it (the page says it is shown once). */
export function OneTimeSecret({ label, value }: { label: string; value: string }) {
  const id = useId();
  const [copied, setCopied] = useState<"" | "copied" | "failed">("");
  const copy = () =>
    navigator.clipboard.writeText(value).then(
      () => setCopied("copied"),
      () => setCopied("failed"),
    );
  return (
    <div className="secret">
      <label htmlFor={id}>{label}</label>
      <div className="secret-row">
        <input id={id} type="text" readOnly value={value} spellCheck={false} autoComplete="off" onFocus={(e) => e.currentTarget.select()} />
        <button type="button" onClick={copy}>
          Copy
        </button>
      </div>
      <p className="muted small" role="status" aria-live="polite">
        {copied === "copied" ? "Copied to the clipboard." : copied === "failed" ? "Copying failed: select the key and copy it yourself." : "Shown once: it cannot be read again. Store it now."}
      </p>
    </div>
  );
}
