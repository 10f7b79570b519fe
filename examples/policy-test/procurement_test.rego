package procurement_test

import data.fixtures_test
import data.mandate.main

order(who, amount, context) := fixtures_test.input_for(who, "purchase_order.submit", {"amount": amount, "currency": "USD", "counterparty": "contoso", "context": context})

test_catalogue_order_within_the_buyer_limit if {
	d := main.decision with input as order("erin", 3000, {"category": "hardware", "bids_received": 1})
	d.outcome == "ALLOW"
	d.reason == "within_delegated_authority"
}

test_order_above_the_free_band_needs_approval if {
	d := main.decision with input as order("erin", 20000, {"category": "software", "bids_received": 1})
	d.outcome == "HUMAN_REVIEW"
	d.reason == "requires_approval"
}

test_buyer_cannot_place_a_large_order if {
	d := main.decision with input as order("erin", 40000, {"category": "software", "bids_received": 3})
	d.outcome == "DENY"
	d.reason == "exceeds_approval_limit"
}

test_off_catalogue_category_goes_to_review if {
	d := main.decision with input as order("erin", 3000, {"category": "travel", "bids_received": 1})
	d.outcome == "HUMAN_REVIEW"
	d.reason == "off_catalogue_category"
}

test_large_order_without_bids_denied if {
	d := main.decision with input as order("erin", 150000, {"category": "hardware", "bids_received": 1})
	d.outcome == "DENY"
	d.reason == "competitive_bid_required"
}

test_category_outside_the_declared_enum_is_invalid_input if {
	d := main.decision with input as order("erin", 3000, {"category": "yachts", "bids_received": 1})
	d.outcome == "HUMAN_REVIEW"
	d.reason == "invalid_policy_input"
}

# The bid rule needs both conditions: a large order with enough bids goes to the
# authority graph (the CFO inherits the procurement lead's limit through the controller).
test_large_order_with_bids_follows_the_graph if {
	d := main.decision with input as order("dave", 150000, {"category": "hardware", "bids_received": 3})
	d.outcome == "HUMAN_REVIEW"
	d.reason == "requires_approval"
}
