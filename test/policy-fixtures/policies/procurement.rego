package mandate.policies.procurement

# Generated from a rules document by src/policy/rules.ts.

actions := {"purchase_order_submit"}

results contains object.union(data.mandate.authority.result, {"rule": "authority"}) if {
	input.intent.currency == "USD"
}

results contains {"outcome": "HUMAN_REVIEW", "reason": "foreign_currency_order", "rule": "foreign_currency"} if {
	input.intent.currency in {"EUR", "GBP"}
}
