import { CollisionError, ConflictError, UnavailableError, UnstorableValueError } from "../errors.js";

/** SQLSTATEs after which the whole transaction may be tried again: serialization failure, deadlock. */
const RETRYABLE = new Set(["40001", "40P01"]);

/** Node socket errors that mean the server cannot be reached. */
const UNREACHABLE = new Set(["ECONNREFUSED", "ECONNRESET", "ENOTFOUND", "ETIMEDOUT", "EPIPE", "EHOSTUNREACH", "EAI_AGAIN"]);

/**
 * The storage error a pg error stands for, or the error itself when it has no storage
 * meaning (a bug: callers see `internal`). The one place SQLSTATEs are read.
 */
export function fromPg(err: unknown): unknown {
  const e = err as { code?: string; constraint?: string; message?: string } | null;
  const code = e?.code;
  if (code === "23505") return new CollisionError(e!.constraint ?? "unique");
  if (code !== undefined && RETRYABLE.has(code)) return new ConflictError();
  // 22P05: untranslatable character (U+0000 in jsonb); 22021: invalid byte sequence for the encoding.
  if (code === "22P05" || code === "22021") return new UnstorableValueError();
  // Class 08: connection exceptions; 57P01..57P03: the server is shutting down or starting.
  if (code !== undefined && (code.startsWith("08") || /^57P0[123]$/.test(code) || UNREACHABLE.has(code))) return new UnavailableError();
  if (code === undefined && /^Connection terminated|^Client has encountered a connection error/.test(e?.message ?? "")) return new UnavailableError();
  return err;
}

/** Rethrows `err` as the storage error it stands for. */
export function rethrowFromPg(err: unknown): never {
  throw fromPg(err);
}
