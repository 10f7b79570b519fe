import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { gunzipSync, gzipSync } from "node:zlib";
import { beforeAll, describe, expect, it } from "vitest";
import { buildBundle, type BuiltBundle } from "../../../src/policy/build.js";
import { PolicyEngine, type DecisionInput } from "../../../src/policy/engine.js";
import { EvaluationError, PolicyRuntimeError } from "../../../src/policy/errors.js";
import { compileRules, STARTER_POLICY_KEY, STARTER_RULES } from "../../../src/policy/rules.js";
import { readTarGz } from "../../../src/policy/tar.js";

const starter = { policy_key: STARTER_POLICY_KEY, version: 1, rego: compileRules(STARTER_POLICY_KEY, STARTER_RULES) };

function inputFor(action: string, extra: Record<string, unknown> = {}): DecisionInput {
  return {
    intent: { agent_id: "agt_1", action, requested_at: "2026-05-01T10:00:00.000Z", nonce: "n-1", ...extra },
    agent: { agent_id: "agt_1", state: "active" },
    principal: { principal_id: "prn_1", external_ref: "E1", kind: "person" },
    now: "2026-05-01T10:00:00.000Z",
  };
}

// A hand-written policy that misbehaves in the ways a power user's module might.
const misbehaving = {
  policy_key: "custom",
  version: 1,
  rego: [
    "package mandate.policies.custom",
    "",
    'actions := {"bad_outcome", "bad_reason", "conflict", "fine"}',
    "",
    'results contains {"outcome": "MAYBE", "reason": "unsure", "rule": "r"} if input.intent.action == "bad_outcome"',
    "",
    'results contains {"outcome": "DENY", "reason": "Not Snake", "rule": "r"} if input.intent.action == "bad_reason"',
    "",
    'results contains {"outcome": "ALLOW", "reason": "fine", "rule": "r"} if input.intent.action == "fine"',
    "",
    'results contains {"outcome": "DENY", "reason": "conflicted", "rule": "c"} if choice',
    "",
    "# Two values for one complete rule: an error only when the input makes both true.",
    'choice := 1 if input.intent.action == "conflict"',
    "",
    'choice := 2 if input.intent.action == "conflict"',
    "",
  ].join("\n"),
};


// What is decided, not how fast: the time limit has its own tests (time-limit.test.ts), and a
// loaded machine must not trip it here.
const UNHURRIED = { timeoutMs: 60_000 };

