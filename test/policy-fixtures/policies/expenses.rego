package mandate.policies.expenses

# Generated from a rules document by src/policy/rules.ts.

actions := {"expense_claim"}

results contains object.union(data.mandate.authority.result, {"rule": "authority"})
