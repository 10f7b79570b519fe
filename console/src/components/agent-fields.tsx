import { useId } from "react";
import type { FieldError } from "../../../src/gen/mandate/v1/errors_pb.js";

/*
 * The fields of the agent forms (register, rotate the key, relabel), each with the API's field
 * error under it. The public key an agent is registered with, as the API takes it: `ed25519:base64:<standard
 * base64 of 32 bytes>` (agents.proto). A PEM public key (`openssl pkey -pubout` of an Ed25519
 * key) is accepted too and turned into that form here; anything else goes to the API as typed,
 * which refuses it with a field error on `public_key`, shown under the field.
 */

/** DER prefix of an Ed25519 SubjectPublicKeyInfo (RFC 8410); the 32-byte key follows. */
const SPKI_PREFIX = [0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00];

/** `text` in the API's form when it is an Ed25519 PEM public key; otherwise `text` trimmed. */
export function wirePublicKey(text: string): string {
  const trimmed = text.trim();
  const m = /^-----BEGIN PUBLIC KEY-----([\s\S]+?)-----END PUBLIC KEY-----$/.exec(trimmed);
  if (!m) return trimmed;
  let der: Uint8Array;
  try {
    der = Uint8Array.from(atob(m[1]!.replace(/\s+/g, "")), (c) => c.charCodeAt(0));
  } catch {
    return trimmed;
  }
  if (der.length !== SPKI_PREFIX.length + 32 || !SPKI_PREFIX.every((b, i) => der[i] === b)) return trimmed;
  return `ed25519:base64:${btoa(String.fromCharCode(...der.subarray(SPKI_PREFIX.length)))}`;
}

/** The field error the API gave for `field`, if any. */
export function fieldError(fields: FieldError[] | undefined, field: string): FieldError | undefined {
  return fields?.find((f) => f.field === field);
}

/** A labelled text field whose help line turns into the API's error for it. */
export function Field({
  label,
  value,
  onChange,
  error,
  help,
  multiline = false,
  required = false,
  className,
}: {
  label: string;
  value: string;
  onChange: (value: string) => void;
  error: FieldError | undefined;
  help?: string;
  multiline?: boolean;
  required?: boolean;
  className?: string;
}) {
  const id = useId();
  const props = {
    id,
    value,
    className,
    required,
    "aria-required": required || undefined,
    "aria-invalid": !!error,
    "aria-describedby": error || help ? `${id}-help` : undefined,
    autoComplete: "off",
    spellCheck: false,
  };
  return (
    <>
      <label htmlFor={id}>{label}</label>
      {multiline ? <textarea rows={3} {...props} onChange={(e) => onChange(e.target.value)} /> : <input {...props} onChange={(e) => onChange(e.target.value)} />}
      {(error || help) && (
        <p id={`${id}-help`} className={error ? "field-error" : "muted small help"} data-testid={error ? "field-error" : undefined}>
          {error ? `${label} ${error.message}.` : help}
        </p>
      )}
    </>
  );
}

/** The public key field, with the forms it accepts. */
export function PublicKeyField(props: { label: string; value: string; onChange: (value: string) => void; error: FieldError | undefined }) {
  return (
    <Field
      {...props}
      multiline
      required
      className="public-key"
      help="ed25519:base64:<standard base64 of the 32-byte key> (what the Mandate clients print), or an Ed25519 PEM public key (-----BEGIN PUBLIC KEY-----). Only the public key: the private key never leaves the agent."
    />
  );
}

/** The three responsibility labels, side by side, each with its field error. */
export function LabelFields({
  values,
  onChange,
  fields,
}: {
  values: { owner: string; businessUnit: string; environment: string };
  onChange: (values: { owner: string; businessUnit: string; environment: string }) => void;
  fields: FieldError[] | undefined;
}) {
  return (
    <div className="form-grid">
      <div>
        <Field label="Owner" value={values.owner} onChange={(owner) => onChange({ ...values, owner })} error={fieldError(fields, "owner")} />
      </div>
      <div>
        <Field label="Business unit" value={values.businessUnit} onChange={(businessUnit) => onChange({ ...values, businessUnit })} error={fieldError(fields, "business_unit")} />
      </div>
      <div>
        <Field label="Environment" value={values.environment} onChange={(environment) => onChange({ ...values, environment })} error={fieldError(fields, "environment")} />
      </div>
    </div>
  );
}
