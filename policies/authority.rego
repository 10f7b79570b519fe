# METADATA
# title: Authority graph evaluation
# description: |
#   Decides an authority-checked intent (amount, currency) against the active
#   authority graph, as docs/architecture.md, Policies describes.
#
#   The graph is read from data.mandate.graph_index, which src/policy/graph-index.ts
#   computes once per bundle. For every principal (by external_ref), action and
#   currency the index holds the principal's grants: the Pareto frontier of
#   {max_amount, valid_until, via} over its own limits, the limits of the roles it
#   holds and of the roles reporting to them, and every delegation chain that reaches
#   it (each chain capped by the smallest amount and the earliest expiry along it).
#   Walking roles and chains happens at build time, so an evaluation here is a few
#   keyed lookups and never scans the graph.
package mandate.authority

# An intent can be checked only when it carries a non-negative amount and a currency.
# Without them no authority rule fires, so the action falls to the policy's other
# rules or to HUMAN_REVIEW no_matching_rule: never to ALLOW.
checkable if {
	is_number(input.intent.amount)
	input.intent.amount >= 0
	is_string(input.intent.currency)
}

# The acting principal's grants for the intent's action and currency (undefined when none).
grants := data.mandate.graph_index.authority[input.principal.external_ref][input.intent.action][input.intent.currency]

# The grant that sets the effective limit: the first one still valid at input.now, since
# grants are ordered by max_amount, largest first. A valid_until date (YYYY-MM-DD, UTC) is
# valid through the end of that day; a malformed or missing `now` leaves only grants with
# no end date.
best := [grant | some grant in grants; unexpired(grant.valid_until)][0]

unexpired(null)

unexpired(valid_until) if {
	is_string(input.now)
	substring(input.now, 0, 10) <= valid_until
}

# The approval bands for the action and currency, ascending by up_to_amount.
bands := data.mandate.graph_index.bands[input.intent.action][input.intent.currency]

# The first band whose up_to_amount is at least the amount (boundaries are inclusive).
band := [b | some b in bands; input.intent.amount <= b.up_to_amount][0]

# The authority decision, {outcome, reason, detail}, undefined when the intent is not
# checkable. The detail says what was compared: the effective limit, the chain of holders
# it came from (origin first, the principal last) and the approval band that applied.
result := {"outcome": verdict[0], "reason": verdict[1], "detail": {"limit": verdict[2], "via": verdict[3], "band": verdict[4]}} if checkable

verdict := ["DENY", "no_delegated_authority", null, null, null] if {
	not best
} else := ["DENY", "exceeds_approval_limit", best.max_amount, best.via, null] if {
	input.intent.amount > best.max_amount
} else := ["ALLOW", "within_delegated_authority", best.max_amount, best.via, null] if {
	# No approval matrix rows for this action and currency: the limit alone decides.
	not bands
} else := ["DENY", "exceeds_approval_limit", best.max_amount, best.via, null] if {
	# Above the last band.
	not band
} else := array.concat(band_verdict(band.approvals_required), [best.max_amount, best.via, band])

band_verdict(0) := ["ALLOW", "within_delegated_authority"]

band_verdict(1) := ["HUMAN_REVIEW", "requires_approval"]

band_verdict(n) := ["HUMAN_REVIEW", "requires_dual_approval"] if n >= 2
