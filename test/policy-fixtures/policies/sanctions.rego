package mandate.policies.sanctions

# Generated from a rules document by src/policy/rules.ts; src/policy/rules-rego.ts says what each rule means.

actions := {"purchase_order_submit", "vendor_payment"}

results contains {"outcome": "DENY", "reason": "counterparty_blocked", "rule": "blocked_counterparty"} if {
	field_0 != null
	is_string(input.intent.counterparty)
	input.intent.counterparty in {"acme_shell_co", "globex_sanctioned"}
}

ok_0 if {
	is_string(input.intent.counterparty)
}

fails_0 if {
	field_0 == null
}

fails_0 if {
	is_string(input.intent.counterparty)
	not input.intent.counterparty in {"acme_shell_co", "globex_sanctioned"}
}

results contains {"outcome": "HUMAN_REVIEW", "reason": "invalid_policy_input", "rule": "blocked_counterparty", "detail": invalid_0} if {
	not ok_0
	not fails_0
}

condition_0_0 := "holds" if {
	field_0 != null
} else := "fails"

condition_0_1 := "invalid" if {
	field_0 == null
} else := "holds" if {
	is_string(field_0)
	field_0 in {"acme_shell_co", "globex_sanctioned"}
} else := "fails" if {
	is_string(field_0)
} else := "invalid"

rule_0 := "fired" if {
	condition_0_0 == "holds"
	condition_0_1 == "holds"
} else := "not_fired" if {
	"fails" in {condition_0_0, condition_0_1}
} else := "invalid"

invalid_0 := {"field": "counterparty", "operator": "exists", "expected": true, "actual": field_0} if {
	condition_0_0 == "invalid"
} else := {"field": "counterparty", "operator": "in", "expected": ["acme_shell_co", "globex_sanctioned"], "actual": field_0} if {
	condition_0_1 == "invalid"
} else := null

failed_0 := {"field": "counterparty", "operator": "exists", "expected": true, "actual": field_0} if {
	condition_0_0 == "fails"
} else := {"field": "counterparty", "operator": "in", "expected": ["acme_shell_co", "globex_sanctioned"], "actual": field_0} if {
	condition_0_1 == "fails"
} else := null

explain_0 := {"policy_key": "sanctions", "rule_id": "blocked_counterparty", "fired": true, "outcome": "DENY", "reason": "counterparty_blocked", "failed_condition": null, "line": 0} if {
	rule_0 == "fired"
} else := {"policy_key": "sanctions", "rule_id": "blocked_counterparty", "fired": true, "outcome": "HUMAN_REVIEW", "reason": "invalid_policy_input", "failed_condition": invalid_0, "line": 0} if {
	rule_0 == "invalid"
} else := {"policy_key": "sanctions", "rule_id": "blocked_counterparty", "fired": false, "outcome": null, "reason": null, "failed_condition": failed_0, "line": 0}

results contains {"outcome": "HUMAN_REVIEW", "reason": "new_vendor_review", "rule": "new_vendor"} if {
	field_1 != null
	is_string(input.intent.context.vendor_status)
	input.intent.context.vendor_status == "new"
	is_number(input.intent.amount)
	input.intent.amount >= 500
}

ok_1 if {
	is_string(input.intent.context.vendor_status)
	is_number(input.intent.amount)
}

fails_1 if {
	field_1 == null
}

fails_1 if {
	is_string(input.intent.context.vendor_status)
	input.intent.context.vendor_status != "new"
}

fails_1 if {
	is_number(input.intent.amount)
	input.intent.amount < 500
}

results contains {"outcome": "HUMAN_REVIEW", "reason": "invalid_policy_input", "rule": "new_vendor", "detail": invalid_1} if {
	not ok_1
	not fails_1
}

condition_1_0 := "holds" if {
	field_1 != null
} else := "fails"

condition_1_1 := "invalid" if {
	field_1 == null
} else := "holds" if {
	is_string(field_1)
	field_1 == "new"
} else := "fails" if {
	is_string(field_1)
} else := "invalid"

condition_1_2 := "invalid" if {
	field_2 == null
} else := "holds" if {
	is_number(field_2)
	field_2 >= 500
} else := "fails" if {
	is_number(field_2)
} else := "invalid"

rule_1 := "fired" if {
	condition_1_0 == "holds"
	condition_1_1 == "holds"
	condition_1_2 == "holds"
} else := "not_fired" if {
	"fails" in {condition_1_0, condition_1_1, condition_1_2}
} else := "invalid"

invalid_1 := {"field": "context.vendor_status", "operator": "exists", "expected": true, "actual": field_1} if {
	condition_1_0 == "invalid"
} else := {"field": "context.vendor_status", "operator": "eq", "expected": "new", "actual": field_1} if {
	condition_1_1 == "invalid"
} else := {"field": "amount", "operator": "gte", "expected": 500, "actual": field_2} if {
	condition_1_2 == "invalid"
} else := null

failed_1 := {"field": "context.vendor_status", "operator": "exists", "expected": true, "actual": field_1} if {
	condition_1_0 == "fails"
} else := {"field": "context.vendor_status", "operator": "eq", "expected": "new", "actual": field_1} if {
	condition_1_1 == "fails"
} else := {"field": "amount", "operator": "gte", "expected": 500, "actual": field_2} if {
	condition_1_2 == "fails"
} else := null

explain_1 := {"policy_key": "sanctions", "rule_id": "new_vendor", "fired": true, "outcome": "HUMAN_REVIEW", "reason": "new_vendor_review", "failed_condition": null, "line": 0} if {
	rule_1 == "fired"
} else := {"policy_key": "sanctions", "rule_id": "new_vendor", "fired": true, "outcome": "HUMAN_REVIEW", "reason": "invalid_policy_input", "failed_condition": invalid_1, "line": 0} if {
	rule_1 == "invalid"
} else := {"policy_key": "sanctions", "rule_id": "new_vendor", "fired": false, "outcome": null, "reason": null, "failed_condition": failed_1, "line": 0}

explain := [explain_0, explain_1]

# counterparty
default field_0 := null

field_0 := input.intent.counterparty

# context.vendor_status
default field_1 := null

field_1 := input.intent.context.vendor_status

# amount
default field_2 := null

field_2 := input.intent.amount
