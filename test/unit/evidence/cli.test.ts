import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CliError } from "../../../src/cli/command.js";
import type { CliIo } from "../../../src/cli/command.js";
import { evidenceCommand } from "../../../src/cli/evidence.js";
import { buildChain, copy, createKeyring, signHead } from "./chain-fixture.js";

const projectRoot = fileURLToPath(new URL("../../../", import.meta.url));
const keyring = await createKeyring();
// The service's kid is its key's RFC 7638 thumbprint; the tests rely on that to know what to pin.
const thumbprint = keyring.activeKid;
const chain = buildChain(keyring, 20);
const head = signHead(keyring, chain);
let dir: string;
let validFile: string;
let tamperedFile: string;
let truncatedFile: string;
let frontCutFile: string;
let jwksFile: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "mandate-evidence-cli-"));
  validFile = join(dir, "valid.json");
  tamperedFile = join(dir, "tampered.json");
  truncatedFile = join(dir, "truncated.json");
  frontCutFile = join(dir, "front-cut.json");
  jwksFile = join(dir, "service-jwks.json");
  const tampered = copy(chain);
  tampered[9]!.payload.amount = 0;
  tampered.splice(14, 1);
  await writeFile(validFile, JSON.stringify({ records: chain, jwks: keyring.jwks(), head }));
  await writeFile(tamperedFile, JSON.stringify({ records: tampered, jwks: keyring.jwks(), head }));
  await writeFile(truncatedFile, JSON.stringify({ records: chain.slice(0, 17), jwks: keyring.jwks(), head }));
  await writeFile(frontCutFile, JSON.stringify({ records: chain.slice(5), jwks: keyring.jwks(), head }));
  await writeFile(jwksFile, JSON.stringify(keyring.jwks()));
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
  it("exits 0 and says VALID for an untouched export, saying which keys it trusted", async () => {
    const { code, stdout, stderr } = await mandate("evidence", "verify", "--jwks", jwksFile, validFile);
    expect(stderr).toBe("");
    expect(stdout).toContain(`trusted keys: from --jwks ${jwksFile}`);
    expect(stdout).toContain(`  trusted: thumbprint ${thumbprint} (kid ${thumbprint})`);
    expect(stdout).toContain("20 records, 1 organization");
    expect(stdout).toContain(`org_test: seq 1..20 (20 records), head digest ${chain[19]!.digest}`);
    expect(stdout).toContain(`signed head: seq 20, digest ${chain[19]!.digest}, signed at ${head.signed_at} by kid ${thumbprint}`);
    expect(stdout).toContain("VALID");
    expect(code).toBe(0);
  });

  it("refuses to run without keys, printing the export's key thumbprints to pin", async () => {
    const { code, stdout, stderr } = await mandate("evidence", "verify", validFile);
    expect(code).toBe(2);
    expect(stdout).toBe("");
    expect(stderr).toMatch(/no trusted keys/);
    expect(stderr).toMatch(/--jwks/);
    expect(stderr).toMatch(/--trust-export-keys/);
    expect(stderr).toMatch(/prove nothing/);
    expect(stderr).toContain(`thumbprint ${thumbprint} (kid ${thumbprint})`);
    expect(stderr).not.toContain("VALID");
  });

  it("exits 0 with the export's own key pinned by its thumbprint", async () => {
    const { code, stdout } = await mandate("evidence", "verify", "--trust-export-keys", thumbprint, validFile);
    expect(stdout).toContain("trusted keys: the export's own keys pinned by --trust-export-keys");
    expect(stdout).toContain(`  trusted: thumbprint ${thumbprint} (kid ${thumbprint})`);
    expect(stdout).toContain("VALID");
    expect(code).toBe(0);
  });

  it("exits 1 for an export with its last records cut (truncated)", async () => {
    const { code, stdout } = await mandate("evidence", "verify", "--jwks", jwksFile, truncatedFile);
    expect(stdout).toContain("INVALID: 1 problem");
    expect(stdout).toMatch(/^ {2}truncated \(org_test, seq 20\): the export ends at seq 17 but the signed head is at seq 20: seq 18 to 20 \(3 records\) are missing$/m);
    expect(code).toBe(1);
  });

  it("exits 1 for an export with its first records cut (prefix_missing); with --after naming where it continues, 0", async () => {
    const cut = await mandate("evidence", "verify", "--jwks", jwksFile, frontCutFile);
    expect(cut.stdout).toMatch(/^ {2}prefix_missing \(records\[0\], org_test, seq 6, [^)]+\): the chain starts at seq 6: seq 1 to 5 \(5 records\) are missing/m);
    expect(cut.code).toBe(1);
    const continued = await mandate("evidence", "verify", "--jwks", jwksFile, "--organization", "org_test", "--after", `5:${chain[4]!.digest}`, frontCutFile);
    expect(continued.stdout).toContain(`continues seq 5 (digest ${chain[4]!.digest}, as --after gives it)`);
    expect(continued.stdout).toContain("VALID");
    expect(continued.code).toBe(0);
    const wrongLink = await mandate("evidence", "verify", "--jwks", jwksFile, "--organization", "org_test", "--after", `5:${chain[3]!.digest}`, frontCutFile);
    expect(wrongLink.stdout).toMatch(/^ {2}chain_broken \(records\[0\], org_test, seq 6, [^)]+\): prev_digest/m);
    expect(wrongLink.code).toBe(1);
    for (const bad of [["--after", `5:${chain[4]!.digest}`], ["--organization", "org_test", "--after", "5"], ["--organization", "org_test", "--after", `0:${chain[4]!.digest}`]]) {
      const refused = await mandate("evidence", "verify", "--jwks", jwksFile, ...bad, frontCutFile);
      expect(refused.code, bad.join(" ")).toBe(2);
    }
  });

  it("exits 1 and prints each problem for a tampered export", async () => {
    const { code, stdout } = await mandate("evidence", "verify", "--jwks", jwksFile, tamperedFile);
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
    await expect(evidenceCommand.run(["verify", "--jwks", jwksFile, notJson], capture())).rejects.toThrow(/is not JSON/);
    await expect(evidenceCommand.run(["verify", "--jwks", jwksFile, notExport], capture())).rejects.toThrow(/needs a "records" array/);
  });

  it("is a usage error without keys, or with an empty thumbprint list", async () => {
    const error = await evidenceCommand.run(["verify", validFile], capture()).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(CliError);
    expect((error as CliError).showUsage).toBe(true);
    expect((error as CliError).message).toMatch(/no trusted keys: pass --jwks FILE .* or --trust-export-keys THUMBPRINT/s);
    expect((error as CliError).message).toContain(thumbprint);
    await expect(evidenceCommand.run(["verify", "--trust-export-keys", " ,", validFile], capture())).rejects.toThrow(/no thumbprint/);
  });

  it("finds a fully re-signed forgery (records and head re-signed, JWKS replaced) INVALID with the service's keys", async () => {
    const forger = await createKeyring();
    const records = buildChain(forger, 20);
    const forged = join(dir, "forged.json");
    await writeFile(forged, JSON.stringify({ records, jwks: forger.jwks(), head: signHead(forger, records) }));

    // Without keys: refused, not VALID.
    await expect(evidenceCommand.run(["verify", forged], capture())).rejects.toThrow(/no trusted keys/);

    const withJwks = capture();
    expect(await evidenceCommand.run(["verify", "--jwks", jwksFile, forged], withJwks)).toBe(1);
    expect(withJwks.lines.filter((line) => line.startsWith("  unknown_key"))).toHaveLength(21);
    expect(withJwks.lines).toContain(`  export key: thumbprint ${forger.activeKid} (kid ${forger.activeKid}), not trusted`);

    // Pinning the service's thumbprint: the forged export does not hold that key.
    const pinned = capture();
    expect(await evidenceCommand.run(["verify", "--trust-export-keys", thumbprint, forged], pinned)).toBe(1);
    expect(pinned.lines).toContain(`  pinned thumbprint ${thumbprint}: not in the export's key set`);
    expect(pinned.lines.filter((line) => line.startsWith("  unknown_key"))).toHaveLength(21);
  });

  it("trusts only the pinned one of the export's keys", async () => {
    const forger = await createKeyring();
    // The real key copied in, but records and head signed by the forger's key.
    const records = buildChain(forger, 3);
    const mixed = join(dir, "mixed.json");
    await writeFile(mixed, JSON.stringify({ records, jwks: { keys: [...keyring.jwks().keys, ...forger.jwks().keys] }, head: signHead(forger, records) }));
    const io = capture();
    expect(await evidenceCommand.run(["verify", "--trust-export-keys", thumbprint, mixed], io)).toBe(1);
    expect(io.lines).toContain(`  export key: thumbprint ${forger.activeKid} (kid ${forger.activeKid}), not trusted`);
    expect(io.lines.filter((line) => line.startsWith("  unknown_key"))).toHaveLength(4);
  });

  it("reports another organization's records with --organization", async () => {
    const io = capture();
    expect(await evidenceCommand.run(["verify", "--jwks", jwksFile, "--organization", "org_elsewhere", validFile], io)).toBe(1);
    // 20 records and the head of another organization.
    expect(io.lines).toContain("INVALID: 21 problems");
  });
});
