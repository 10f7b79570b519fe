# Production deploys requested by release agents, written by hand in Rego. Only
# built-ins publishing allows may appear (README, Writing policies): the date comes
# from input.now, which the service supplies, never from a clock read in the policy.
package mandate.policies.deploys

actions := {"deploy.production"}

# The year-end change freeze, inclusive, as UTC dates.
freeze := {"from": "2026-12-19", "until": "2027-01-04"}

results contains {"outcome": "DENY", "reason": "change_freeze", "rule": "change_freeze"} if {
	today := substring(input.now, 0, 10)
	today >= freeze.from
	today <= freeze.until
}

results contains {"outcome": "DENY", "reason": "tests_not_passed", "rule": "tests_passed"} if {
	not input.intent.context.tests_passed == true
}

results contains {"outcome": "HUMAN_REVIEW", "reason": "change_ticket_required", "rule": "change_ticket"} if {
	not regex.match(`^CHG-[0-9]+$`, object.get(input.intent, ["context", "change_ticket"], ""))
}

results contains {"outcome": "ALLOW", "reason": "deploy_within_policy", "rule": "deploy"} if {
	startswith(input.intent.resource, "service/")
}
