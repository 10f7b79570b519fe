package payments_test

import data.mandate.main

input_for(amount, counterparty) := {
	"intent": {"agent_id": "agt_1", "action": "vendor_payment", "amount": amount, "currency": "USD", "counterparty": counterparty, "requested_at": "2026-11-25T10:00:00.000Z", "nonce": "n"},
	"agent": {"agent_id": "agt_1", "state": "active"},
	"principal": {"principal_id": "prn_1", "external_ref": "ann", "kind": "person"},
	"now": "2026-11-25T10:00:00.000Z",
}

test_small_payment_allowed if {
	d := main.decision with input as input_for(50, "acme")
	d.outcome == "ALLOW"
	d.reason == "within_delegated_authority"
}

test_large_payment_needs_two_approvals if {
	d := main.decision with input as input_for(900, "acme")
	d.outcome == "HUMAN_REVIEW"
	d.reason == "requires_dual_approval"
}

test_blocked_vendor_denied if {
	d := main.decision with input as input_for(50, "acme-shell-co")
	d.outcome == "DENY"
	d.reason == "blocked_counterparty"
}
