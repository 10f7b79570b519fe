import { CliError, EXIT_OK, parseCommandLine, postJson, serviceUrl, type CliCommand } from "./command.js";

const usage = `usage: mandate sandbox create --email EMAIL [--url URL]

Creates a self-service sandbox organization (no credential needed) and prints the
answer as JSON: organization_id, api_key (shown once: keep it) and starter_policy_key.
--url defaults to MANDATE_BASE_URL, else http://127.0.0.1:8080.`;

/** `mandate sandbox create`: POST /v1/sandbox/organizations, the Quick start's first step. */
export const sandboxCommand: CliCommand = {
  name: "sandbox",
  usage,
  async run(args, io) {
    const { values, positionals } = parseCommandLine(args, { email: { type: "string" }, url: { type: "string" } });
    if (positionals.length !== 1 || positionals[0] !== "create") throw new CliError("the only subcommand is `create`", true);
    if (!values.email) throw new CliError("--email is required", true);
    const answer = await postJson(serviceUrl(values.url), "/v1/sandbox/organizations", JSON.stringify({ email: values.email }));
    io.out(JSON.stringify(answer, null, 2));
    io.err("The api_key is shown once: store it now (export MANDATE_API_KEY=...).");
    return EXIT_OK;
  },
};
