#!/usr/bin/env node
// The `mandate` command. Each top-level command lives in its own src/cli/<name>.ts and is
// registered in COMMANDS; this file only dispatches and turns outcomes into exit statuses.
import { CliError, EXIT_ERROR, EXIT_OK } from "./command.js";
import type { CliCommand, CliIo } from "./command.js";
import { evidenceCommand } from "./evidence.js";
import { evidenceKeyCommand } from "./evidence-key.js";
import { policyCommand } from "./policy.js";
import { withReproduce } from "./policy-reproduce.js";
import { reconcileCommand } from "./reconcile.js";

const COMMANDS: readonly CliCommand[] = [evidenceCommand, evidenceKeyCommand, withReproduce(policyCommand), reconcileCommand];

const io: CliIo = {
  out: (line) => void process.stdout.write(`${line}\n`),
  err: (line) => void process.stderr.write(`${line}\n`),
};

function help(): string {
  const width = Math.max(...COMMANDS.map((command) => command.name.length));
  return [
    "usage: mandate <command> [arguments]",
    "",
    ...COMMANDS.map((command) => `  ${command.name.padEnd(width)}  ${command.summary}`),
    "",
    "mandate help <command> shows a command's usage.",
  ].join("\n");
}

async function main(argv: readonly string[]): Promise<number> {
  const [name, ...args] = argv;
  if (name === "help" || name === "--help" || name === "-h") {
    const topic = COMMANDS.find((command) => command.name === args[0]);
    io.out(topic ? topic.usage : help());
    return EXIT_OK;
  }
  const command = COMMANDS.find((candidate) => candidate.name === name);
  if (!command) {
    io.err(name === undefined ? help() : `mandate: unknown command ${name}\n\n${help()}`);
    return EXIT_ERROR;
  }
  try {
    return await command.run(args, io);
  } catch (error) {
    if (!(error instanceof CliError)) throw error;
    io.err(`mandate ${command.name}: ${error.message}`);
    if (error.showUsage) io.err(`\n${command.usage}`);
    return EXIT_ERROR;
  }
}

try {
  process.exitCode = await main(process.argv.slice(2));
} catch (error) {
  // A bug, not a verdict: keep it distinguishable from EXIT_FAILED.
  io.err(`mandate: internal error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exitCode = EXIT_ERROR;
}
