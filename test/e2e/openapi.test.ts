import { randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Validator } from "@seriousme/openapi-schema-validator";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";
import openapiTS, { astToString } from "openapi-typescript";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openApiDocument } from "../../src/transport/openapi.js";
import { bindingOf, loadAllMandateServices } from "../support/api.js";
import { newAgentKey } from "../support/agents.js";
import { startService, uniqueEmail, type TestService } from "../support/service.js";

/*
 * Issue 8: the OpenAPI document of /v1 is generated from the proto
 * annotations, served at /openapi.json, and checked against the running
 * server: every path and method it names is routed, every annotated RPC is in
 * it, and real answers validate against its schemas.
 */

// ajv-formats is CommonJS `module.exports = formatsPlugin` (with `.default` too).
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as unknown as (ajv: Ajv2020) => Ajv2020;

type Doc = {
  openapi: string;
  paths: Record<string, Record<string, { "x-grpc-method": string; parameters?: { name: string; in: string; schema: any }[] }>>;
  components: { schemas: Record<string, any> };
};

let svc: TestService;
let doc: Doc;
let served: { status: number; body: any };
let publicServices: Awaited<ReturnType<typeof loadAllMandateServices>>;

beforeAll(async () => {
  svc = await startService();
  publicServices = (await loadAllMandateServices()).filter((s) => !s.internal);
  doc = openApiDocument(publicServices.map((s) => s.service)) as unknown as Doc;
  served = await svc.v1("GET", "/openapi.json");
});
afterAll(() => svc?.close());

/** A concrete URL path for a template: path variables filled with a type-appropriate dummy. */
function concretePath(path: string, op: Doc["paths"][string][string]): string {
  return path.replace(/\{([a-z_][a-z0-9_]*)\}/g, (_, name: string) => {
    const p = op.parameters?.find((x) => x.in === "path" && x.name === name);
    return p?.schema?.type === "integer" ? "1" : `x_${name}`;
  });
}

describe("the document", () => {
  it("is served at /openapi.json, exactly as generated from the service descriptors", () => {
    expect(served.status, JSON.stringify(served.body).slice(0, 300)).toBe(200);
    expect(served.body).toEqual(JSON.parse(JSON.stringify(doc)));
  });

  it("is a valid OpenAPI 3.1 document", async () => {
    const validator = new Validator();
    const result = await validator.validate(doc as never);
    expect(result.errors ?? [], JSON.stringify(result.errors)).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe("3.1");
  });

  it("names every annotated RPC at its path and verb, and nothing else", () => {
    const expected: string[] = [];
    for (const { service } of publicServices) {
      for (const method of service.methods) {
        const binding = bindingOf(method);
        if (!binding) continue;
        const path = binding.template.replace(/\{([a-z_][a-z0-9_]*)(?:=\*)?\}/g, "{$1}");
        const op = doc.paths[path]?.[binding.verb.toLowerCase()];
        expect(op, `${service.name}.${method.name} at ${binding.verb} ${path}`).toBeDefined();
        expect(op!["x-grpc-method"]).toBe(`/${service.typeName}/${method.name}`);
        expected.push(`${binding.verb} ${path}`);
      }
    }
    const listed = Object.entries(doc.paths).flatMap(([path, item]) => Object.keys(item).map((verb) => `${verb.toUpperCase()} ${path}`));
    expect(listed.sort()).toEqual(expected.sort());
    expect(listed.length).toBeGreaterThanOrEqual(40);
  });

  it("speaks the /v1 wire form: spec enum spellings, ISO timestamps, int64 integers, Struct objects, the error body", () => {
    const s = doc.components.schemas;
    expect(s["mandate.v1.Outcome"].enum).toEqual(["ALLOW", "DENY", "HUMAN_REVIEW"]);
    expect(s["mandate.v1.DecisionStatus"].enum).toEqual(["PENDING", "RESOLVED"]);
    expect(s["mandate.v1.AgentState"].enum).toEqual(["registered", "active", "suspended", "revoked", "retired"]);
    expect(s["mandate.v1.Decision"].properties.evaluated_at).toMatchObject({ type: "string", format: "date-time" });
    expect(s["mandate.v1.Decision"].properties.intent).toMatchObject({ type: "object" });
    // int64: a JSON number while a double holds it exactly, a decimal string past 2^53.
    expect(s["mandate.v1.EvidenceRecord"].properties.seq).toMatchObject({ type: ["integer", "string"], format: "int64", pattern: "^-?[0-9]+$" });
    expect(s["mandate.v1.Agent"].properties).toHaveProperty("acting_for_principal_id");
    expect(Object.keys(s["mandate.v1.ErrorDetail"].properties)).toEqual(["detail", "message", "request_id", "errors"]);
    const verify = doc.paths["/v1/capability-tokens/verify"]!.post as any;
    expect(verify.responses["4XX"]).toEqual({ $ref: "#/components/responses/Error" });
    expect(verify.security).toContainEqual({ bearer: [] });
    expect(verify["x-mandate-permission"]).toBe("CAPABILITY_VERIFY");
    expect((doc.paths["/v1/intents"]!.post as any).security).toEqual([{ agentKeyId: [], agentSignature: [] }]);
    expect((doc.paths["/v1/sandbox/organizations"]!.post as any).security).toEqual([]);
  });

  it("marks what is early access (the Decision's reconciliation, every v1alpha operation) with x-maturity, and nothing stable", () => {
    const s = doc.components.schemas;
    expect(s["mandate.v1.Decision"].properties.reconciliation).toMatchObject({ allOf: [{ $ref: "#/components/schemas/mandate.v1.Reconciliation" }], "x-maturity": "early-access" });
    const operations = Object.entries(doc.paths).flatMap(([path, item]) => Object.values(item).map((op) => ({ path, op: op as any })));
    const early = operations.filter(({ op }) => op["x-maturity"] !== undefined);
    expect(early.length).toBeGreaterThan(0);
    expect(early.every(({ path, op }) => path.startsWith("/v1alpha/") && op["x-maturity"] === "early-access")).toBe(true);
    expect(early.every(({ op }) => op.tags.includes("Early access"))).toBe(true);
    expect(operations.filter(({ op }) => op.tags.includes("Early access")).length).toBe(early.length);
    expect((doc as any).tags).toContainEqual({ name: "Early access", description: expect.stringContaining("x-maturity") });
    expect(operations.filter(({ path }) => path.startsWith("/v1alpha/")).every(({ op }) => op["x-maturity"] === "early-access")).toBe(true);
    const stableWithLabel = Object.entries(s).flatMap(([name, schema]: [string, any]) =>
      Object.entries(schema.properties ?? {}).filter(([field, p]: [string, any]) => p["x-maturity"] && !(name === "mandate.v1.Decision" && field === "reconciliation")),
    );
    expect(stableWithLabel).toEqual([]);
  });
});

