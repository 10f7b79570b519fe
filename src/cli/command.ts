import { readFile } from "node:fs/promises";
import { parseArgs, type ParseArgsConfig } from "node:util";
/** Exit status meaning "checked, and everything holds". */
export const EXIT_OK = 0;
/** Exit status meaning "checked, and something is wrong" (the command's verdict, not a crash). */
export const EXIT_FAILED = 1;
/** Exit status meaning no verdict was reached: bad arguments, unreadable input, or a bug. */
export const EXIT_ERROR = 2;

/** Where a command writes, so commands stay testable in-process. */
export interface CliIo {
  /** Report output: summaries, verdicts, findings. */
  out(line: string): void;
  /** Diagnostics about the invocation itself. */
  err(line: string): void;
}

/** A top-level `mandate <name> …` command, one per file in src/cli/, registered (with its one-line summary) in main.ts. */
export interface CliCommand {
  /** The first argument that selects the command, e.g. `evidence`. */
  readonly name: string;
  /** Usage lines, shown by `mandate help` and after a usage error. */
  readonly usage: string;
  /** Runs with the arguments after the name and resolves to the exit status. */
  run(args: readonly string[], io: CliIo): Promise<number>;
}

/**
 * Thrown by a command that cannot reach a verdict (bad arguments, unreadable input): main
 * prints the message, and the command's usage when `showUsage`, and exits with EXIT_ERROR.
 */
export class CliError extends Error {
  override readonly name = "CliError";

  constructor(
    message: string,
    readonly showUsage = false,
  ) {
    super(message);
  }
}

/** A JSON file's contents; CliError (exit 2) naming the file when it cannot be read or parsed. */
export async function readJsonFile(file: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    throw new CliError(`cannot read ${file}: ${(error as Error).message}`);
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new CliError(`${file} is not JSON: ${(error as Error).message}`);
  }
}

/** The service a client command talks to: --url, else MANDATE_BASE_URL, else the local default. */
export function serviceUrl(flag: string | undefined): string {
  return (flag ?? process.env.MANDATE_BASE_URL ?? "http://127.0.0.1:8080").replace(/\/+$/, "");
}

/** How long a command waits for the service's whole answer (MANDATE_CLI_TIMEOUT_MS). */
const DEFAULT_TIMEOUT_MS = 30_000;

/**
 * POSTs `body` to the service's `/v1` `path` and resolves to the JSON answer. A refusal becomes a
 * CliError with the error body's code, message, request id and field errors (docs/architecture.md,
 * Error model); an unreachable service, or one that does not answer within the timeout, one
 * naming the URL.
 */
export async function postJson(baseUrl: string, path: string, body: string | Buffer, headers: Record<string, string> = {}): Promise<unknown> {
  const timeoutMs = Number(process.env.MANDATE_CLI_TIMEOUT_MS ?? DEFAULT_TIMEOUT_MS);
  const unreachable = (error: unknown) => {
    const timedOut = error instanceof DOMException && error.name === "TimeoutError";
    const cause = timedOut ? `no answer within ${timeoutMs} ms` : ((error as { cause?: { message?: string } }).cause?.message ?? (error as Error).message);
    return new CliError(`cannot reach the service at ${baseUrl} (--url or MANDATE_BASE_URL): ${cause}`);
  };
  let response: Response;
  let text: string;
  try {
    response = await fetch(`${baseUrl}${path}`, {
      method: "POST",
      body: typeof body === "string" ? body : new Uint8Array(body),
      headers: { "content-type": "application/json", ...headers },
      signal: AbortSignal.timeout(Number.isFinite(timeoutMs) && timeoutMs > 0 ? timeoutMs : DEFAULT_TIMEOUT_MS),
    });
    text = await response.text();
  } catch (error) {
    throw unreachable(error);
  }
  let answer: unknown;
  try {
    answer = JSON.parse(text) as unknown;
  } catch {
    throw new CliError(`${baseUrl}${path} answered ${response.status} with a body that is not JSON: ${text.slice(0, 200)}`);
  }
  if (!response.ok) {
    const error = answer as { detail?: string; message?: string; request_id?: string; errors?: { field?: string; code?: string; message?: string }[] };
    const fields = (error.errors ?? []).map((e) => `\n  ${e.field ?? "(request)"}: ${e.message ?? ""}${e.code ? ` (${e.code})` : ""}`).join("");
    const requestId = error.request_id ?? response.headers.get("x-request-id");
    throw new CliError(`${response.status} ${error.detail ?? "error"}: ${error.message ?? text}${requestId ? ` (request ${requestId})` : ""}${fields}`);
  }
  return answer;
}

/**
 * A command's options and positionals (node:util parseArgs, strict); a CliError with usage when
 * malformed. A string option takes the next argument as its value even when that starts with a
 * dash (a key thumbprint, base64url, may): parseArgs alone refuses `--option -value` as ambiguous.
 */
export function parseCommandLine<const O extends NonNullable<ParseArgsConfig["options"]>>(args: readonly string[], options: O) {
  const joined: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const name = args[i]!.startsWith("--") ? args[i]!.slice(2) : "";
    if (options[name]?.type === "string" && i + 1 < args.length) joined.push(`--${name}=${args[++i]!}`);
    else joined.push(args[i]!);
  }
  try {
    return parseArgs({ args: joined, options, allowPositionals: true, strict: true });
  } catch (error) {
    throw new CliError((error as Error).message, true);
  }
}
