# Inputs shaped as the service builds them (docs/architecture.md, Policies): the Intent
# as signed, the agent, the principal the agent acts for, and the evaluation time.
package fixtures_test

now := "2026-11-25T10:00:00.000Z"

# An Intent of `action` by an agent acting for the principal with external_ref `who`;
# `fields` are merged into the Intent (amount, currency, counterparty, resource, context).
input_for(who, action, fields) := {
	"intent": object.union({"agent_id": "agt_1", "action": action, "requested_at": now, "nonce": "n1"}, fields),
	"agent": {"agent_id": "agt_1", "state": "active"},
	"principal": {"principal_id": "prn_1", "external_ref": who, "kind": "person"},
	"now": now,
}

at(input_doc, now_at) := object.union(input_doc, {"now": now_at})
