import { createHash } from "node:crypto";
import http from "node:http";
import { loadPolicy } from "@open-policy-agent/opa-wasm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PolicyService } from "../../src/gen/mandate/v1/policies_pb.js";
import { ENTRYPOINT } from "../../src/policy/opa.js";
import { readTarGz } from "../../src/policy/tar.js";
import { call, intentDoc, newAgent, newApiKey, newOrgFixture, signBody, submitIntent, type OrgFixture, type TestAgent } from "../support/agents.js";
import { startService, type TestService } from "../support/service.js";

/*
 * Issue 20: a policy version is compiled when it is authored; a policy failing at run time fails
 * only the actions it declares, named in the 503 and counted in /metrics; the exact bundle a
 * decision used downloads from GET /v1/bundles/{digest} and evaluates with opa-wasm alone.
 */

// Two values for one complete rule whenever it is evaluated: a Rego runtime error (line 7).
const CONFLICTING = [
  "package mandate.policies.conflicting",
  "",
  'actions := ["wire_transfer"]',
  "",
  "limit := 1 if input.intent",
  "",
  "limit := 2 if input.intent",
  "",
  'results contains {"outcome": "DENY", "reason": "too_much", "rule": "cap"} if input.intent.amount > limit',
  "",
].join("\n");

const REFUNDS = {
  rules: {
    actions: ["refund"],
    rules: [
      { id: "small", when: { amount: { lte: 100 } }, outcome: "ALLOW", reason: "small_refund" },
      { id: "large", when: { amount: { gt: 100 } }, outcome: "DENY", reason: "large_refund" },
    ],
  },
};

const handwritten = (key: string, body: string, actions = '["custom"]') => ({ rego: `package mandate.policies.${key}\n\nactions := ${actions}\n\n${body}\n` });

/** Raw bytes of a /v1 GET (the test client parses JSON; a bundle is not JSON). */
function download(svc: TestService, path: string, bearer: string): Promise<{ status: number; type: string | undefined; body: Buffer }> {
  return new Promise((resolve, reject) => {
    http
      .get(new URL(path, svc.baseUrl), { headers: { authorization: `Bearer ${bearer}` }, agent: false }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, type: res.headers["content-type"], body: Buffer.concat(chunks) }));
        res.on("error", reject);
      })
      .on("error", reject);
  });
}