describe("what the document tells a reader (issue 23)", () => {
  const operations = () => Object.entries(doc.paths).flatMap(([path, item]) => Object.entries(item).map(([verb, op]) => ({ path, verb, op: op as any })));

  it("describes every operation, service and request field from the proto comments, with summaries in words", () => {
    for (const { path, verb, op } of operations()) {
      expect(op.summary, `${verb} ${path}`).toMatch(/^[A-Z][a-z]+( [A-Za-z]+)*$/);
      expect(op.description, `${verb} ${path}`).toEqual(expect.any(String));
    }
    expect((doc.paths["/v1/agents/{agent_id}/rotate-key"]!.post as any).summary).toBe("Rotate agent key");
    expect((doc.paths["/v1/organization/api-keys"]!.post as any).summary).toBe("Create API key");
    expect((doc.paths["/v1/intents"]!.post as any).description).toMatch(/HUMAN_REVIEW alike/);
    const tags = (doc as any).tags as { name: string; description?: string }[];
    expect(tags.filter((t) => !t.description)).toEqual([]);
    const s = doc.components.schemas;
    expect(s["mandate.v1.RegisterAgentRequest"].properties.public_key.description).toMatch(/ed25519:base64/);
    expect(s["mandate.v1.SubmitIntentResponse"].properties.reason.description).toMatch(/machine-readable/);
    expect(s["mandate.v1.Outcome"].description ?? "").toEqual(expect.any(String));
  });

  it("marks required request fields from google.api.field_behavior, in named request schemas", () => {
    const s = doc.components.schemas;
    expect(s["mandate.v1.RegisterAgentRequest"].required).toEqual(["name", "acting_for_principal_id", "public_key"]);
    expect(s["mandate.v1.CreateSandboxOrganizationRequest"].required).toEqual(["email"]);
    expect(s["mandate.v1.CreatePrincipalRequest"].required).toEqual(["display_name", "kind"]);
    // Path variables are parameters, so the body schema without them is its own component.
    expect(s["mandate.v1.ReviewDecisionRequestBody"]).toMatchObject({ required: ["resolution", "reason"] });
    expect(s["mandate.v1.ReviewDecisionRequestBody"].properties).not.toHaveProperty("decision_id");
    for (const { path, verb, op } of operations()) {
      const schema = op.requestBody?.content["application/json"].schema;
      if (schema) expect(schema.$ref, `${verb} ${path}: a named request schema`).toMatch(/^#\/components\/schemas\//);
    }
    expect((doc.paths["/v1/agents"]!.post as any).requestBody.required).toBe(true);
    expect((doc.paths["/v1/agents/{agent_id}/suspend"]!.post as any).requestBody.required).toBe(false);
  });

  it("names the server, types the signed Intent and documents its signature headers, and answers a bundle as bytes", () => {
    expect((doc as any).servers).toEqual([{ url: "/", description: expect.any(String) }]);
    const submit = doc.paths["/v1/intents"]!.post as any;
    expect(submit.requestBody.content["application/json"].schema).toEqual({ $ref: "#/components/schemas/Intent" });
    const intent = doc.components.schemas.Intent;
    expect(Object.keys(intent.properties)).toEqual(["agent_id", "action", "amount", "currency", "counterparty", "resource", "context", "requested_at", "nonce"]);
    expect(intent.required).toEqual(["agent_id", "action", "requested_at", "nonce"]);
    expect(intent.properties.requested_at).toMatchObject({ type: "string", format: "date-time" });
    expect(submit.parameters).toEqual([
      expect.objectContaining({ name: "X-Service-Key-Id", in: "header", required: true }),
      expect.objectContaining({ name: "X-Service-Signature", in: "header", required: true }),
    ]);
    expect((doc.paths["/v1/agents/{agent_id}/heartbeat"]!.post as any).requestBody.content["application/json"].schema).toEqual({ $ref: "#/components/schemas/Heartbeat" });
    expect((doc.paths["/v1/decisions/{decision_id}"]!.get as any).parameters).toContainEqual(expect.objectContaining({ name: "X-Service-Timestamp", in: "header", required: false }));
    expect((doc.paths["/v1/bundles/{digest}"]!.get as any).responses["200"].content).toEqual({ "application/gzip": { schema: { type: "string", format: "binary" } } });
  });

  it("types the Intent as the server reads it: what it accepts validates, what it refuses does not", async () => {
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats(ajv);
    const validate = ajv.compile(doc.components.schemas.Intent);
    const sandbox = await svc.v1("POST", "/v1/sandbox/organizations", { body: { email: uniqueEmail("openapi-intent") } });
    const bearer = sandbox.body.api_key as string;
    const principal = await svc.v1("POST", "/v1/principals", { bearer, body: { display_name: "Ops", kind: "role" } });
    const key = newAgentKey();
    const agent = await svc.v1("POST", "/v1/agents", { bearer, body: { name: "typed", acting_for_principal_id: principal.body.principal_id, public_key: key.publicKey } });
    await svc.v1("POST", `/v1/agents/${agent.body.agent_id}/activate`, { bearer, body: {} });
    const base = { agent_id: agent.body.agent_id, action: "reference_noop", requested_at: new Date().toISOString() };
    const cases: [string, Record<string, unknown>][] = [
      ["every field", { ...base, amount: 12.5, currency: "EUR", counterparty: "ACME GmbH", resource: "invoice:INV-1", context: { po: "PO-1", urgent: true, lines: 3 }, nonce: randomUUID() }],
      ["no nonce", { ...base }],
      ["an unknown member", { ...base, nonce: randomUUID(), extra: 1 }],
      ["a lowercase currency", { ...base, nonce: randomUUID(), currency: "eur" }],
      ["a nested context value", { ...base, nonce: randomUUID(), context: { a: { b: 1 } } }],
      ["a negative amount", { ...base, nonce: randomUUID(), amount: -1 }],
    ];
    for (const [name, body] of cases) {
      const bytes = JSON.stringify(body);
      const res = await svc.v1("POST", "/v1/intents", { body: bytes, headers: { "x-service-key-id": agent.body.certificate_id, "x-service-signature": key.sign(bytes) } });
      expect(validate(body), `${name}: ${JSON.stringify(validate.errors)}`).toBe(res.status === 200);
      if (res.status !== 200) expect(res.body.detail, name).toBe("validation_failed");
    }
  });
});

describe("a client generated from the served document (openapi-typescript + openapi-fetch)", () => {
  /** The generated types and a flow written against them, in a folder Node resolves this project's packages from. */
  let dir: string;
  beforeAll(async () => {
    const cache = fileURLToPath(new URL("../../node_modules/.cache/", import.meta.url));
    mkdirSync(cache, { recursive: true });
    dir = mkdtempSync(path.join(cache, "openapi-client-"));
    const types = astToString(await openapiTS(new URL(`${svc.baseUrl}/openapi.json`)));
    writeFileSync(path.join(dir, "mandate-api.ts"), types);
    writeFileSync(path.join(dir, "flow.ts"), FLOW);
    writeFileSync(path.join(dir, "misuse.ts"), MISUSE);
  });
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  function diagnostics(file: string): string[] {
    const program = ts.createProgram([path.join(dir, file)], {
      strict: true,
      noEmit: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      lib: ["lib.es2022.d.ts", "lib.dom.d.ts"],
      types: [],
      skipLibCheck: true,
    });
    return ts.getPreEmitDiagnostics(program).map((d) => {
      const where = d.file && d.start !== undefined ? `${path.basename(d.file.fileName)}:${d.file.getLineAndCharacterOfPosition(d.start).line + 1}` : "";
      return `${where} ${ts.flattenDiagnosticMessageText(d.messageText, "\n")}`;
    });
  }

  it("type-checks the sandbox flow against the generated types, and refuses calls that leave out what the API requires", () => {
    expect(diagnostics("flow.ts")).toEqual([]);
    const misuse = diagnostics("misuse.ts");
    expect(misuse).toEqual([
      expect.stringMatching(/^misuse\.ts:6 .*acting_for_principal_id/s),
      expect.stringMatching(/^misuse\.ts:8 .*(params|header)/s),
    ]);
  });

  it("runs the sandbox flow against the server: sign-up, agent, signed Intent, decision, capability issued and consumed", async () => {
    const js = ts.transpileModule(FLOW, { compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext } }).outputText;
    writeFileSync(path.join(dir, "flow.mjs"), js);
    const flow = (await import(pathToFileURL(path.join(dir, "flow.mjs")).href)) as { run(baseUrl: string, key: { publicKey: string; sign(bytes: string): string }, email: string): Promise<unknown> };
    const result = await flow.run(svc.baseUrl, newAgentKey(), uniqueEmail("openapi-client"));
    expect(result).toEqual({ outcome: "ALLOW", reason: "starter_reference_action", decisionRead: "ALLOW", consumed: true, again: "capability_consumed" });
  });
});

