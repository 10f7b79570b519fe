package mandate.authority_test

import data.mandate.authority

# A hand-written index in the shape src/policy/graph-index.ts produces.
index := {
	"version": 7,
	"authority": {
		"alice": {"vendor_payment": {
			"USD": [{"max_amount": 10000, "valid_until": null, "via": ["role:cfo", "alice"]}],
			"EUR": [{"max_amount": 500, "valid_until": null, "via": ["alice"]}],
		}},
		# A larger grant that expires, under a smaller one that does not.
		"bob": {"vendor_payment": {"USD": [
			{"max_amount": 8000, "valid_until": "2026-06-30", "via": ["role:cfo", "alice", "bob"]},
			{"max_amount": 1500, "valid_until": null, "via": ["role:clerk", "bob"]},
		]}},
		# Only an expiring grant.
		"carol": {"vendor_payment": {"USD": [{"max_amount": 3000, "valid_until": "2026-03-31", "via": ["alice", "carol"]}]}},
	},
	"bands": {"vendor_payment": {"USD": [
		{"up_to_amount": 1000, "approvals_required": 0},
		{"up_to_amount": 5000, "approvals_required": 1},
		{"up_to_amount": 9000, "approvals_required": 2},
	]}},
}

now := "2026-01-15T12:00:00.000Z"

# name -> [principal ref, action, amount, currency, now, expected outcome, expected reason]
cases := {
	"band of zero approvals": ["alice", "vendor_payment", 500, "USD", now, "ALLOW", "within_delegated_authority"],
	"upper boundary of the zero band": ["alice", "vendor_payment", 1000, "USD", now, "ALLOW", "within_delegated_authority"],
	"band of one approval": ["alice", "vendor_payment", 1000.01, "USD", now, "HUMAN_REVIEW", "requires_approval"],
	"upper boundary of the one band": ["alice", "vendor_payment", 5000, "USD", now, "HUMAN_REVIEW", "requires_approval"],
	"band of two approvals": ["alice", "vendor_payment", 9000, "USD", now, "HUMAN_REVIEW", "requires_dual_approval"],
	"within the limit, above every band": ["alice", "vendor_payment", 9500, "USD", now, "DENY", "exceeds_approval_limit"],
	"exactly the limit": ["bob", "vendor_payment", 8000, "USD", now, "HUMAN_REVIEW", "requires_dual_approval"],
	"above the limit": ["alice", "vendor_payment", 10000.5, "USD", now, "DENY", "exceeds_approval_limit"],
	"zero amount": ["alice", "vendor_payment", 0, "USD", now, "ALLOW", "within_delegated_authority"],
	"no matrix rows for the currency": ["alice", "vendor_payment", 500, "EUR", now, "ALLOW", "within_delegated_authority"],
	"above the limit with no matrix rows": ["alice", "vendor_payment", 501, "EUR", now, "DENY", "exceeds_approval_limit"],
	"currency without authority": ["alice", "vendor_payment", 1, "GBP", now, "DENY", "no_delegated_authority"],
	"action without authority": ["alice", "wire_transfer", 1, "USD", now, "DENY", "no_delegated_authority"],
	"unknown principal": ["mallory", "vendor_payment", 1, "USD", now, "DENY", "no_delegated_authority"],
	"expiring grant on its last day": ["bob", "vendor_payment", 7000, "USD", "2026-06-30T23:59:59.999Z", "HUMAN_REVIEW", "requires_dual_approval"],
	"expiring grant the day after": ["bob", "vendor_payment", 7000, "USD", "2026-07-01T00:00:00.000Z", "DENY", "exceeds_approval_limit"],
	"lasting grant after the other expired": ["bob", "vendor_payment", 1500, "USD", "2027-01-01T00:00:00.000Z", "HUMAN_REVIEW", "requires_approval"],
	"only grant expired": ["carol", "vendor_payment", 10, "USD", "2026-04-01T00:00:00.000Z", "DENY", "no_delegated_authority"],
	"missing now keeps only lasting grants": ["bob", "vendor_payment", 7000, "USD", null, "DENY", "exceeds_approval_limit"],
}

input_for(c) := {
	"intent": {"agent_id": "agt_1", "action": c[1], "amount": c[2], "currency": c[3], "requested_at": now, "nonce": "n"},
	"agent": {"agent_id": "agt_1", "state": "active"},
	"principal": {"principal_id": "prn_1", "external_ref": c[0], "kind": "person"},
	"now": c[4],
}

test_result[name] if {
	some name, c in cases
	r := authority.result with input as input_for(c) with data.mandate.graph_index as index
	[r.outcome, r.reason] == [c[5], c[6]]
}

test_detail_names_the_limit_its_chain_and_the_band if {
	r := authority.result with input as input_for(cases["band of one approval"]) with data.mandate.graph_index as index
	r.detail == {
		"limit": 10000,
		"via": ["role:cfo", "alice"],
		"band": {"up_to_amount": 5000, "approvals_required": 1},
	}
}

test_detail_without_authority_is_empty if {
	r := authority.result with input as input_for(cases["unknown principal"]) with data.mandate.graph_index as index
	r.detail == {"limit": null, "via": null, "band": null}
}

test_no_graph_means_no_authority if {
	r := authority.result with input as input_for(cases["band of zero approvals"])
	[r.outcome, r.reason] == ["DENY", "no_delegated_authority"]
}

# name -> intent fields that make an intent impossible to check against the graph
not_checkable := {
	"no amount": {"action": "vendor_payment", "currency": "USD"},
	"no currency": {"action": "vendor_payment", "amount": 5},
	"amount as a string": {"action": "vendor_payment", "amount": "5", "currency": "USD"},
	"negative amount": {"action": "vendor_payment", "amount": -5, "currency": "USD"},
	"currency as a number": {"action": "vendor_payment", "amount": 5, "currency": 840},
}

test_not_checkable[name] if {
	some name, intent in not_checkable
	principal := {"principal_id": "prn_1", "external_ref": "alice", "kind": "person"}
	not authority.result with input as {"intent": intent, "principal": principal, "now": now}
		with data.mandate.graph_index as index
}

test_approvals_above_two_need_dual_approval if {
	three := {"bands": {"vendor_payment": {"USD": [{"up_to_amount": 20000, "approvals_required": 3}]}}}
	r := authority.result with input as input_for(cases["band of zero approvals"])
		with data.mandate.graph_index as object.union(index, three)
	[r.outcome, r.reason] == ["HUMAN_REVIEW", "requires_dual_approval"]
}
