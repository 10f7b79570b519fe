import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { isDeepStrictEqual } from "node:util";
import { loadPolicy } from "@open-policy-agent/opa-wasm";
import { ENTRYPOINT } from "../policy/opa.js";
import { readTarGz } from "../policy/tar.js";
import { type CliCommand, CliError, type CliIo, EXIT_FAILED, EXIT_OK, parseCommandLine, readJsonFile } from "./command.js";

/** Usage of `mandate policy reproduce`. */
export const reproduceUsage = `mandate policy reproduce [--decision DECISION_ID] [--bundle BUNDLE_FILE] DECISION_EXPORT

Evaluates a recorded decision again, offline, with opa-wasm alone: the bundle it was evaluated
with and the input its evidence records (the Intent, now, agent and principal), and prints
whether the outcome, reason and trace match what was recorded.
  DECISION_EXPORT   an evidence export ({"records": [...], ...}, as mandate evidence verify
                    reads it) or one decision's evidence record (GET /v1/evidence/{id})
  --decision ID     which decision of an export holding several
  --bundle FILE     the bundle (tar.gz) named by the record's bundle_digest, downloaded with
                    GET /v1/bundles/{digest}; its SHA-256 must be that digest. Default:
                    <bundle_digest>.tar.gz beside DECISION_EXPORT
Check the export's signatures first (mandate evidence verify): this trusts the record.
Exit status 0 when it matches, 1 when it does not, 2 on bad input.`;

/** A decision's evidence record as far as reproduction reads it. */
interface DecisionRecord {
  subject_id: string;
  payload: {
    decision_id?: unknown;
    intent?: unknown;
    outcome?: unknown;
    reason?: unknown;
    trace?: unknown;
    bundle_digest?: unknown;
    now?: unknown;
    agent?: unknown;
    principal?: unknown;
  };
}

/** `mandate policy reproduce …`: see reproduceUsage. */
export async function runPolicyReproduce(args: readonly string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseCommandLine(args, { decision: { type: "string" }, bundle: { type: "string" } });
  if (positionals.length !== 1) throw new CliError("expected one DECISION_EXPORT file", true);
  const file = positionals[0]!;
  const record = pickRecord(await readJsonFile(file), file, values.decision);
  const p = record.payload;
  const decisionId = typeof p.decision_id === "string" ? p.decision_id : record.subject_id;
  if (typeof p.bundle_digest !== "string" || p.bundle_digest === "") {
    throw new CliError(`decision ${decisionId} was not evaluated by any policy (a suspended agent's): there is nothing to reproduce`);
  }
  if (typeof p.now !== "string" || !isObject(p.agent) || !isObject(p.principal) || !isObject(p.intent)) {
    throw new CliError(`decision ${decisionId}'s evidence does not record its evaluation's input (now, agent, principal): it was recorded before evidence held them`);
  }
  const bundleFile = values.bundle ?? `${file.replace(/[^/]*$/, "")}${p.bundle_digest}.tar.gz`;
  let bundle: Buffer;
  try {
    bundle = await readFile(bundleFile);
  } catch (error) {
    throw new CliError(`cannot read the bundle ${bundleFile} (download it with GET /v1/bundles/${p.bundle_digest}): ${(error as Error).message}`);
  }
  const digest = createHash("sha256").update(bundle).digest("hex");
  if (digest !== p.bundle_digest) throw new CliError(`${bundleFile} is bundle ${digest}, not ${p.bundle_digest}, the one decision ${decisionId} was evaluated with`);

  const input = { intent: p.intent, agent: p.agent, principal: p.principal, now: p.now };
  const reproduced = await evaluate(bundle, bundleFile, input);
  const recorded = { outcome: p.outcome, reason: p.reason, trace: p.trace };
  io.out(`decision ${decisionId}, bundle ${digest}, now ${p.now}`);
  io.out(`  recorded:   ${String(recorded.outcome)} ${String(recorded.reason)}`);
  io.out(`  reproduced: ${String(reproduced.outcome)} ${String(reproduced.reason)}`);
  const same = recorded.outcome === reproduced.outcome && recorded.reason === reproduced.reason;
  const sameTrace = isDeepStrictEqual(recorded.trace, reproduced.trace);
  if (same && sameTrace) {
    io.out("match: the bundle and the recorded input give the recorded decision");
    return EXIT_OK;
  }
  if (same) io.out(`  the traces differ: recorded ${JSON.stringify(recorded.trace)}, reproduced ${JSON.stringify(reproduced.trace)}`);
  io.out("MISMATCH: the bundle and the recorded input do not give the recorded decision");
  return EXIT_FAILED;
}

