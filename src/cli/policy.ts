import { CliError, type CliCommand } from "./command.js";
import { buildUsage, runPolicyBuild } from "./policy-build.js";
import { runPolicyTest, testUsage } from "./policy-test.js";

const indent = (text: string) => text.replace(/^(?=.)/gm, "  ");

const usage = `usage:
${indent(testUsage)}

${indent(buildUsage)}

DIR may hold (files of other names are skipped with a note):
  <policy_key>.rules.yaml | .rules.yml | .rules.json
                        a runtime policy document, compiled as publishing compiles it
  <policy_key>.rego     a hand-written policy module (package mandate.policies.<policy_key>)
  *_test.rego           tests: rules named test_* (todo_test_* are reported as skipped)
  graph.yaml | graph.json
                        the authority graph in its JSON form (docs/architecture.md, Policies)
  *.csv, <kind>[.<name>].yaml | .json
                        governance documents, turned into the graph by the service's own
                        generation. A CSV is recognised by its header (principal,role,reports_to
                        for signing_schedule; holder,delegate,action,currency,max_amount,valid_until
                        for delegation_of_authority; action,currency,up_to_amount,approvals_required
                        for approval_matrix); a YAML/JSON document by its name starting with its
                        kind (approval_matrix.yaml, signing_schedule.emea.json)
  principals.csv | principals.yaml | principals.json
                        the organization's principals by external_ref (CSV: a header naming
                        external_ref); graph references to anyone else are errors, as in the
                        service. Without it references are not checked (a note says so)`;

/** `mandate policy …`: test and build a policy directory offline, as the service would build it. */
export const policyCommand: CliCommand = {
  name: "policy",
  usage,
  async run(args, io) {
    const [sub, ...rest] = args;
    if (sub === "test") return runPolicyTest(rest, io);
    if (sub === "build") return runPolicyBuild(rest, io);
    throw new CliError(sub === undefined ? "expected a subcommand: test or build" : `unknown subcommand ${sub}`, true);
  },
};
