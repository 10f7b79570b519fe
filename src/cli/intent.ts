import { createPrivateKey, sign, type KeyObject } from "node:crypto";
import { readFile } from "node:fs/promises";
import { CliError, EXIT_OK, parseCommandLine, postJson, serviceUrl, type CliCommand } from "./command.js";

const usage = `usage: mandate intent sign --key AGENT_KEY.pem [INTENT.json | -]
       mandate intent submit --key AGENT_KEY.pem --key-id CERTIFICATE_ID [--url URL] [INTENT.json | -]

sign    prints the X-Service-Signature value for the Intent's exact bytes: the
        standard base64 Ed25519 signature, made with the agent's PKCS#8 PEM key
        (what the clients save, or \`openssl genpkey -algorithm ed25519\`). Send the
        same bytes as the POST /v1/intents body, or base64 in SubmitIntent's
        \`intent\` field over gRPC, with X-Service-Key-Id set to the certificate id.
submit  signs and sends the Intent to POST /v1/intents and prints the decision.

The Intent is read from the file, or from standard input when it is - or absent, and
is signed and sent byte for byte (no reformatting). --url defaults to
MANDATE_BASE_URL, else http://127.0.0.1:8080.`;

const options = { key: { type: "string" }, "key-id": { type: "string" }, url: { type: "string" } } as const;

/** `mandate intent sign|submit`: the signing step of the README's curl and grpcurl walk-throughs. */
export const intentCommand: CliCommand = {
  name: "intent",
  usage,
  async run(args, io) {
    const { values, positionals } = parseCommandLine(args, options);
    const [action, file, ...rest] = positionals;
    if ((action !== "sign" && action !== "submit") || rest.length > 0) throw new CliError("expected `intent sign` or `intent submit` and at most one INTENT file", true);
    if (!values.key) throw new CliError("--key (the agent's private key file) is required", true);
    const [key, intent] = await Promise.all([readAgentKey(values.key), readIntent(file)]);
    const signature = sign(null, intent, key).toString("base64");
    if (action === "sign") {
      if (values["key-id"] || values.url) throw new CliError("--key-id and --url belong to `intent submit`", true);
      io.out(signature);
      return EXIT_OK;
    }
    if (!values["key-id"]) throw new CliError("--key-id (the agent's certificate_id) is required to submit", true);
    const decision = await postJson(serviceUrl(values.url), "/v1/intents", intent, {
      "x-service-key-id": values["key-id"],
      "x-service-signature": signature,
    });
    io.out(JSON.stringify(decision, null, 2));
    return EXIT_OK;
  },
};

async function readAgentKey(file: string): Promise<KeyObject> {
  let key: KeyObject;
  try {
    key = createPrivateKey(await readFile(file));
  } catch (error) {
    throw new CliError(`cannot read the private key ${file}: ${(error as Error).message}`);
  }
  if (key.asymmetricKeyType !== "ed25519") throw new CliError(`${file} holds a ${key.asymmetricKeyType} key; an agent key is Ed25519`);
  return key;
}

async function readIntent(file: string | undefined): Promise<Buffer> {
  try {
    const bytes = file === undefined || file === "-" ? await readStdin() : await readFile(file);
    if (bytes.length === 0) throw new Error("it is empty");
    return bytes;
  } catch (error) {
    throw new CliError(`cannot read the Intent ${file === undefined || file === "-" ? "from standard input" : file}: ${(error as Error).message}`);
  }
}

async function readStdin(): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}
