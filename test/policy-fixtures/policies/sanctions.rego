package mandate.policies.sanctions

# Generated from a rules document by src/policy/rules.ts.

actions := {"purchase_order_submit", "vendor_payment"}

results contains {"outcome": "DENY", "reason": "counterparty_blocked", "rule": "blocked_counterparty"} if {
	input.intent.counterparty in {"acme_shell_co", "globex_sanctioned"}
}

results contains {"outcome": "HUMAN_REVIEW", "reason": "new_vendor_review", "rule": "new_vendor"} if {
	input.intent.context.vendor_status == "new"
	is_number(input.intent.amount)
	input.intent.amount >= 500
}
