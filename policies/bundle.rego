# METADATA
# title: Mandate bundle entrypoints
# description: |
#   The rules a bundle's policy.wasm is compiled for (src/policy/opa.ts, ENTRYPOINT and
#   EXPLAIN_ENTRYPOINT). opa build removes an entrypoint's rule from the Rego it packs
#   beside policy.wasm, so the entrypoints are these aliases, and the modules they name
#   (main.rego with its `decision`) stay whole in the bundle: a downloaded bundle can be
#   read and evaluated as Rego as well as WebAssembly.
#
#   `explain` is, for each policy covering the intent's action that defines one (a policy
#   compiled from a rules document; see src/policy/rules-rego.ts), its per-rule
#   explanation: {policy_key: [...]}. Only the dry run reads it; the decision never does.
package mandate.bundle

decision := data.mandate.main.decision

explain := data.mandate.dispatch.explain
