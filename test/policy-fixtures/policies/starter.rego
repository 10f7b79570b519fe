package mandate.policies.starter

# Generated from a rules document by src/policy/rules.ts.

actions := {"reference_noop"}

results contains {"outcome": "ALLOW", "reason": "starter_reference_action", "rule": "reference_noop"}
