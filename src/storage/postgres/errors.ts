import { CollisionError, ConflictError, NotFoundError, UnavailableError, UnstorableValueError } from "../errors.js";

/** SQLSTATEs after which the whole transaction may be tried again: serialization failure, deadlock. */
const RETRYABLE = new Set(["40001", "40P01"]);

/**
 * Node socket errors that mean the server cannot be reached (ENOENT: a Unix socket that is not
 * there, as when a local Postgres is stopped).
 */
const UNREACHABLE = new Set(["ECONNREFUSED", "ECONNRESET", "ECONNABORTED", "ENOENT", "ENOTFOUND", "ETIMEDOUT", "EPIPE", "EHOSTUNREACH", "ENETUNREACH", "EAI_AGAIN"]);

/**
 * What pg and pg-pool throw, without a code, when a connection breaks or a bounded wait runs out
 * (database.ts bounds connecting, waiting for a pooled connection and each statement): pg's
 * "Connection terminated unexpectedly" and "Client has encountered a connection error and is not
 * queryable", its connect timeout "timeout expired" and read timeout "Query read timeout",
 * pg-pool's "Connection terminated due to connection timeout" (a new connection) and "timeout
 * exceeded when trying to connect" (waiting for a pooled one), and a pool already ended
 * (shutting down).
 */
const UNREACHABLE_MESSAGE = /^Connection terminated|^Client has encountered a connection error|not queryable$|^timeout expired$|^Query read timeout$|^timeout exceeded when trying to connect$|^Cannot use a pool after calling end on the pool$/;

/**
 * The storage error a pg error stands for, or the error itself when it has no storage
 * meaning (a bug: callers see `internal`). The one place SQLSTATEs are read.
 */
export function fromPg(err: unknown): unknown {
  const e = err as { code?: string; constraint?: string; message?: string } | null;
  const code = e?.code;
  if (code === "23505") return new CollisionError(e!.constraint ?? "unique");
  // A foreign key names a row that does not exist (an unknown organization, say).
  if (code === "23503") return new NotFoundError(e!.constraint ?? "referenced row");
  if (code !== undefined && RETRYABLE.has(code)) return new ConflictError();
  // 22P05: untranslatable character (U+0000 in jsonb); 22021: invalid byte sequence for the encoding.
  if (code === "22P05" || code === "22021") return new UnstorableValueError();
  // Class 08: connection exceptions; 57P01..57P03: the server is shutting down or starting; 57014:
  // a statement cancelled (statement_timeout: the server is too slow); class 53: insufficient
  // resources (too many connections, out of memory or disk).
  if (code !== undefined && (code.startsWith("08") || code.startsWith("53") || /^57(P0[123]|014)$/.test(code) || UNREACHABLE.has(code))) return new UnavailableError(err);
  if (code === undefined && UNREACHABLE_MESSAGE.test(e?.message ?? "")) return new UnavailableError(err);
  return err;
}

/** pg's and pg-pool's timeouts: connecting, waiting for a pooled connection, reading an answer. */
const TIMED_OUT_MESSAGE = /^timeout expired$|^Connection terminated due to connection timeout$|^timeout exceeded when trying to connect$|^Query read timeout$/;

/**
 * Whether `err` is a bounded wait that ran out on the client's side (the server did not answer in
 * time: frozen, cut off or overwhelmed), as opposed to an answer, a refusal or a broken connection.
 */
export function timedOut(err: unknown): boolean {
  const e = err as { code?: string; message?: string } | null;
  return e?.code === undefined && TIMED_OUT_MESSAGE.test(e?.message ?? "");
}

/** Rethrows `err` as the storage error it stands for. */
export function rethrowFromPg(err: unknown): never {
  throw fromPg(err);
}
