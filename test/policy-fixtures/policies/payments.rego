package mandate.policies.payments

# Generated from a rules document by src/policy/rules.ts.

actions := {"vendor_payment"}

results contains object.union(data.mandate.authority.result, {"rule": "authority"})