describe("PolicyEngine", () => {
  let plain: BuiltBundle;
  let custom: BuiltBundle;

  beforeAll(async () => {
    [plain, custom] = await Promise.all([
      buildBundle({ policies: [starter], graph: null, graph_version: null }),
      buildBundle({ policies: [starter, misbehaving], graph: null, graph_version: null }),
    ]);
  });

  it("decides the starter action", async () => {
    const engine = new PolicyEngine(UNHURRIED);
    await engine.load(plain.digest, plain.bundle);
    expect(engine.evaluate(plain.digest, inputFor("reference_noop"))).toEqual({
      outcome: "ALLOW",
      reason: "starter_reference_action",
      trace: [{ policy: "starter", rule: "reference_noop", outcome: "ALLOW", reason: "starter_reference_action", detail: null }],
    });
    expect(engine.evaluate(plain.digest, inputFor("vendor_payment"))).toEqual({
      outcome: "HUMAN_REVIEW",
      reason: "unrecognized_action",
      trace: [],
    });
  });

  it("decides with a bundle that has no policy at all", async () => {
    const empty = await buildBundle({ policies: [], graph: null, graph_version: null });
    const engine = new PolicyEngine(UNHURRIED);
    await engine.load(empty.digest, empty.bundle);
    expect(engine.evaluate(empty.digest, inputFor("reference_noop")).reason).toBe("unrecognized_action");
  });

  it("refuses to evaluate a bundle it has not loaded", () => {
    expect(() => new PolicyEngine(UNHURRIED).evaluate(plain.digest, inputFor("reference_noop"))).toThrow(EvaluationError);
  });

  it("refuses a bundle whose bytes do not match its digest", async () => {
    const engine = new PolicyEngine(UNHURRIED);
    await expect(engine.load(custom.digest, plain.bundle)).rejects.toThrow(/digest mismatch/);
    expect(engine.has(custom.digest)).toBe(false);
  });

  it("refuses an archive that is not a bundle", async () => {
    const junk = gzipSync(Buffer.from("not a tar archive at all"));
    const digest = createHash("sha256").update(junk).digest("hex");
    await expect(new PolicyEngine(UNHURRIED).load(digest, junk)).rejects.toBeInstanceOf(EvaluationError);
  });

  // name -> action whose evaluation must fail rather than decide
  const failures: [string, string][] = [
    ["an outcome other than the three", "bad_outcome"],
    ["a reason that is not snake_case", "bad_reason"],
    ["a conflict raised inside WebAssembly", "conflict"],
  ];

  it.each(failures)("fails closed on %s", async (_name, action) => {
    const engine = new PolicyEngine(UNHURRIED);
    await engine.load(custom.digest, custom.bundle);
    expect(() => engine.evaluate(custom.digest, inputFor(action))).toThrow(EvaluationError);
  });

  it("keeps an instance after a located Rego error, which is no trap, and it serves again", async () => {
    const engine = new PolicyEngine(UNHURRIED);
    await engine.load(custom.digest, custom.bundle);
    expect(() => engine.evaluate(custom.digest, inputFor("conflict"))).toThrow(PolicyRuntimeError);
    expect(engine.has(custom.digest)).toBe(true);
    expect(engine.evaluate(custom.digest, inputFor("fine")).reason).toBe("fine");
  });

  it("keeps the most recently used bundles", async () => {
    const third = await buildBundle({ policies: [misbehaving], graph: null, graph_version: null });
    const engine = new PolicyEngine({ ...UNHURRIED, capacity: 2 });
    await engine.load(plain.digest, plain.bundle);
    await engine.load(custom.digest, custom.bundle);
    engine.evaluate(plain.digest, inputFor("reference_noop"));
    await engine.load(third.digest, third.bundle);
    expect([engine.has(plain.digest), engine.has(custom.digest), engine.has(third.digest)]).toEqual([true, false, true]);
  });

  it("shares one load between concurrent callers", async () => {
    const engine = new PolicyEngine(UNHURRIED);
    const [a, b] = [engine.load(plain.digest, plain.bundle), engine.load(plain.digest, plain.bundle)];
    expect(a).toBe(b);
    await Promise.all([a, b]);
    expect(engine.has(plain.digest)).toBe(true);
  });
});

describe("readTarGz", () => {
  const run = promisify(execFile);

  it("reads ustar, PAX and GNU long names as written by tar", async () => {
    const dir = await mkdtemp(join(tmpdir(), "mandate-tar-"));
    try {
      const long = `${"d".repeat(120)}.json`;
      await writeFile(join(dir, "data.json"), '{"a":1}');
      await writeFile(join(dir, long), "x".repeat(1000));
      for (const format of ["ustar", "pax", "gnu"]) {
        const names = format === "ustar" ? ["data.json"] : ["data.json", long];
        await run("tar", [`--format=${format}`, "-czf", join(dir, "out.tar.gz"), "-C", dir, ...names]);
        const files = readTarGz(await readFile(join(dir, "out.tar.gz")));
        expect(files.get("data.json")?.toString()).toBe('{"a":1}');
        if (format !== "ustar") expect(files.get(long)?.length).toBe(1000);
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("refuses a header whose checksum does not match", async () => {
    const { bundle } = await buildBundle({ policies: [starter], graph: null, graph_version: null });
    const tar = gunzipSync(bundle);
    tar[0] = (tar[0] as number) ^ 1;
    expect(() => readTarGz(gzipSync(tar))).toThrow(/corrupt/);
  });
});
