import { useId, useRef, type ReactNode } from "react";

/**
 * A danger button that asks first: a modal <dialog> (focus kept inside, Escape cancels) says what
 * cannot be undone, and only its confirm button runs `onConfirm`. Styled by agents.css
 * (dialog.confirm), which the pages using it import.
 */
export function ConfirmButton({
  label,
  title,
  description,
  confirmLabel,
  onConfirm,
  disabled = false,
  className = "danger",
  ariaLabel,
  children,
}: {
  /** The button's content (its accessible name should say what it acts on). */
  label: ReactNode;
  title: string;
  description: string;
  confirmLabel: string;
  onConfirm: () => void;
  disabled?: boolean;
  className?: string;
  /** The button's accessible name, when its content alone does not say what it acts on. */
  ariaLabel?: string;
  /** More to say below the description (what will be recorded, …). */
  children?: ReactNode;
}) {
  const id = useId();
  const dialog = useRef<HTMLDialogElement>(null);
  return (
    <>
      <button type="button" className={className} aria-label={ariaLabel} disabled={disabled} onClick={() => dialog.current?.showModal()}>
        {label}
      </button>
      <dialog ref={dialog} className="confirm" aria-labelledby={`${id}-h`} aria-describedby={`${id}-d`}>
        <h2 id={`${id}-h`} className="h3">
          {title}
        </h2>
        <p id={`${id}-d`}>{description}</p>
        {children}
        <div className="actions">
          <button type="button" className="secondary" onClick={() => dialog.current?.close()}>
            Cancel
          </button>
          <button
            type="button"
            className="danger-solid"
            onClick={() => {
              dialog.current?.close();
              onConfirm();
            }}
          >
            {confirmLabel}
          </button>
        </div>
      </dialog>
    </>
  );
}
