import { readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { buildBundle, type BuiltBundle } from "../../../src/policy/build.js";
import { PolicyEngine } from "../../../src/policy/engine.js";
import { projectRoot, runOpa } from "../../../src/policy/opa.js";
import {
  FIXTURE_DIR,
  fixtureGraph,
  fixturePolicies,
  generatedFiles,
  inputFor,
  loadAuthorityFixture,
} from "../../policy-fixtures/fixture.js";

const fixture = loadAuthorityFixture();

describe("the authority table (test/policy-fixtures/authority-cases.json)", () => {
  let built: BuiltBundle;
  // What is decided, not how fast: the time limit has its own tests, and a loaded machine must not trip it.
  const engine = new PolicyEngine({ timeoutMs: 60_000 });

  beforeAll(async () => {
    built = await buildBundle({
      policies: [...fixturePolicies(fixture)].map(([policy_key, rego]) => ({ policy_key, version: 1, rego })),
      graph: fixtureGraph(fixture),
      graph_version: fixture.graph_version,
    });
    await engine.load(built.digest, built.bundle);
  });

  it("has at least 40 cases", () => {
    expect(fixture.cases.length).toBeGreaterThanOrEqual(40);
  });

  it("has current generated files (else run: npx tsx test/policy-fixtures/generate.ts)", () => {
    for (const [path, content] of generatedFiles(fixture)) {
      expect(readFileSync(join(FIXTURE_DIR, path), "utf8"), path).toBe(content);
    }
  });

  it("passes as opa test cases, with the library's own tests", async () => {
    const run = await runOpa(["test", "--fail-on-empty", "--format", "json", "policies/", "test/policy-fixtures/"], {
      cwd: projectRoot(),
    });
    type SubResult = { fail?: boolean };
    const results = JSON.parse(run.stdout) as { name: string; fail?: boolean; error?: unknown; sub_results?: Record<string, SubResult> }[];
    const failed = results.flatMap((r) => [
      ...(r.fail || r.error ? [r.name] : []),
      ...Object.entries(r.sub_results ?? {}).flatMap(([sub, s]) => (s.fail ? [`${r.name}: ${sub}`] : [])),
    ]);
    expect(failed).toEqual([]);
    expect(run.code).toBe(0);
    const table = results.find((r) => r.name === "test_authority_cases");
    expect(Object.keys(table?.sub_results ?? {}).length).toBe(fixture.cases.length);
  });

  it.each(fixture.cases.map((c) => [c.name, c] as const))("decides in WebAssembly: %s", (_name, c) => {
    const decision = engine.evaluate(built.digest, inputFor(c));
    expect({ outcome: decision.outcome, reason: decision.reason }).toEqual(c.expected);
  });

  it("explains an authority decision in the trace", () => {
    const c = fixture.cases.find((x) => x.name === "chained delegate capped by what the holder still holds")!;
    const { trace } = engine.evaluate(built.digest, inputFor(c));
    expect(trace).toEqual([
      {
        policy: "payments",
        rule: "authority",
        outcome: "HUMAN_REVIEW",
        reason: "requires_approval",
        detail: { limit: 5000, via: ["E700", "E900"], band: { up_to_amount: 10000, approvals_required: 1 } },
      },
      { policy: "sanctions", rule: null, outcome: null, reason: null, detail: null },
    ]);
  });

  it("gives the same answer to the same input 10,000 times", () => {
    const c = fixture.cases.find((x) => x.name === "two reviews give the smallest reason")!;
    const input = inputFor(c);
    const first = JSON.stringify(engine.evaluate(built.digest, input));
    let differing = 0;
    for (let i = 0; i < 10_000; i++) {
      if (JSON.stringify(engine.evaluate(built.digest, input)) !== first) differing++;
    }
    expect(differing).toBe(0);
  });

  it("builds the same bytes from the same inputs", async () => {
    const again = await buildBundle({
      policies: [...fixturePolicies(fixture)].map(([policy_key, rego]) => ({ policy_key, version: 1, rego })),
      graph: fixtureGraph(fixture),
      graph_version: fixture.graph_version,
    });
    expect(again.digest).toBe(built.digest);
  });
});
