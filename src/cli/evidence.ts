import { jwkThumbprint } from "../evidence/keys.js";
import { verifyEvidenceExport } from "../evidence/verify.js";
import type { EvidenceProblem, EvidenceVerification } from "../evidence/verify.js";
import { CliError, EXIT_FAILED, EXIT_OK, parseCommandLine, readJsonFile } from "./command.js";
import type { CliCommand, CliIo } from "./command.js";

const USAGE = `usage: mandate evidence verify (--jwks JWKS_FILE | --trust-export-keys THUMBPRINT[,…]) [--organization ORG_ID [--after SEQ:DIGEST]] EXPORT_FILE

  Verifies an evidence export ({"records": [...], "jwks": {"keys": [...]}, "head": {...}}, from
  GET /v1/evidence) offline: every record's digest and signature, every chain's links, that each
  chain starts at seq 1 and ends exactly at its signed head (so records cut from either end are
  found).
  It needs keys it can trust; the export's own keys prove nothing, since whoever rewrites the
  records and the head can replace them too:
  --jwks JWKS_FILE                      the service's /.well-known/jwks.json, obtained separately
  --trust-export-keys THUMBPRINT[,…]    trust the export's own keys with these RFC 7638
                                        thumbprints (printed by every run; compare them with
                                        the service's kids, e.g. from its JWKS)
  --organization ORG_ID                 the export must hold only this organization's records
  --after SEQ:DIGEST                    the export continues one verified before, whose record at
                                        SEQ had DIGEST: it must start at SEQ+1 and link to it

  exit status: 0 valid, 1 problems found, 2 no verdict (usage or input error)`;

/** `mandate evidence …`: offline checks of exported evidence. */
export const evidenceCommand: CliCommand = {
  name: "evidence",
  usage: USAGE,
  async run(args, io) {
    const [subcommand, ...rest] = args;
    if (subcommand === "verify") return verify(rest, io);
    throw new CliError(subcommand === undefined ? "missing subcommand" : `unknown subcommand evidence ${subcommand}`, true);
  },
};

/** A key of a key set, with the thumbprint of its key members (null when it has none). */
interface KeyInfo {
  jwk: Record<string, unknown>;
  kid: string;
  thumbprint: string | null;
}

async function verify(args: readonly string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseCommandLine(args, {
    jwks: { type: "string" },
    "trust-export-keys": { type: "string" },
    organization: { type: "string" },
    after: { type: "string" },
  });
  if (positionals.length !== 1) throw new CliError("expected exactly one EXPORT_FILE", true);
  const file = positionals[0]!;
  const pins = values["trust-export-keys"]?.split(",").map((t) => t.trim()).filter((t) => t !== "");
  if (pins !== undefined && pins.length === 0) throw new CliError("--trust-export-keys names no thumbprint", true);
  const after = values.after === undefined ? undefined : parseAfter(values.after);
  if (after && values.organization === undefined) throw new CliError("--after needs --organization: it names where that organization's chain continues from", true);

  const exported = await readJsonFile(file);
  const { records, jwks, head } = isObject(exported) ? exported : {};
  if (!Array.isArray(records)) throw new CliError(`${file} is not an evidence export: it needs a "records" array`);
  if (jwks !== undefined && !isKeySet(jwks)) throw new CliError(`${file} is not an evidence export: "jwks" needs a "keys" array`);
  const exportKeys = await describeKeys(jwks?.keys ?? []);

  if (values.jwks === undefined && pins === undefined) {
    const listed = exportKeys.length
      ? exportKeys.map((k) => `\n  export key: ${keyName(k)}`).join("")
      : "\n  (the export carries no keys)";
    throw new CliError(
      "no trusted keys: pass --jwks FILE (the service's /.well-known/jwks.json, obtained separately) or " +
        "--trust-export-keys THUMBPRINT[,…] (the export's own keys, pinned by thumbprints you checked with the service). " +
        `The export's own keys prove nothing: whoever rewrites its records and head can replace them too.${listed}`,
      true,
    );
  }

  // The trusted key set: the --jwks file's keys, and the export's keys whose thumbprint is pinned.
  const trusted: KeyInfo[] = [];
  const lines: string[] = [];
  if (values.jwks !== undefined) {
    const given = await readJsonFile(values.jwks);
    if (!isKeySet(given)) throw new CliError(`${values.jwks} is not a JWKS: it needs a "keys" array`);
    const keys = await describeKeys(given.keys);
    trusted.push(...keys);
    lines.push(`trusted keys: from --jwks ${values.jwks} (${keys.length} key${keys.length === 1 ? "" : "s"})`);
    for (const key of keys) lines.push(`  trusted: ${keyName(key)}`);
  }
  if (pins !== undefined) {
    lines.push("trusted keys: the export's own keys pinned by --trust-export-keys");
    for (const pin of pins) {
      const matching = exportKeys.filter((k) => k.thumbprint === pin);
      if (matching.length === 0) lines.push(`  pinned thumbprint ${pin}: not in the export's key set`);
      for (const key of matching) lines.push(`  trusted: ${keyName(key)}`);
      trusted.push(...matching);
    }
  }
  const trustedThumbprints = new Set(trusted.map((k) => k.thumbprint));
  lines.push(`keys in the export (pin with --trust-export-keys THUMBPRINT[,…] after checking them with the service):`);
  if (exportKeys.length === 0) lines.push("  (none)");
  for (const key of exportKeys) {
    lines.push(`  export key: ${keyName(key)}, ${key.thumbprint !== null && trustedThumbprints.has(key.thumbprint) ? "trusted" : "not trusted"}`);
  }

  const result = verifyEvidenceExport({ records, ...(head !== undefined && { head }) }, {
    trustedJwks: { keys: trusted.map((k) => k.jwk) },
    ...(values.organization !== undefined && { organizationId: values.organization }),
    ...(after && { after }),
  });
  for (const line of lines) io.out(line);
  printReport(result, records.length, io, after, values.organization);
  return result.ok ? EXIT_OK : EXIT_FAILED;
}