/** Evaluates the bundle's decision entrypoint with opa-wasm, as any OPA WebAssembly host would. */
async function evaluate(bundle: Buffer, name: string, input: unknown): Promise<{ outcome?: unknown; reason?: unknown; trace?: unknown }> {
  let files;
  try {
    files = readTarGz(bundle);
  } catch (error) {
    throw new CliError(`${name} is not a bundle: ${(error as Error).message}`);
  }
  const wasm = files.get("policy.wasm");
  if (!wasm) throw new CliError(`${name} is not a WebAssembly bundle: it has no policy.wasm`);
  const policy = await loadPolicy(new Uint8Array(wasm));
  const entrypoints = Object.keys(policy.entrypoints);
  // ENTRYPOINT, or the decision entrypoint of a bundle built when it was named otherwise.
  const entrypoint = entrypoints.includes(ENTRYPOINT) ? ENTRYPOINT : entrypoints.find((e) => e.endsWith("/decision"));
  if (!entrypoint) throw new CliError(`${name} has no decision entrypoint (it has ${entrypoints.join(", ") || "none"})`);
  const data = files.get("data.json");
  if (data) policy.setData(JSON.parse(data.toString("utf8")) as object);
  let resultSet: unknown;
  try {
    resultSet = policy.evaluate(input, entrypoint);
  } catch (error) {
    // The recorded decision was evaluated, so an evaluation failing now is a different result.
    return { outcome: `error: ${error instanceof Error ? error.message : String(error)}` };
  }
  const result: unknown = Array.isArray(resultSet) ? (resultSet[0] as { result?: unknown } | undefined)?.result : undefined;
  return isObject(result) ? result : { outcome: `no decision: ${JSON.stringify(resultSet)}` };
}

/** The decision record to reproduce: the file itself, or the one (named) decision record of an export. */
function pickRecord(doc: unknown, file: string, decisionId: string | undefined): DecisionRecord {
  const records = isObject(doc) && Array.isArray(doc.records) ? doc.records : [doc];
  const decisions = records.filter((r): r is DecisionRecord => isObject(r) && r.kind === "decision" && isObject(r.payload) && typeof r.subject_id === "string");
  const chosen = decisionId === undefined ? decisions : decisions.filter((r) => r.subject_id === decisionId);
  if (chosen.length === 1) return chosen[0]!;
  if (decisionId !== undefined) throw new CliError(`${file} holds no decision ${decisionId}`);
  if (chosen.length === 0) throw new CliError(`${file} holds no decision evidence record`);
  throw new CliError(`${file} holds ${chosen.length} decisions: name one with --decision DECISION_ID`, true);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * The `policy` command with `reproduce` added: reproduction shares nothing with `policy test` and
 * `policy build` (src/cli/policy.ts) but their command name.
 */
export function withReproduce(policy: CliCommand): CliCommand {
  return {
    name: policy.name,
    usage: `${policy.usage}\n\n  ${reproduceUsage.replaceAll("\n", "\n  ")}`,
    run: (args, io) => (args[0] === "reproduce" ? runPolicyReproduce(args.slice(1), io) : policy.run(args, io)),
  };
}
