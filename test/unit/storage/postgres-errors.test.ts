import { describe, expect, it } from "vitest";
import { CollisionError, ConflictError, UnavailableError, UnstorableValueError } from "../../../src/storage/errors.js";
import { fromPg, timedOut } from "../../../src/storage/postgres/errors.js";

/*
 * What pg and pg-pool throw when Postgres is down, frozen or slow (docs/architecture.md, Error
 * model: storage errors) is 503 `unavailable`, never an untranslated error (500 `internal`).
 * The messages are pg's and pg-pool's own (node_modules/pg/lib/client.js, pg-pool/index.js).
 */

function pgError(message: string, code?: string): Error {
  return Object.assign(new Error(message), code === undefined ? {} : { code });
}

describe("storage/postgres/errors.ts", () => {
  it.each([
    ["a refused connection", pgError("connect ECONNREFUSED 127.0.0.1:5432", "ECONNREFUSED")],
    ["a Unix socket that is not there (a stopped local Postgres)", pgError("connect ENOENT /tmp/.s.PGSQL.5432", "ENOENT")],
    ["an unreachable network", pgError("connect ENETUNREACH", "ENETUNREACH")],
    ["a connection cut", pgError("Connection terminated unexpectedly")],
    ["pg's connect timeout", pgError("timeout expired")],
    ["pg-pool's connect timeout", pgError("Connection terminated due to connection timeout")],
    ["pg-pool's wait for a pooled connection", pgError("timeout exceeded when trying to connect")],
    ["pg's read timeout (query_timeout)", pgError("Query read timeout")],
    ["a client whose connection broke", pgError("Client has encountered a connection error and is not queryable")],
    ["a closed client", pgError("Client was closed and is not queryable")],
    ["a pool ended (shutting down)", pgError("Cannot use a pool after calling end on the pool")],
    ["statement_timeout (57014)", pgError("canceling statement due to statement timeout", "57014")],
    ["the server shutting down (57P01)", pgError("terminating connection due to administrator command", "57P01")],
    ["the server starting (57P03)", pgError("the database system is starting up", "57P03")],
    ["too many connections (53300)", pgError("sorry, too many clients already", "53300")],
    ["a connection exception (08006)", pgError("connection failure", "08006")],
  ])("%s → UnavailableError", (_, err) => {
    expect(fromPg(err)).toBeInstanceOf(UnavailableError);
  });

  it("the storage errors that mean something in terms of what was written", () => {
    expect(fromPg(Object.assign(pgError("duplicate key", "23505"), { constraint: "decisions_nonce_key" }))).toEqual(new CollisionError("decisions_nonce_key"));
    expect(fromPg(pgError("could not serialize access", "40001"))).toBeInstanceOf(ConflictError);
    expect(fromPg(pgError("unsupported Unicode escape sequence", "22P05"))).toBeInstanceOf(UnstorableValueError);
  });

  it("anything else is left as it is (a bug: 500 internal)", () => {
    const syntax = pgError("syntax error at or near", "42601");
    expect(fromPg(syntax)).toBe(syntax);
    const other = pgError("some timeout expired elsewhere");
    expect(fromPg(other)).toBe(other);
  });

  it("timedOut: only the client's own bounded waits running out", () => {
    for (const m of ["timeout expired", "Connection terminated due to connection timeout", "timeout exceeded when trying to connect", "Query read timeout"]) expect(timedOut(pgError(m)), m).toBe(true);
    for (const e of [pgError("Connection terminated unexpectedly"), pgError("canceling statement due to statement timeout", "57014"), pgError("connect ECONNREFUSED", "ECONNREFUSED"), null]) expect(timedOut(e)).toBe(false);
  });
});
