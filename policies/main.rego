# METADATA
# title: Mandate decision entrypoint
# description: |
#   data.mandate.main.decision (bundle entrypoint mandate/bundle/decision, bundle.rego)
#   combines every active runtime policy that covers the intent's action. A runtime policy
#   is a package mandate.policies.<policy_key> exposing `actions` (the action names it
#   covers, one constant list of strings) and `results` (a set of {"outcome", "reason",
#   "rule"} objects, optionally with a "detail" the trace carries along).
#
#   Policies are reached only through data.mandate.dispatch, a module src/policy/build.ts
#   generates for each bundle from the policies' constant `actions`: `covering` (the keys of
#   the policies declaring the intent's action) and `results[key]` (a covering policy's
#   results, each referenced by its own path). So a policy is evaluated only for the actions
#   it declares, and one failing at run time (a conflict, say) fails only those actions;
#   nothing here iterates data.mandate.policies, which would evaluate every policy for every
#   intent.
#
#   Combination is deny-overrides: any DENY wins, then HUMAN_REVIEW, then ALLOW. Among
#   the results with the winning outcome the decision's reason is the lexicographically
#   smallest one, so the same results always give the same reason; the one exception is
#   a HUMAN_REVIEW where some result says requires_dual_approval, which is then the
#   reason, so that no other review can lower the approvals required. A policy that covers
#   the action but produces no result abstains; when every covering policy abstains the
#   decision is HUMAN_REVIEW no_matching_rule, and when none covers the action it is
#   HUMAN_REVIEW unrecognized_action.
#
#   The decision is {"outcome", "reason", "trace"}: the trace lists, ordered by policy
#   then rule, every result that fired and every covering policy that abstained (rule,
#   outcome and reason null). A result that is not well formed (an outcome other than the
#   three, a rule or reason that is not a string, results that are not a set) makes the
#   decision {"error": {...}} instead, which the engine reports as an evaluation error: a
#   broken policy never decides. That reasons are snake_case is checked by the engine
#   (src/policy/engine.ts), because regex.match costs more per result in WebAssembly than
#   the rest of the evaluation.
package mandate.main

outcomes := {"ALLOW", "DENY", "HUMAN_REVIEW"}

decision := {"error": {"code": "malformed_policy_result", "policies": sort(malformed)}} if {
	count(malformed) > 0
} else := {"outcome": "HUMAN_REVIEW", "reason": "unrecognized_action", "trace": []} if {
	count(covering) == 0
} else := {"outcome": "HUMAN_REVIEW", "reason": "no_matching_rule", "trace": steps_taken} if {
	count(fired) == 0
} else := {"outcome": winner, "reason": reason, "trace": steps_taken}

# Keys of the active policies whose actions name the intent's action.
covering := data.mandate.dispatch.covering

# Results of the covering policies as [policy, rule, outcome, reason, detail] tuples, which
# sort by policy, then rule. They decide only when none is malformed.
fired contains [key, r.rule, r.outcome, r.reason, object.get(r, "detail", null)] if {
	some key in covering
	some r in data.mandate.dispatch.results[key]
}

# Covering policies whose results are not a set or hold a result that is not well formed.
malformed contains key if {
	some key in covering
	not results_set(key)
}

malformed contains key if {
	some key in covering
	some r in data.mandate.dispatch.results[key]
	not well_formed(r)
}

results_set(key) if is_set(data.mandate.dispatch.results[key])

well_formed(r) if {
	is_object(r)
	r.outcome in outcomes
	is_string(r.rule)
	is_string(r.reason)
}

# Covering policies that produced no result.
abstaining := covering - {f[0] | some f in fired}

winner := "DENY" if {
	some f in fired
	f[2] == "DENY"
} else := "HUMAN_REVIEW" if {
	some f in fired
	f[2] == "HUMAN_REVIEW"
} else := "ALLOW"

# A review that needs two approvals is never reported as one that needs fewer: the
# service counts approvals by this reason.
reason := "requires_dual_approval" if {
	winner == "HUMAN_REVIEW"
	some f in fired
	f[2] == "HUMAN_REVIEW"
	f[3] == "requires_dual_approval"
} else := min({f[3] | some f in fired; f[2] == winner})

# Fired results and abstentions, sorted by policy then rule (null sorts before any rule
# id). Sorting is explicit because WebAssembly iterates sets in hash order, not sorted.
steps := sort(fired | {[key, null, null, null, null] | some key in abstaining})

steps_taken := [{"policy": s[0], "rule": s[1], "outcome": s[2], "reason": s[3], "detail": s[4]} | some s in steps]
