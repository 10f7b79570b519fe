package mandate.policies.procurement

# Generated from a rules document by src/policy/rules.ts; src/policy/rules-rego.ts says what each rule means.

actions := {"purchase_order_submit"}

results contains object.union(data.mandate.authority.result, {"rule": "authority"}) if {
	is_string(input.intent.currency)
	input.intent.currency == "USD"
	is_number(input.intent.amount)
	input.intent.amount >= 0
	is_string(input.intent.currency)
}

ok_0 if {
	is_string(input.intent.currency)
	is_number(input.intent.amount)
	input.intent.amount >= 0
	is_string(input.intent.currency)
}

fails_0 if {
	is_string(input.intent.currency)
	input.intent.currency != "USD"
}

results contains {"outcome": "HUMAN_REVIEW", "reason": "invalid_policy_input", "rule": "authority", "detail": invalid_0} if {
	not ok_0
	not fails_0
}

condition_0_0 := "invalid" if {
	field_0 == null
} else := "holds" if {
	is_string(field_0)
	field_0 == "USD"
} else := "fails" if {
	is_string(field_0)
} else := "invalid"

condition_0_1 := "holds" if {
	is_number(field_1)
	field_1 >= 0
} else := "invalid"

condition_0_2 := "holds" if {
	is_string(field_0)
} else := "invalid"

rule_0 := "fired" if {
	condition_0_0 == "holds"
	condition_0_1 == "holds"
	condition_0_2 == "holds"
} else := "not_fired" if {
	"fails" in {condition_0_0, condition_0_1, condition_0_2}
} else := "invalid"

invalid_0 := {"field": "currency", "operator": "eq", "expected": "USD", "actual": field_0} if {
	condition_0_0 == "invalid"
} else := {"field": "amount", "operator": "type", "expected": {"type": "number", "minimum": 0}, "actual": field_1} if {
	condition_0_1 == "invalid"
} else := {"field": "currency", "operator": "type", "expected": {"type": "string"}, "actual": field_0} if {
	condition_0_2 == "invalid"
} else := null

failed_0 := {"field": "currency", "operator": "eq", "expected": "USD", "actual": field_0} if {
	condition_0_0 == "fails"
} else := {"field": "amount", "operator": "type", "expected": {"type": "number", "minimum": 0}, "actual": field_1} if {
	condition_0_1 == "fails"
} else := {"field": "currency", "operator": "type", "expected": {"type": "string"}, "actual": field_0} if {
	condition_0_2 == "fails"
} else := null

explain_0 := {"policy_key": "procurement", "rule_id": "authority", "fired": true, "outcome": data.mandate.authority.result.outcome, "reason": data.mandate.authority.result.reason, "failed_condition": null, "line": 0} if {
	rule_0 == "fired"
} else := {"policy_key": "procurement", "rule_id": "authority", "fired": true, "outcome": "HUMAN_REVIEW", "reason": "invalid_policy_input", "failed_condition": invalid_0, "line": 0} if {
	rule_0 == "invalid"
} else := {"policy_key": "procurement", "rule_id": "authority", "fired": false, "outcome": null, "reason": null, "failed_condition": failed_0, "line": 0}

results contains {"outcome": "HUMAN_REVIEW", "reason": "foreign_currency_order", "rule": "foreign_currency"} if {
	is_string(input.intent.currency)
	input.intent.currency in {"EUR", "GBP"}
}

ok_1 if {
	is_string(input.intent.currency)
}

fails_1 if {
	is_string(input.intent.currency)
	not input.intent.currency in {"EUR", "GBP"}
}

results contains {"outcome": "HUMAN_REVIEW", "reason": "invalid_policy_input", "rule": "foreign_currency", "detail": invalid_1} if {
	not ok_1
	not fails_1
}

condition_1_0 := "invalid" if {
	field_0 == null
} else := "holds" if {
	is_string(field_0)
	field_0 in {"EUR", "GBP"}
} else := "fails" if {
	is_string(field_0)
} else := "invalid"

rule_1 := "fired" if {
	condition_1_0 == "holds"
} else := "not_fired" if {
	condition_1_0 == "fails"
} else := "invalid"

invalid_1 := {"field": "currency", "operator": "in", "expected": ["EUR", "GBP"], "actual": field_0} if {
	condition_1_0 == "invalid"
} else := null

failed_1 := {"field": "currency", "operator": "in", "expected": ["EUR", "GBP"], "actual": field_0} if {
	condition_1_0 == "fails"
} else := null

explain_1 := {"policy_key": "procurement", "rule_id": "foreign_currency", "fired": true, "outcome": "HUMAN_REVIEW", "reason": "foreign_currency_order", "failed_condition": null, "line": 0} if {
	rule_1 == "fired"
} else := {"policy_key": "procurement", "rule_id": "foreign_currency", "fired": true, "outcome": "HUMAN_REVIEW", "reason": "invalid_policy_input", "failed_condition": invalid_1, "line": 0} if {
	rule_1 == "invalid"
} else := {"policy_key": "procurement", "rule_id": "foreign_currency", "fired": false, "outcome": null, "reason": null, "failed_condition": failed_1, "line": 0}

explain := [explain_0, explain_1]

# currency
default field_0 := null

field_0 := input.intent.currency

# amount
default field_1 := null

field_1 := input.intent.amount
