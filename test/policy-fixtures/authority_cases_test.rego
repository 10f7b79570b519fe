# The authority table of authority-cases.json, decided by the library and the fixture's
# compiled policies (policies/*.rego here, written by generate.ts) against the fixture's
# graph index. test/unit/policy/authority-cases.test.ts runs the same table through
# buildBundle and the WebAssembly engine.
package authority_cases_test

import data.fixtures.authority_cases as fixture
import data.mandate.main

# Mirrors inputFor in fixture.ts.
input_for(c) := {
	"intent": object.union({"agent_id": "agt_fixture", "requested_at": c.now, "nonce": c.name}, c.intent),
	"agent": {"agent_id": "agt_fixture", "state": "active"},
	"principal": {"principal_id": "prn_fixture", "external_ref": c.principal_ref, "kind": "person"},
	"now": c.now,
}

test_authority_cases[c.name] if {
	some c in fixture.cases
	d := main.decision with input as input_for(c) with data.mandate.graph_index as data.fixtures.authority_index
	[d.outcome, d.reason] == [c.expected.outcome, c.expected.reason]
}
