package payments_test

import data.fixtures_test
import data.mandate.main

payment(who, amount, counterparty, context) := fixtures_test.input_for(who, "vendor_payment", {"amount": amount, "currency": "USD", "counterparty": counterparty, "context": context})

established := {"vendor_age_days": 400, "bank_details_changed": false}

test_clerk_pays_small_invoice if {
	d := main.decision with input as payment("ann", 800, "globex", established)
	d.outcome == "ALLOW"
	d.reason == "within_delegated_authority"
}

test_clerk_needs_one_approval_in_the_middle_band if {
	d := main.decision with input as payment("ann", 4000, "globex", established)
	d.outcome == "HUMAN_REVIEW"
	d.reason == "requires_approval"
}

# Bob's delegation lifts Ann to 20,000 until 2026-12-31; the band then needs two approvals.
test_delegation_lifts_the_clerk_limit if {
	d := main.decision with input as payment("ann", 15000, "globex", established)
	d.outcome == "HUMAN_REVIEW"
	d.reason == "requires_dual_approval"
}

test_delegation_expires if {
	d := main.decision with input as object.union(payment("ann", 15000, "globex", established), {"now": "2027-01-01T09:00:00.000Z"})
	d.outcome == "DENY"
	d.reason == "exceeds_approval_limit"
}

test_cfo_inherits_every_limit_below if {
	d := main.decision with input as payment("dave", 900000, "globex", established)
	d.outcome == "HUMAN_REVIEW"
	d.reason == "requires_dual_approval"
}

test_buyer_holds_no_payment_authority if {
	d := main.decision with input as payment("erin", 10, "globex", established)
	d.outcome == "DENY"
	d.reason == "no_delegated_authority"
}

test_sanctioned_vendor_denied_whatever_the_amount if {
	d := main.decision with input as payment("dave", 5, "acme-shell-co", established)
	d.outcome == "DENY"
	d.reason == "blocked_counterparty"
}

test_new_vendor_goes_to_review if {
	d := main.decision with input as payment("ann", 800, "initech", {"vendor_age_days": 3, "bank_details_changed": false})
	d.outcome == "HUMAN_REVIEW"
	d.reason == "new_vendor_review"
}

test_changed_bank_details_go_to_review if {
	d := main.decision with input as payment("ann", 800, "globex", {"vendor_age_days": 400, "bank_details_changed": true})
	d.outcome == "HUMAN_REVIEW"
	d.reason == "bank_details_changed"
}

# The fail-open case: a vendor age sent as a string must not skip the new-vendor screen.
test_mistyped_vendor_age_is_never_allowed if {
	d := main.decision with input as payment("ann", 800, "initech", {"vendor_age_days": "3", "bank_details_changed": false})
	d.outcome == "HUMAN_REVIEW"
	d.reason == "invalid_policy_input"
}

test_missing_vendor_age_is_never_allowed if {
	d := main.decision with input as payment("ann", 800, "initech", {"bank_details_changed": false})
	d.outcome == "HUMAN_REVIEW"
	d.reason == "invalid_policy_input"
}