describe("the running server", () => {
  it("routes every path and method of the document (no not_found / method_not_allowed)", async () => {
    const misses: string[] = [];
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [verb, op] of Object.entries(item)) {
        const res = await svc.v1(verb.toUpperCase(), concretePath(path, op), verb === "get" ? {} : { body: {} });
        const detail = res.body?.detail;
        if (res.status === 404 || res.status === 405 || detail === "not_found" || detail === "method_not_allowed") {
          misses.push(`${verb.toUpperCase()} ${path}: ${res.status} ${JSON.stringify(res.body)}`);
        }
        // Without credentials nothing may succeed, except what the spec leaves public (and `{}` is no valid sandbox request).
        expect(res.status, `${verb} ${path}`).toBeGreaterThanOrEqual(400);
      }
    }
    expect(misses).toEqual([]);
  });

  it("answers not_found for a route the document does not name (the check above can fail)", async () => {
    const res = await svc.v1("GET", "/v1/no-such-thing");
    expect(res.status).toBe(404);
    expect(res.body.detail).toBe("not_found");
  });

  it("answers bodies that validate against the document's schemas", async () => {
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats(ajv);
    for (const f of ["int32", "int64", "double", "float"]) ajv.addFormat(f, true);
    ajv.addSchema({ $id: "mandate", components: doc.components });
    const check = (schema: string, body: unknown) => {
      const validate = ajv.getSchema(`mandate#/components/schemas/${schema}`)!;
      expect(validate(body), `${schema}: ${JSON.stringify(validate.errors)} in ${JSON.stringify(body)}`).toBe(true);
    };
    const sandbox = await svc.v1("POST", "/v1/sandbox/organizations", { body: { email: uniqueEmail("openapi") } });
    check("mandate.v1.CreateSandboxOrganizationResponse", sandbox.body);
    const bearer = sandbox.body.api_key as string;
    const principal = await svc.v1("POST", "/v1/principals", { bearer, body: { display_name: "Ops", kind: "role" } });
    check("mandate.v1.Principal", principal.body);
    const key = newAgentKey();
    const agent = await svc.v1("POST", "/v1/agents", { bearer, body: { name: "oa", acting_for_principal_id: principal.body.principal_id, public_key: key.publicKey } });
    check("mandate.v1.Agent", agent.body);
    const active = await svc.v1("POST", `/v1/agents/${agent.body.agent_id}/activate`, { bearer, body: {} });
    check("mandate.v1.Agent", active.body);
    for (const action of ["reference_noop", "wire_transfer"]) {
      const bytes = JSON.stringify({ agent_id: agent.body.agent_id, action, requested_at: new Date().toISOString(), nonce: randomUUID() });
      const decision = await svc.v1("POST", "/v1/intents", { body: bytes, headers: { "x-service-key-id": agent.body.certificate_id, "x-service-signature": key.sign(bytes) } });
      expect(decision.status).toBe(200);
      check("mandate.v1.SubmitIntentResponse", decision.body);
      check("mandate.v1.Decision", (await svc.v1("GET", `/v1/decisions/${decision.body.decision_id}`, { bearer })).body);
      const evidence = await svc.v1("GET", `/v1/evidence/${decision.body.evidence_id}`, { bearer });
      check("mandate.v1.EvidenceRecord", evidence.body);
    }
    check("mandate.v1.ListDecisionsResponse", (await svc.v1("GET", "/v1/decisions?status=PENDING", { bearer })).body);
    check("mandate.v1.Policy", (await svc.v1("GET", "/v1/policies/starter", { bearer })).body);
    const missing = await svc.v1("GET", "/v1/agents/agt_missing", { bearer });
    expect(missing.status).toBe(404);
    check("mandate.v1.ErrorDetail", missing.body);
    const invalid = await svc.v1("POST", "/v1/principals", { bearer, body: { display_name: 7 } });
    expect(invalid.status).toBe(422);
    check("mandate.v1.ErrorDetail", invalid.body);
  });
});

