package mandate.policies.reports

# Generated from a rules document by src/policy/rules.ts; src/policy/rules-rego.ts says what each rule means.

actions := {"report_export"}

results contains {"outcome": "ALLOW", "reason": "internal_report", "rule": "internal_only"} if {
	is_string(input.intent.resource)
	input.intent.resource == "report:internal"
}

ok_0 if {
	is_string(input.intent.resource)
}

fails_0 if {
	is_string(input.intent.resource)
	input.intent.resource != "report:internal"
}

results contains {"outcome": "HUMAN_REVIEW", "reason": "invalid_policy_input", "rule": "internal_only", "detail": invalid_0} if {
	not ok_0
	not fails_0
}

condition_0_0 := "invalid" if {
	field_0 == null
} else := "holds" if {
	is_string(field_0)
	field_0 == "report:internal"
} else := "fails" if {
	is_string(field_0)
} else := "invalid"

rule_0 := "fired" if {
	condition_0_0 == "holds"
} else := "not_fired" if {
	condition_0_0 == "fails"
} else := "invalid"

invalid_0 := {"field": "resource", "operator": "eq", "expected": "report:internal", "actual": field_0} if {
	condition_0_0 == "invalid"
} else := null

failed_0 := {"field": "resource", "operator": "eq", "expected": "report:internal", "actual": field_0} if {
	condition_0_0 == "fails"
} else := null

explain_0 := {"policy_key": "reports", "rule_id": "internal_only", "fired": true, "outcome": "ALLOW", "reason": "internal_report", "failed_condition": null, "line": 0} if {
	rule_0 == "fired"
} else := {"policy_key": "reports", "rule_id": "internal_only", "fired": true, "outcome": "HUMAN_REVIEW", "reason": "invalid_policy_input", "failed_condition": invalid_0, "line": 0} if {
	rule_0 == "invalid"
} else := {"policy_key": "reports", "rule_id": "internal_only", "fired": false, "outcome": null, "reason": null, "failed_condition": failed_0, "line": 0}

explain := [explain_0]

# resource
default field_0 := null

field_0 := input.intent.resource
