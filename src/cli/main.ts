#!/usr/bin/env node
// The `mandate` command. Each top-level command lives in its own src/cli/<name>.ts and is
// registered in COMMANDS; this file only dispatches and turns outcomes into exit statuses.
// A command's module is loaded only when it runs, so `mandate serve`, which stays up as the
// service's parent, carries none of the others.
import { CliError, EXIT_ERROR, EXIT_OK } from "./command.js";
import type { CliCommand, CliIo } from "./command.js";

interface Registered {
  readonly name: string;
  /** One line for `mandate help`. */
  readonly summary: string;
  load(): Promise<CliCommand>;
}

const COMMANDS: readonly Registered[] = [
  { name: "serve", summary: "run the service (configured by environment variables, as npm start)", load: async () => (await import("./serve.js")).serveCommand },
  { name: "sandbox", summary: "create a sandbox organization and print its API key", load: async () => (await import("./sandbox.js")).sandboxCommand },
  { name: "intent", summary: "sign an Intent with an agent key file, or sign and submit it", load: async () => (await import("./intent.js")).intentCommand },
  {
    name: "evidence",
    summary: "verify an evidence export offline (evidence verify --jwks JWKS_FILE FILE)",
    load: async () => (await import("./evidence.js")).evidenceCommand,
  },
  { name: "evidence-key", summary: "rotate the evidence signing key (DATABASE_URL)", load: async () => (await import("./evidence-key.js")).evidenceKeyCommand },
  {
    name: "policy",
    summary: "test and build runtime policies offline, exactly as publishing builds them",
    load: async () => (await import("./policy-reproduce.js")).withReproduce((await import("./policy.js")).policyCommand),
  },
  { name: "reconcile", summary: "reconcile a decision's execution receipts (early access)", load: async () => (await import("./reconcile.js")).reconcileCommand },
];

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
    io.out(topic ? (await topic.load()).usage : help());
    return EXIT_OK;
  }
  const registered = COMMANDS.find((candidate) => candidate.name === name);
  if (!registered) {
    io.err(name === undefined ? help() : `mandate: unknown command ${name}\n\n${help()}`);
    return EXIT_ERROR;
  }
  const command = await registered.load();
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
