import { readFile } from "node:fs/promises";
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

/** A top-level `mandate <name> …` command, one per file in src/cli/, registered in main.ts. */
export interface CliCommand {
  /** The first argument that selects the command, e.g. `evidence`. */
  readonly name: string;
  /** One line for `mandate help`. */
  readonly summary: string;
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
