import { readFileSync } from "node:fs";
import path from "node:path";
import { projectRoot } from "./policy/opa.js";

/*
 * What start-up tells an operator: the one "listening" line (where, which version, on what
 * storage) and, when it cannot start, which dependency failed and where it was looked for.
 */

/** A dependency the service could not use at start-up; its message names it and where it was looked for. */
export class DependencyError extends Error {
  constructor(
    readonly dependency: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "DependencyError";
  }
}

const UNREACHABLE = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH", "ECONNRESET"]);

/**
 * The words of the failure's root cause (the storage layer wraps a refused connection into 503
 * `unavailable`, keeping it as `cause`), with "is unreachable" when it is a network failure.
 */
function explain(err: unknown): { unreachable: boolean; text: string } {
  let root = err as (NodeJS.ErrnoException & { errors?: NodeJS.ErrnoException[] }) | undefined;
  for (let i = 0; i < 5 && root?.cause; i++) root = root.cause as typeof root;
  // pg and net report a refused multi-address connect as an AggregateError with an empty message.
  const inner = root?.errors?.[0];
  const code = root?.code ?? inner?.code;
  const text = (root instanceof Error && root.message) || inner?.message || String(root);
  return { unreachable: code !== undefined && UNREACHABLE.has(code), text };
}

/**
 * Runs `f`, a start-up step that needs `dependency`, found through `where` (the variable and
 * host:port); a failure is rethrown as a DependencyError naming both, the cause's words kept.
 */
export async function needs<T>(dependency: string, where: string, f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (err) {
    const { unreachable, text } = explain(err);
    throw new DependencyError(dependency, `${dependency} (${where}) ${unreachable ? "is unreachable" : "failed"}: ${text}`, { cause: err });
  }
}

/** host:port of a postgres:// or redis:// URL (a Unix socket's directory when `host=` names one); never its credentials. */
export function endpointOf(url: string): string {
  try {
    const u = new URL(url);
    const socketDir = u.searchParams.get("host");
    if (socketDir?.startsWith("/")) return `${socketDir} (Unix socket)`;
    const defaultPort = u.protocol.startsWith("redis") ? "6379" : "5432";
    return `${u.hostname || "localhost"}:${u.port || defaultPort}`;
  } catch {
    return "an unparsable URL";
  }
}

/** The service's version, from package.json. */
export function packageVersion(): string {
  try {
    return (JSON.parse(readFileSync(path.join(projectRoot(), "package.json"), "utf8")) as { version?: string }).version ?? "unknown";
  } catch {
    return "unknown";
  }
}

/** The URL(s) a server on host:port answers at; an unspecified host listens on every address. */
export function listenUrls(scheme: "http" | "https", host: string, port: number): string[] {
  if (host === "0.0.0.0" || host === "::" || host === "") return [`${scheme}://127.0.0.1:${port} (and every other address of this host)`];
  return [`${scheme}://${host.includes(":") ? `[${host}]` : host}:${port}`];
}
