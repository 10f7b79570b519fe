package deploys_test

import data.fixtures_test
import data.mandate.main

deploy(context) := fixtures_test.input_for("grace", "deploy.production", {"resource": "service/payments-api", "context": context})

test_deploy_with_ticket_and_green_tests if {
	d := main.decision with input as deploy({"tests_passed": true, "change_ticket": "CHG-1042"})
	d.outcome == "ALLOW"
	d.reason == "deploy_within_policy"
}

test_deploy_without_ticket_reviewed if {
	d := main.decision with input as deploy({"tests_passed": true})
	d.outcome == "HUMAN_REVIEW"
	d.reason == "change_ticket_required"
}

test_red_tests_denied if {
	d := main.decision with input as deploy({"tests_passed": false, "change_ticket": "CHG-1042"})
	d.outcome == "DENY"
	d.reason == "tests_not_passed"
}

test_change_freeze_denied if {
	d := main.decision with input as fixtures_test.at(deploy({"tests_passed": true, "change_ticket": "CHG-1042"}), "2026-12-24T12:00:00.000Z")
	d.outcome == "DENY"
	d.reason == "change_freeze"
}
