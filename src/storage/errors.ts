import { MandateError, type FieldError } from "../base/errors.js";

/**
 * The failures a storage implementation reports, whatever its backend. The first three mean
 * something only in terms of what was being written, so the domain translates them (a
 * collision on a nonce is a replay, on a public key a duplicate registration); one that
 * escapes untranslated is a bug and callers see `internal`. The last two mean the same to
 * every caller, so they are already the error callers see.
 */
export abstract class StorageError extends Error {}

/** A unique key is already taken; `key` names which one (the backend's name for the constraint). */
export class CollisionError extends StorageError {
  constructor(readonly key: string) {
    super(`collision on ${key}`);
    this.name = "CollisionError";
  }
}

/** A concurrent writer changed what this write depended on; nothing was written, and it may be tried again. */
export class ConflictError extends StorageError {
  constructor() {
    super("concurrent write conflict");
    this.name = "ConflictError";
  }
}

/** What a change was about does not exist (or belongs to another organization, which for that caller is the same). */
export class NotFoundError extends StorageError {
  constructor(readonly what: string) {
    super(`${what} not found`);
    this.name = "NotFoundError";
  }
}

/** The store cannot be reached; nothing is known to have been written. 503 `unavailable`. */
export class UnavailableError extends MandateError {
  /** `cause`: the driver's failure, for logs and the start-up message; never shown to a caller. */
  constructor(cause?: unknown) {
    super("unavailable", "The database is unavailable.");
    if (cause !== undefined) this.cause = cause;
  }
}

/**
 * A value holds text the store cannot keep (U+0000, bad encoding). Input is checked for this
 * where it arrives (base/text.ts); this is the backstop that keeps a path missed there a
 * client error rather than a 500. 422 `validation_failed`.
 */
export class UnstorableValueError extends MandateError {
  constructor() {
    const errors: FieldError[] = [{ field: "(body)", code: "invalid_character", message: "contains text that cannot be stored" }];
    super("validation_failed", "The request is invalid.", errors);
  }
}
