import { readFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { verifyEvidenceExport } from "../evidence/verify.js";
import type { EvidenceProblem, EvidenceVerification } from "../evidence/verify.js";
import { CliError, EXIT_FAILED, EXIT_OK } from "./command.js";
import type { CliCommand, CliIo } from "./command.js";

const USAGE = `usage: mandate evidence verify [--jwks JWKS_FILE] [--organization ORG_ID] EXPORT_FILE

  Verifies an evidence export ({"records": [...], "jwks": {"keys": [...]}}) offline.
  --jwks JWKS_FILE         check signatures against this key set (the service's published
                           /.well-known/jwks.json) instead of the export's own
  --organization ORG_ID    the export must hold only this organization's records

  exit status: 0 valid, 1 problems found, 2 no verdict (usage or input error)`;

/** `mandate evidence …`: offline checks of exported evidence. */
export const evidenceCommand: CliCommand = {
  name: "evidence",
  summary: "verify an evidence export offline (evidence verify FILE)",
  usage: USAGE,
  async run(args, io) {
    const [subcommand, ...rest] = args;
    if (subcommand === "verify") return verify(rest, io);
    throw new CliError(subcommand === undefined ? "missing subcommand" : `unknown subcommand evidence ${subcommand}`, true);
  },
};

async function verify(args: readonly string[], io: CliIo): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...args],
      options: { jwks: { type: "string" }, organization: { type: "string" } },
      allowPositionals: true,
      strict: true,
    });
  } catch (error) {
    throw new CliError((error as Error).message, true);
  }
  const { values, positionals } = parsed;
  if (positionals.length !== 1) throw new CliError("expected exactly one EXPORT_FILE", true);
  const file = positionals[0]!;

  const exported = await readJsonFile(file);
  const { records, jwks } = isObject(exported) ? exported : {};
  if (!Array.isArray(records)) throw new CliError(`${file} is not an evidence export: it needs a "records" array`);
  if (jwks !== undefined && !isKeySet(jwks)) throw new CliError(`${file} is not an evidence export: "jwks" needs a "keys" array`);
  let trustedJwks: { keys: unknown[] } | undefined;
  if (values.jwks !== undefined) {
    const trusted = await readJsonFile(values.jwks);
    if (!isKeySet(trusted)) throw new CliError(`${values.jwks} is not a JWKS: it needs a "keys" array`);
    trustedJwks = trusted;
  } else if (jwks === undefined) {
    throw new CliError(`${file} carries no "jwks": pass the service's key set with --jwks FILE`);
  }

  const result = verifyEvidenceExport({ records, ...(jwks && { jwks }) }, {
    ...(trustedJwks && { trustedJwks }),
    ...(values.organization !== undefined && { organizationId: values.organization }),
  });
  printReport(result, records.length, trustedJwks ? `--jwks ${values.jwks}` : undefined, io);
  return result.ok ? EXIT_OK : EXIT_FAILED;
}

function printReport(result: EvidenceVerification, recordCount: number, trustedKeys: string | undefined, io: CliIo): void {
  const organizations = result.chains.length;
  io.out(`${recordCount} record${recordCount === 1 ? "" : "s"}, ${organizations} organization${organizations === 1 ? "" : "s"}; keys from ${trustedKeys ?? "the export itself"}`);
  for (const chain of result.chains) {
    io.out(`  ${chain.organization_id}: seq ${chain.first_seq}..${chain.last_seq} (${chain.record_count} records), head digest ${chain.head_digest ?? "unreadable"}`);
    if (!chain.from_genesis) {
      io.out(`    starts mid-chain: the link from seq ${chain.first_seq} to seq ${chain.first_seq - 1} is outside this export and was not checked`);
    }
  }
  if (!trustedKeys) {
    io.out("note: keys taken from the export prove its internal consistency only; pass --jwks with the service's published key set to authenticate it");
  }
  if (organizations > 0) {
    io.out("note: records cut from the end of a chain leave no trace; compare each head digest with the service");
  }
  if (result.ok) {
    io.out("VALID: every record's digest and signature verified and every chain is unbroken");
    return;
  }
  io.out(`INVALID: ${result.problems.length} problem${result.problems.length === 1 ? "" : "s"}`);
  for (const problem of result.problems) io.out(`  ${describeProblem(problem)}`);
}

function describeProblem(problem: EvidenceProblem): string {
  const where = [
    problem.index !== undefined ? `records[${problem.index}]` : undefined,
    problem.organization_id,
    problem.seq !== undefined ? `seq ${problem.seq}` : undefined,
    problem.evidence_id,
  ].filter((part) => part !== undefined);
  return `${problem.problem}${where.length ? ` (${where.join(", ")})` : ""}: ${problem.message}`;
}

async function readJsonFile(file: string): Promise<unknown> {
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

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isKeySet(value: unknown): value is { keys: unknown[] } {
  return isObject(value) && Array.isArray(value.keys);
}
