package mandate.main_test

import data.mandate.main

allow_ok := {"outcome": "ALLOW", "reason": "ok", "rule": "allow_all"}

deny_blocked := {"outcome": "DENY", "reason": "blocked", "rule": "block"}

deny_audit := {"outcome": "DENY", "reason": "audit_hold", "rule": "hold"}

review := {"outcome": "HUMAN_REVIEW", "reason": "look_closer", "rule": "look"}

dual := {"outcome": "HUMAN_REVIEW", "reason": "requires_dual_approval", "rule": "authority"}

# Runtime policies stand in as plain data: {key: {"actions", "results"}}.
policy(actions, results) := {"actions": actions, "results": results}

# name -> [policies, action, expected outcome, expected reason]
cases := {
	"no policy at all": [{}, "pay", "HUMAN_REVIEW", "unrecognized_action"],
	"no policy covers the action": [{"a": policy({"ship"}, {allow_ok})}, "pay", "HUMAN_REVIEW", "unrecognized_action"],
	"covering policy without a result": [{"a": policy({"pay"}, set())}, "pay", "HUMAN_REVIEW", "no_matching_rule"],
	"single allow": [{"a": policy({"pay"}, {allow_ok})}, "pay", "ALLOW", "ok"],
	"actions given as an array": [{"a": policy(["pay"], {allow_ok})}, "pay", "ALLOW", "ok"],
	"deny overrides allow in one policy": [{"a": policy({"pay"}, {allow_ok, deny_blocked})}, "pay", "DENY", "blocked"],
	"deny overrides allow across policies": [
		{"a": policy({"pay"}, {allow_ok}), "b": policy({"pay"}, {deny_blocked})},
		"pay", "DENY", "blocked",
	],
	"review overrides allow": [{"a": policy({"pay"}, {allow_ok}), "b": policy({"pay"}, {review})}, "pay", "HUMAN_REVIEW", "look_closer"],
	"deny overrides review": [{"a": policy({"pay"}, {review}), "b": policy({"pay"}, {deny_blocked})}, "pay", "DENY", "blocked"],
	"smallest reason among denies": [
		{"a": policy({"pay"}, {deny_blocked}), "b": policy({"pay"}, {deny_audit, allow_ok})},
		"pay", "DENY", "audit_hold",
	],
	"dual approval is never masked by a smaller reason": [
		{"a": policy({"pay"}, {review}), "b": policy({"pay"}, {dual, allow_ok})},
		"pay", "HUMAN_REVIEW", "requires_dual_approval",
	],
	"dual approval gives way to a deny": [
		{"a": policy({"pay"}, {dual}), "b": policy({"pay"}, {deny_blocked})},
		"pay", "DENY", "blocked",
	],
	"an abstaining policy does not block an allow": [
		{"a": policy({"pay"}, set()), "b": policy({"pay"}, {allow_ok})},
		"pay", "ALLOW", "ok",
	],
	"a policy not covering the action is ignored": [
		{"a": policy({"ship"}, {deny_blocked}), "b": policy({"pay"}, {allow_ok})},
		"pay", "ALLOW", "ok",
	],
}

# What src/policy/build.ts generates as data.mandate.dispatch for these policies and action.
dispatch(policies, action) := {
	"covering": {key | some key, p in policies; action in p.actions},
	"results": {key: p.results | some key, p in policies; action in p.actions; p.results},
}

decide(policies, action) := d if {
	d := main.decision with input as {"intent": {"action": action}} with data.mandate.dispatch as dispatch(policies, action)
}

test_combination[name] if {
	some name, c in cases
	d := decide(c[0], c[1])
	[d.outcome, d.reason] == [c[2], c[3]]
}

test_trace_orders_by_policy_then_rule_and_shows_abstentions if {
	policies := {
		"b": policy({"pay"}, {allow_ok, deny_blocked}),
		"a": policy({"pay"}, set()),
		"c": policy({"pay"}, {object.union(review, {"detail": {"limit": 5}})}),
	}
	decide(policies, "pay").trace == [
		{"policy": "a", "rule": null, "outcome": null, "reason": null, "detail": null},
		{"policy": "b", "rule": "allow_all", "outcome": "ALLOW", "reason": "ok", "detail": null},
		{"policy": "b", "rule": "block", "outcome": "DENY", "reason": "blocked", "detail": null},
		{"policy": "c", "rule": "look", "outcome": "HUMAN_REVIEW", "reason": "look_closer", "detail": {"limit": 5}},
	]
}

test_unrecognized_action_has_an_empty_trace if {
	decide({}, "pay").trace == []
}

# name -> the results of a covering policy that make the decision an error
malformed := {
	"unknown outcome": {{"outcome": "MAYBE", "reason": "x", "rule": "r"}},
	"lowercase outcome": {{"outcome": "deny", "reason": "x", "rule": "r"}},
	"missing rule": {{"outcome": "ALLOW", "reason": "x"}},
	"reason not a string": {{"outcome": "ALLOW", "reason": 1, "rule": "r"}},
	"result not an object": {"ALLOW"},
	"results not a set": [allow_ok],
}

test_malformed_results_are_an_error[name] if {
	some name, results in malformed
	d := decide({"a": policy({"pay"}, {deny_blocked}), "z": policy({"pay"}, results)}, "pay")
	d == {"error": {"code": "malformed_policy_result", "policies": ["z"]}}
}

test_covering_policy_without_results_is_an_error if {
	d := decide({"a": {"actions": {"pay"}}}, "pay")
	d.error.policies == ["a"]
}

test_malformed_policy_not_covering_the_action_is_ignored if {
	d := decide({"a": policy({"ship"}, {"ALLOW"}), "b": policy({"pay"}, {allow_ok})}, "pay")
	[d.outcome, d.reason] == ["ALLOW", "ok"]
}