describe("policy bundles", () => {
  let svc: TestService;
  let org: OrgFixture;
  let approver: string;
  let agent: TestAgent;

  async function publish(key: string, source: object, create: boolean): Promise<number> {
    const made = create
      ? await svc.v1("POST", "/v1/policies", { bearer: org.apiKey, body: { policy_key: key, description: key, source } })
      : await svc.v1("POST", `/v1/policies/${key}/versions`, { bearer: org.apiKey, body: { source } });
    expect(made.status, JSON.stringify(made.body)).toBe(200);
    const v = made.body.version as number;
    expect((await svc.v1("POST", `/v1/policies/${key}/versions/${v}/submit`, { bearer: org.apiKey })).status).toBe(200);
    expect((await svc.v1("POST", `/v1/policies/${key}/versions/${v}/approve`, { bearer: approver })).status).toBe(200);
    const published = await svc.v1("POST", `/v1/policies/${key}/versions/${v}/publish`, { bearer: approver });
    expect(published.status, JSON.stringify(published.body)).toBe(200);
    return v;
  }

  const decide = (fields: Record<string, unknown>) => submitIntent(svc, "v1", signBody(agent, intentDoc(agent.agentId, fields)));

  beforeAll(async () => {
    svc = await startService();
    org = await newOrgFixture(svc);
    approver = (await newApiKey(svc, org.apiKey, ["POLICY_APPROVER"])).apiKey;
    agent = await newAgent(svc, org);
  });

  afterAll(async () => {
    await svc?.close();
  });

  describe("authoring compiles the version as publishing would", () => {
    // name -> module body, actions, opa's code, where (line, column), part of the message
    const broken: [string, string, string, string, number, number, string][] = [
      ["a syntax error", "results contains x if {\n\tx := 1 +\n}", '["custom"]', "rego_parse_error", 7, 1, ""],
      ["time.now_ns, outside the built-in allowlist", "results contains x if {\n\tx := time.now_ns()\n}", '["custom"]', "rego_type_error", 6, 7, "time.now_ns"],
      ["a type error", 'results contains x if {\n\tx := 1 + "a"\n}', '["custom"]', "rego_type_error", 6, 7, "plus"],
      ["rules conflicting at compile time", "limit := 1\n\nlimit contains 2", '["custom"]', "rego_type_error", 5, 1, "conflicting rules"],
      ["actions that are not a constant list", "results := set()", "{input.intent.action}", "mandate_actions_not_constant", 3, 1, "constant list of strings"],
      ["a field the input schema does not have", 'results contains {"outcome": "DENY", "reason": "big", "rule": "r"} if input.intent.amout > 5', '["custom"]', "rego_type_error", 5, 71, "amout"],
    ];

    it.each(broken)("refuses %s when the policy is created: 422, located, and no draft exists", async (_name, body, actions, code, line, column, message) => {
      const key = `broken${Math.random().toString(36).slice(2, 8)}`;
      const res = await svc.v1("POST", "/v1/policies", { bearer: org.apiKey, body: { policy_key: key, description: "", source: handwritten(key, body, actions) } });
      expect(res.status, JSON.stringify(res.body)).toBe(422);
      expect(res.body.detail).toBe("policy_compile_failed");
      expect(res.body.errors[0]).toMatchObject({ field: `policies/${key}.rego`, code, line, column });
      expect(res.body.errors[0].message).toContain(message);
      expect((await svc.v1("GET", `/v1/policies/${key}`, { bearer: org.apiKey })).status).toBe(404);
    });

    it("refuses a broken new version, over gRPC too, and the policy keeps only its good versions", async () => {
      const made = await svc.v1("POST", "/v1/policies", { bearer: org.apiKey, body: { policy_key: "drafts", description: "", source: handwritten("drafts", "results := set()") } });
      expect(made.status, JSON.stringify(made.body)).toBe(200);
      const source = handwritten("drafts", "results contains x if {\n\tx := time.now_ns()\n}");
      const v1 = await svc.v1("POST", "/v1/policies/drafts/versions", { bearer: org.apiKey, body: { source } });
      expect(v1.body).toMatchObject({ detail: "policy_compile_failed", errors: [{ field: "policies/drafts.rego", line: 6, column: 7 }] });
      const grpc = await call(svc, "grpc", PolicyService.method.createPolicyVersion, { policy_key: "drafts", source }, { bearer: org.apiKey });
      expect(grpc).toMatchObject({ status: 422, detail: "policy_compile_failed" });
      const policy = await svc.v1("GET", "/v1/policies/drafts", { bearer: org.apiKey });
      expect(policy.body.versions.map((v: { version: number }) => v.version)).toEqual([1]);
    });
  });

  describe("a policy failing at run time", () => {
    it("fails only its own actions, with a 503 naming it, counted in /metrics; other actions still decide", async () => {
      await publish("conflicting", { rego: CONFLICTING }, true);
      const failed = await decide({ action: "wire_transfer", amount: 5 });
      expect(failed.status).toBe(503);
      expect(failed.detail).toBe("evaluation_unavailable");
      expect(failed.body.message).toContain("policy conflicting (version 1)");
      expect(failed.body.message).toContain("policies/conflicting.rego:7:1: var assignment conflict");
      // The starter policy's action, in the same bundle, before and after another failure.
      expect((await decide({ action: "reference_noop" })).body).toMatchObject({ outcome: "ALLOW", reason: "starter_reference_action" });
      expect((await decide({ action: "wire_transfer", amount: 5 })).status).toBe(503);
      expect((await decide({ action: "reference_noop" })).status).toBe(200);
      const metrics = await (await fetch(`${svc.baseUrl}/metrics`)).text();
      const count = Number(/^mandate_policy_runtime_errors_total\{policy="conflicting"\} (\d+)$/m.exec(metrics)?.[1]);
      expect(count).toBeGreaterThanOrEqual(2);
    });
  });

  describe("GET /v1/bundles/{digest}", () => {
    let digest: string;
    let decision: { outcome: string; reason: string };
    let intent: Record<string, unknown>;

    beforeAll(async () => {
      await publish("refunds", REFUNDS, true);
      intent = intentDoc(agent.agentId, { action: "refund", amount: 500 });
      const res = await submitIntent(svc, "v1", signBody(agent, intent));
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      decision = res.body;
      expect(decision).toMatchObject({ outcome: "DENY", reason: "large_refund" });
      const read = await svc.v1("GET", `/v1/decisions/${res.body.decision_id}`, { bearer: org.apiKey });
      digest = read.body.bundle_digest;
      expect(digest).toMatch(/^[0-9a-f]{64}$/);
    });

    it("answers the exact stored bytes as application/gzip, and the bundle decides alone with opa-wasm as the service did", async () => {
      const res = await download(svc, `/v1/bundles/${digest}`, org.apiKey);
      expect(res.status).toBe(200);
      expect(res.type).toBe("application/gzip");
      expect(createHash("sha256").update(res.body).digest("hex")).toBe(digest);
      const files = readTarGz(res.body);
      expect(files.get("library/main.rego")?.toString("utf8")).toMatch(/^decision := /m);
      const policy = await loadPolicy(new Uint8Array(files.get("policy.wasm")!));
      policy.setData(JSON.parse(files.get("data.json")!.toString("utf8")) as object);
      const principal = await svc.v1("GET", `/v1/principals/${org.principalId}`, { bearer: org.apiKey });
      const input = {
        intent,
        agent: { agent_id: agent.agentId, state: "active" },
        principal: { principal_id: org.principalId, external_ref: principal.body.external_ref, kind: "person" },
        now: new Date().toISOString(),
      };
      const [standalone] = policy.evaluate(input, ENTRYPOINT) as { result: { outcome: string; reason: string } }[];
      expect({ outcome: standalone?.result.outcome, reason: standalone?.result.reason }).toEqual({ outcome: decision.outcome, reason: decision.reason });
      // The failing policy fails the same way outside the service.
      expect(() => policy.evaluate({ ...input, intent: { ...intent, action: "wire_transfer" } }, ENTRYPOINT)).toThrow(/conflicting\.rego:7:1: var assignment conflict/);
    });

    it("answers the same bytes over gRPC and Connect as a google.api.HttpBody message", async () => {
      const http1 = await download(svc, `/v1/bundles/${digest}`, org.apiKey);
      for (const transport of ["grpc"] as const) {
        const res = await call(svc, transport, PolicyService.method.getBundle, { digest }, { bearer: org.apiKey });
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        expect(res.body.content_type).toBe("application/gzip");
        expect(Buffer.from(res.body.data, "base64").equals(http1.body)).toBe(true);
      }
      const connect = await svc.connect(PolicyService).getBundle({ digest }, { headers: { authorization: `Bearer ${org.apiKey}` } });
      expect(Buffer.from(connect.data).equals(http1.body)).toBe(true);
    });

    it("keeps serving a past head after a new publication", async () => {
      await publish("refunds", { rules: { ...REFUNDS.rules, rules: [{ id: "all", outcome: "ALLOW", reason: "any_refund" }] } }, false);
      expect((await decide({ action: "refund", amount: 500 })).body).toMatchObject({ outcome: "ALLOW", reason: "any_refund" });
      expect((await download(svc, `/v1/bundles/${digest}`, org.apiKey)).status).toBe(200);
    });

    it("needs POLICY_AUTHOR, POLICY_APPROVER or EVIDENCE_READ", async () => {
      const auditor = await newApiKey(svc, org.apiKey, ["EVIDENCE_READ"]);
      const reviewer = await newApiKey(svc, org.apiKey, ["REVIEWER", "DECISION_READ"]);
      expect((await download(svc, `/v1/bundles/${digest}`, auditor.apiKey)).status).toBe(200);
      expect((await download(svc, `/v1/bundles/${digest}`, approver)).status).toBe(200);
      const refused = await svc.v1("GET", `/v1/bundles/${digest}`, { bearer: reviewer.apiKey });
      expect(refused).toMatchObject({ status: 403, body: { detail: "permission_denied" } });
    });

    it("is 404 for another organization's bundle, as for one that exists nowhere; the starter bundle is everyone's", async () => {
      const other = await newOrgFixture(svc);
      const theirs = await svc.v1("GET", `/v1/bundles/${digest}`, { bearer: other.apiKey });
      const nowhere = await svc.v1("GET", `/v1/bundles/${"0".repeat(64)}`, { bearer: other.apiKey });
      expect(theirs).toMatchObject({ status: 404, body: { detail: "not_found" } });
      expect(nowhere).toMatchObject({ status: 404, body: { detail: "not_found", message: theirs.body.message } });
      expect(await call(svc, "grpc", PolicyService.method.getBundle, { digest }, { bearer: other.apiKey })).toMatchObject({ status: 404, detail: "not_found" });
      expect((await svc.v1("GET", "/v1/bundles/not-a-digest", { bearer: other.apiKey })).body.detail).toBe("validation_failed");

      const otherAgent = await newAgent(svc, other);
      const starterDecision = await submitIntent(svc, "v1", signBody(otherAgent, intentDoc(otherAgent.agentId)));
      const starterDigest = (await svc.v1("GET", `/v1/decisions/${starterDecision.body.decision_id}`, { bearer: other.apiKey })).body.bundle_digest as string;
      expect((await download(svc, `/v1/bundles/${starterDigest}`, org.apiKey)).status).toBe(200);
    });

    it("is described in the OpenAPI document as a binary body", async () => {
      const doc = (await svc.v1("GET", "/openapi.json")).body;
      const ok = doc.paths["/v1/bundles/{digest}"].get.responses["200"];
      expect(ok.content).toEqual({ "application/gzip": { schema: { type: "string", format: "binary" } } });
    });
  });
});
