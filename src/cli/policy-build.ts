import { writeFile } from "node:fs/promises";
import { CliError, type CliIo, EXIT_FAILED, EXIT_OK, parseCommandLine } from "./command.js";
import { readPolicyDir } from "./policy-dir.js";
import { buildOrFail, graphVersionOption, pathMap } from "./policy-test.js";

/** Usage of `mandate policy build`. */
export const buildUsage = `mandate policy build DIR -o BUNDLE.tar.gz [--graph-version N]

Builds the bundle the service would build for an organization whose active policies
are DIR's (and the starter policy, unless DIR defines one) and whose active graph is
DIR's, published as version N (default 1): the same bytes, so the same sha256 digest,
which is printed. Rules documents must reach the service as the same text
(source.rules_yaml) for their compiled Rego to match.
Exit status 0 when built, 1 when opa refuses the policies (as publishing would),
2 on bad input.`;

/** `mandate policy build DIR -o FILE`: the publish-time bundle of DIR, byte for byte. */
export async function runPolicyBuild(args: readonly string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseCommandLine(args, { output: { type: "string", short: "o" }, "graph-version": { type: "string" } });
  if (positionals.length !== 1 || values.output === undefined) throw new CliError("expected: policy build DIR -o BUNDLE.tar.gz", true);
  const graphVersion = graphVersionOption(values["graph-version"]);
  const dir = await readPolicyDir(positionals[0]!);
  for (const note of dir.notes) io.err(`note: ${note}`);
  const built = await buildOrFail(dir, graphVersion, pathMap(dir));
  if ("failure" in built) {
    io.out("the bundle does not build; publishing would refuse it with:");
    for (const line of built.failure.message.split("\n")) io.out(`  ${line}`);
    return EXIT_FAILED;
  }
  try {
    await writeFile(values.output, built.bundle);
  } catch (err) {
    throw new CliError(`-o ${values.output}: ${(err as Error).message}`);
  }
  io.out(`${values.output}: sha256 ${built.digest} (policies: ${dir.policies.map((p) => p.policy_key).join(", ")}; graph: ${dir.graph === null ? "none" : `version ${graphVersion}`})`);
  return EXIT_OK;
}
