package mandate.policies.payments

# Generated from a rules document by src/policy/rules.ts; src/policy/rules-rego.ts says what each rule means.

actions := {"vendor_payment"}

results contains object.union(data.mandate.authority.result, {"rule": "authority"}) if {
	is_number(input.intent.amount)
	input.intent.amount >= 0
	is_string(input.intent.currency)
}

ok_0 if {
	is_number(input.intent.amount)
	input.intent.amount >= 0
	is_string(input.intent.currency)
}

results contains {"outcome": "HUMAN_REVIEW", "reason": "invalid_policy_input", "rule": "authority", "detail": invalid_0} if {
	not ok_0
}

condition_0_0 := "holds" if {
	is_number(field_0)
	field_0 >= 0
} else := "invalid"

condition_0_1 := "holds" if {
	is_string(field_1)
} else := "invalid"

rule_0 := "fired" if {
	condition_0_0 == "holds"
	condition_0_1 == "holds"
} else := "not_fired" if {
	"fails" in {condition_0_0, condition_0_1}
} else := "invalid"

invalid_0 := {"field": "amount", "operator": "type", "expected": {"type": "number", "minimum": 0}, "actual": field_0} if {
	condition_0_0 == "invalid"
} else := {"field": "currency", "operator": "type", "expected": {"type": "string"}, "actual": field_1} if {
	condition_0_1 == "invalid"
} else := null

failed_0 := {"field": "amount", "operator": "type", "expected": {"type": "number", "minimum": 0}, "actual": field_0} if {
	condition_0_0 == "fails"
} else := {"field": "currency", "operator": "type", "expected": {"type": "string"}, "actual": field_1} if {
	condition_0_1 == "fails"
} else := null

explain_0 := {"policy_key": "payments", "rule_id": "authority", "fired": true, "outcome": data.mandate.authority.result.outcome, "reason": data.mandate.authority.result.reason, "failed_condition": null, "line": 0} if {
	rule_0 == "fired"
} else := {"policy_key": "payments", "rule_id": "authority", "fired": true, "outcome": "HUMAN_REVIEW", "reason": "invalid_policy_input", "failed_condition": invalid_0, "line": 0} if {
	rule_0 == "invalid"
} else := {"policy_key": "payments", "rule_id": "authority", "fired": false, "outcome": null, "reason": null, "failed_condition": failed_0, "line": 0}

explain := [explain_0]

# amount
default field_0 := null

field_0 := input.intent.amount

# currency
default field_1 := null

field_1 := input.intent.currency
