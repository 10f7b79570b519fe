import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { DecisionInput, IntentInput } from "../../src/policy/engine.js";
import { dispatchModule, DISPATCH_FILE } from "../../src/policy/build.js";
import { validateGraph } from "../../src/policy/graph-checks.js";
import type { AuthorityGraph } from "../../src/policy/graph-types.js";
import { indexGraph } from "../../src/policy/graph-index.js";
import { STARTER_POLICY_KEY, STARTER_RULES, compileRules, type Outcome, type RulesDocument } from "../../src/policy/rules.js";

/** One row of the authority table: who acts, what, when, and the decision expected. */
export interface AuthorityCase {
  name: string;
  principal_ref: string | null;
  now: string;
  intent: Partial<IntentInput> & { action: string };
  expected: { outcome: Outcome; reason: string };
}

/** The shared fixture, as authored in authority-cases.json (loaded by opa test at data.fixtures.authority_cases). */
export interface AuthorityFixture {
  graph_version: number;
  principal_refs: string[];
  graph: unknown;
  policies: Record<string, RulesDocument>;
  cases: AuthorityCase[];
}

/** This folder, which `opa test policies/ test/policy-fixtures/` loads. */
export const FIXTURE_DIR = dirname(fileURLToPath(import.meta.url));

/** Reads the authority fixture. */
export function loadAuthorityFixture(): AuthorityFixture {
  const file = JSON.parse(readFileSync(join(FIXTURE_DIR, "authority-cases.json"), "utf8")) as {
    fixtures: { authority_cases: AuthorityFixture };
  };
  return file.fixtures.authority_cases;
}

/** The fixture graph, validated as the service would validate it. */
export function fixtureGraph(fixture: AuthorityFixture): AuthorityGraph {
  const result = validateGraph(fixture.graph, new Set(fixture.principal_refs));
  if (!result.ok) throw new Error(`the fixture graph is invalid: ${JSON.stringify(result.errors)}`);
  return result.graph;
}

/** The fixture's runtime policies (plus the starter policy) compiled to Rego, by policy key. */
export function fixturePolicies(fixture: AuthorityFixture): Map<string, string> {
  const documents = { [STARTER_POLICY_KEY]: STARTER_RULES, ...fixture.policies };
  return new Map(Object.entries(documents).map(([key, doc]) => [key, compileRules(key, doc)]));
}

/**
 * The files generate.ts writes so that opa test sees what a bundle would hold: the graph
 * index (data.fixtures.authority_index) and each compiled policy. A unit test fails when
 * they are stale.
 */
export function generatedFiles(fixture: AuthorityFixture): Map<string, string> {
  const index = indexGraph(fixtureGraph(fixture), fixture.graph_version);
  const files = new Map<string, string>([
    ["authority-index.json", JSON.stringify({ fixtures: { authority_index: index } }, null, 2) + "\n"],
  ]);
  for (const [key, rego] of fixturePolicies(fixture)) files.set(join("policies", `${key}.rego`), rego);
  // The library reaches policies through the dispatch module each bundle gets (src/policy/build.ts).
  const documents = { [STARTER_POLICY_KEY]: STARTER_RULES, ...fixture.policies };
  files.set(join("policies", DISPATCH_FILE), dispatchModule(Object.entries(documents).map(([policy_key, doc]) => ({ policy_key, actions: doc.actions }))));
  return files;
}

/** The decision input for a case; authority_cases_test.rego builds the same document. */
export function inputFor(c: AuthorityCase): DecisionInput {
  return {
    intent: { agent_id: "agt_fixture", requested_at: c.now, nonce: c.name, ...c.intent },
    agent: { agent_id: "agt_fixture", state: "active" },
    principal: { principal_id: "prn_fixture", external_ref: c.principal_ref, kind: "person" },
    now: c.now,
  };
}
