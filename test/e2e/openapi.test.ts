import { randomUUID } from "node:crypto";
import { Validator } from "@seriousme/openapi-schema-validator";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";
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
    expect(s["mandate.v1.EvidenceRecord"].properties.seq).toMatchObject({ type: "integer", format: "int64" });
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
    expect(s["mandate.v1.Decision"].properties.reconciliation).toEqual({ allOf: [{ $ref: "#/components/schemas/mandate.v1.Reconciliation" }], "x-maturity": "early-access" });
    const operations = Object.entries(doc.paths).flatMap(([path, item]) => Object.values(item).map((op) => ({ path, op: op as any })));
    const early = operations.filter(({ op }) => op["x-maturity"] !== undefined);
    expect(early.length).toBeGreaterThan(0);
    expect(early.every(({ path, op }) => path.startsWith("/v1alpha/") && op["x-maturity"] === "early-access")).toBe(true);
    expect(operations.filter(({ path }) => path.startsWith("/v1alpha/")).every(({ op }) => op["x-maturity"] === "early-access")).toBe(true);
    const stableWithLabel = Object.entries(s).flatMap(([name, schema]: [string, any]) =>
      Object.entries(schema.properties ?? {}).filter(([field, p]: [string, any]) => p["x-maturity"] && !(name === "mandate.v1.Decision" && field === "reconciliation")),
    );
    expect(stableWithLabel).toEqual([]);
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