/** The sandbox flow as a user of the generated client writes it: every path, body and header typed by the document. */
const FLOW = `import createClient from "openapi-fetch";
import type { components, paths } from "./mandate-api.js";

export interface Key { publicKey: string; sign(bytes: string): string }

function ok<T>(res: { data?: T; error?: unknown; response: Response }): T {
  if (res.data === undefined) throw new Error(\`\${res.response.status} \${JSON.stringify(res.error)}\`);
  return res.data;
}

export async function run(baseUrl: string, key: Key, email: string) {
  const api = createClient<paths>({ baseUrl });
  const sandbox = ok(await api.POST("/v1/sandbox/organizations", { body: { email } }));
  const headers = { authorization: \`Bearer \${sandbox.api_key}\` };
  const principal = ok(await api.POST("/v1/principals", { headers, body: { display_name: "Treasury", kind: "role" } }));
  const agent = ok(await api.POST("/v1/agents", { headers, body: { name: "payments-bot", acting_for_principal_id: principal.principal_id!, public_key: key.publicKey } }));
  const agent_id = agent.agent_id!;
  ok(await api.POST("/v1/agents/{agent_id}/activate", { headers, params: { path: { agent_id } }, body: {} }));
  const intent: components["schemas"]["Intent"] = {
    agent_id,
    action: "reference_noop",
    resource: "doc:1",
    requested_at: new Date().toISOString(),
    nonce: crypto.randomUUID(),
  };
  // The signature covers these exact bytes, so they are sent as they are.
  const bytes = JSON.stringify(intent);
  const decision = ok(
    await api.POST("/v1/intents", {
      params: { header: { "X-Service-Key-Id": agent.certificate_id!, "X-Service-Signature": key.sign(bytes) } },
      body: intent,
      bodySerializer: () => bytes,
    }),
  );
  const read = ok(await api.GET("/v1/decisions/{decision_id}", { headers, params: { path: { decision_id: decision.decision_id! } } }));
  const issued = ok(
    await api.POST("/v1/decisions/{decision_id}/capability-token", {
      headers,
      params: { path: { decision_id: decision.decision_id! } },
      body: { audience: "erp", issued_by: "openapi-flow" },
    }),
  );
  const verify = { token: issued.token!, audience: "erp", action: "reference_noop", resource: "doc:1" };
  const consumed = ok(await api.POST("/v1/capability-tokens/verify", { headers, body: verify }));
  const again = await api.POST("/v1/capability-tokens/verify", { headers, body: verify });
  return {
    outcome: decision.outcome,
    reason: decision.reason,
    decisionRead: read.outcome,
    consumed: consumed.capability_id === issued.capability_id,
    again: again.error?.detail,
  };
}
`;

/** Calls the generated types must refuse: a body without a required field, an Intent without its signature headers. */
const MISUSE = `import createClient from "openapi-fetch";
import type { paths } from "./mandate-api.js";

const api = createClient<paths>({ baseUrl: "http://127.0.0.1:1" });

void api.POST("/v1/agents", { body: { name: "no principal", public_key: "ed25519:base64:AAAA" } });

void api.POST("/v1/intents", { body: { agent_id: "agt_1", action: "reference_noop", requested_at: "2026-11-26T00:00:00.000Z", nonce: "n" } });
`;