/** Each JWK of a key set with its kid and thumbprint; entries that are not objects are left out. */
async function describeKeys(keys: readonly unknown[]): Promise<KeyInfo[]> {
  const jwks = keys.filter(isObject);
  return Promise.all(jwks.map(async (jwk) => ({ jwk, kid: typeof jwk.kid === "string" ? jwk.kid : "(none)", thumbprint: await jwkThumbprint(jwk) })));
}

function keyName(key: KeyInfo): string {
  return `thumbprint ${key.thumbprint ?? "(not computable: incomplete key)"} (kid ${key.kid})`;
}

/** `--after SEQ:DIGEST`: a positive seq and a 64-hex-digit digest. */
function parseAfter(text: string): { seq: number; digest: string } {
  const m = /^([1-9][0-9]{0,15}):([0-9a-f]{64})$/.exec(text);
  if (!m || !Number.isSafeInteger(Number(m[1]))) throw new CliError(`--after must be SEQ:DIGEST (a seq from 1, then the record's 64 hex digit digest), not ${JSON.stringify(text)}`, true);
  return { seq: Number(m[1]), digest: m[2]! };
}

function printReport(result: EvidenceVerification, recordCount: number, io: CliIo, after: { seq: number; digest: string } | undefined, organization: string | undefined): void {
  const organizations = result.chains.length;
  io.out(`${recordCount} record${recordCount === 1 ? "" : "s"}, ${organizations} organization${organizations === 1 ? "" : "s"}`);
  for (const chain of result.chains) {
    io.out(`  ${chain.organization_id}: seq ${chain.first_seq}..${chain.last_seq} (${chain.record_count} records), head digest ${chain.head_digest ?? "unreadable"}`);
    if (chain.head) {
      const h = chain.head;
      io.out(`    signed head: seq ${h.seq}, digest ${h.digest ?? "null"}, signed at ${h.signed_at} by kid ${h.kid}`);
    }
    if (!chain.from_genesis && after && chain.organization_id === organization) {
      io.out(`    continues seq ${after.seq} (digest ${after.digest}, as --after gives it)`);
    }
  }
  if (result.ok) {
    io.out("VALID: every record's digest and signature verified with a trusted key, every chain is unbroken from its start and ends at its signed head");
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

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isKeySet(value: unknown): value is { keys: unknown[] } {
  return isObject(value) && Array.isArray(value.keys);
}
