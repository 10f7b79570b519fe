import { buildBundle, PolicyEngine } from "./src/policy/index.js";
import { fixtureGraph, fixturePolicies, inputFor, loadAuthorityFixture } from "./test/policy-fixtures/fixture.js";
const fixture = loadAuthorityFixture();
const built = await buildBundle({ policies: [...fixturePolicies(fixture)].map(([policy_key, rego]) => ({ policy_key, version: 1, rego })), graph: fixtureGraph(fixture), graph_version: 1 });
const e = new PolicyEngine(); await e.load(built.digest, built.bundle);
for (const name of ["chained delegate capped by what the holder still holds", "authority check without an amount", "covering policy with no matching rule"]) {
const c = fixture.cases.find((x) => x.name === name)!;
console.log(JSON.stringify(e.evaluate(built.digest, inputFor(c))));
}
import { writeFileSync } from "node:fs"; writeFileSync("/tmp/opaexp/fx.tar.gz", built.bundle);
const c = fixture.cases.find((x) => x.name === "chained delegate capped by what the holder still holds")!;
writeFileSync("/tmp/opaexp/fx-input.json", JSON.stringify(inputFor(c)));
