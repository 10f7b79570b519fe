package mandate.policies.starter

# Generated from a rules document by src/policy/rules.ts; src/policy/rules-rego.ts says what each rule means.

actions := {"reference_noop"}

results contains {"outcome": "ALLOW", "reason": "starter_reference_action", "rule": "reference_noop"}

explain_0 := {"policy_key": "starter", "rule_id": "reference_noop", "fired": true, "outcome": "ALLOW", "reason": "starter_reference_action", "failed_condition": null, "line": 0}

explain := [explain_0]
