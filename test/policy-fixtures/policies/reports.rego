package mandate.policies.reports

# Generated from a rules document by src/policy/rules.ts.

actions := {"report_export"}

results contains {"outcome": "ALLOW", "reason": "internal_report", "rule": "internal_only"} if {
	input.intent.resource == "report:internal"
}
