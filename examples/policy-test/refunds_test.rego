package refunds_test

import data.fixtures_test
import data.mandate.main

refund(who, amount, currency, resource, context) := fixtures_test.input_for(who, "refund.issue", {"amount": amount, "currency": currency, "resource": resource, "context": context})

test_small_refund_by_an_agent if {
	d := main.decision with input as refund("frank", 80, "USD", "card/4242", {"order_id": "o-1", "order_age_days": 10})
	d.outcome == "ALLOW"
	d.reason == "within_delegated_authority"
}

test_refund_over_the_agent_limit_denied if {
	d := main.decision with input as refund("frank", 800, "USD", "card/4242", {"order_id": "o-1", "order_age_days": 10})
	d.outcome == "DENY"
	d.reason == "exceeds_approval_limit"
}

test_lead_refund_needs_approval if {
	d := main.decision with input as refund("gina", 800, "USD", "card/4242", {"order_id": "o-1", "order_age_days": 10})
	d.outcome == "HUMAN_REVIEW"
	d.reason == "requires_approval"
}

test_refund_without_an_order_denied if {
	d := main.decision with input as refund("frank", 80, "USD", "card/4242", {"order_age_days": 10})
	d.outcome == "DENY"
	d.reason == "missing_order_reference"
}

test_refund_after_ninety_days_denied if {
	d := main.decision with input as refund("frank", 80, "USD", "card/4242", {"order_id": "o-1", "order_age_days": 120})
	d.outcome == "DENY"
	d.reason == "refund_window_closed"
}

test_foreign_currency_refund_reviewed if {
	d := main.decision with input as refund("frank", 80, "EUR", "card/4242", {"order_id": "o-1", "order_age_days": 10})
	d.outcome == "HUMAN_REVIEW"
	d.reason == "foreign_currency_refund"
}

# Two results share the winning outcome ALLOW: the decision's reason is the
# lexicographically smallest, small_store_credit < within_delegated_authority.
test_small_store_credit_allowed if {
	d := main.decision with input as refund("frank", 40, "USD", "store-credit/c-9", {"order_id": "o-1", "order_age_days": 10})
	d.outcome == "ALLOW"
	d.reason == "small_store_credit"
}

test_store_credit_above_the_small_amount_follows_the_graph if {
	d := main.decision with input as refund("frank", 80, "USD", "store-credit/c-9", {"order_id": "o-1", "order_age_days": 10})
	d.outcome == "ALLOW"
	d.reason == "within_delegated_authority"
}
