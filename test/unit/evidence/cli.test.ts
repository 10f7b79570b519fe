import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CliError } from "../../../src/cli/command.js";
import type { CliIo } from "../../../src/cli/command.js";
import { evidenceCommand } from "../../../src/cli/evidence.js";
import { buildChain, copy, createKeyring } from "./chain-fixture.js";

const projectRoot = fileURLToPath(new URL("../../../", import.meta.url));
const keyring = await createKeyring();
const chain = buildChain(keyring, 20);
let dir: string;
let validFile: string;
let tamperedFile: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "mandate-evidence-cli-"));
  validFile = join(dir, "valid.json");
  tamperedFile = join(dir, "tampered.json");
  const tampered = copy(chain);
  tampered[9]!.payload.amount = 0;
  tampered.splice(14, 1);
  await writeFile(validFile, JSON.stringify({ records: chain, jwks: keyring.jwks() }));
  await writeFile(tamperedFile, JSON.stringify({ records: tampered, jwks: keyring.jwks() }));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Runs the real command line, exactly as a user would. */
function mandate(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn("npx", ["tsx", "src/cli/main.ts", ...args], { cwd: projectRoot });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

describe("mandate evidence verify (child process)", () => {
  it("exits 0 and says VALID for an untouched export", async () => {
    const { code, stdout, stderr } = await mandate("evidence", "verify", validFile);
    expect(stderr).toBe("");
    expect(stdout).toContain("20 records, 1 organization");
    expect(stdout).toContain(`org_test: seq 1..20 (20 records), head digest ${chain[19]!.digest}`);
    expect(stdout).toContain("VALID");
    expect(code).toBe(0);
  });

  it("exits 1 and prints each problem for a tampered export", async () => {
    const { code, stdout } = await mandate("evidence", "verify", tamperedFile);
    expect(stdout).toContain("INVALID: 2 problems");
    expect(stdout).toMatch(/^ {2}digest_mismatch \(records\[9\], org_test, seq 10, evd_\w+\): /m);
    expect(stdout).toMatch(/^ {2}sequence_gap \(records\[14\], org_test, seq 16, evd_\w+\): seq 15 is missing$/m);
    expect(code).toBe(1);
  });

  it("exits 2 for a file it cannot read, and for an unknown command", async () => {
    const missing = await mandate("evidence", "verify", join(dir, "missing.json"));
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/^mandate evidence: cannot read .*missing\.json/);

    const unknown = await mandate("frobnicate");
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("unknown command frobnicate");
  });
});

describe("evidence command (in process)", () => {
  function capture(): CliIo & { lines: string[] } {
    const lines: string[] = [];
    return { lines, out: (line) => void lines.push(line), err: (line) => void lines.push(`err: ${line}`) };
  }

  it.each<[string, string[], RegExp]>([
    ["no subcommand", [], /missing subcommand/],
    ["an unknown subcommand", ["check"], /unknown subcommand evidence check/],
    ["no file", ["verify"], /exactly one EXPORT_FILE/],
    ["an unknown option", ["verify", "--fast", "x.json"], /Unknown option '--fast'/],
  ])("is a usage error with %s", async (_name, args, message) => {
    const error = await evidenceCommand.run(args, capture()).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(CliError);
    expect((error as CliError).message).toMatch(message);
    expect((error as CliError).showUsage).toBe(true);
  });

  it("is an input error for a file that is not JSON, or not an export", async () => {
    const notJson = join(dir, "not.json");
    const notExport = join(dir, "array.json");
    await writeFile(notJson, "{ records:");
    await writeFile(notExport, "[]");
    await expect(evidenceCommand.run(["verify", notJson], capture())).rejects.toThrow(/is not JSON/);
    await expect(evidenceCommand.run(["verify", notExport], capture())).rejects.toThrow(/needs a "records" array/);
  });

  it("checks against a trusted key set with --jwks", async () => {
    const forger = await createKeyring();
    const forged = join(dir, "forged.json");
    const trusted = join(dir, "jwks.json");
    await writeFile(forged, JSON.stringify({ records: buildChain(forger, 3), jwks: forger.jwks() }));
    await writeFile(trusted, JSON.stringify(keyring.jwks()));

    const selfContained = capture();
    expect(await evidenceCommand.run(["verify", forged], selfContained)).toBe(0);
    expect(selfContained.lines.join("\n")).toContain("keys taken from the export prove its internal consistency only");

    const pinned = capture();
    expect(await evidenceCommand.run(["verify", "--jwks", trusted, forged], pinned)).toBe(1);
    expect(pinned.lines.filter((line) => line.startsWith("  unknown_key"))).toHaveLength(3);
  });

  it("reports another organization's records with --organization", async () => {
    const io = capture();
    expect(await evidenceCommand.run(["verify", "--organization", "org_elsewhere", validFile], io)).toBe(1);
    expect(io.lines).toContain("INVALID: 20 problems");
  });
});
