import { randomUUID } from "node:crypto";
import { fromBinary } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AgentService } from "../../src/gen/mandate/v1/agents_pb.js";
import { AuthorityGraphService } from "../../src/gen/mandate/v1/authority_graph_pb.js";
import { ErrorDetailSchema } from "../../src/gen/mandate/v1/errors_pb.js";
import { PrincipalService } from "../../src/gen/mandate/v1/principals_pb.js";
import { call, decisionCount, expectResult, heartbeat, intentDoc, newAgent, newOrgFixture, signBody, submitIntent, TRANSPORTS, type OrgFixture, type TestAgent } from "../support/agents.js";
import { startService, type TestService } from "../support/service.js";

/*
 * Postgres text and jsonb cannot hold U+0000, and the driver would store a lone
 * surrogate as U+FFFD. Either must be a 422 naming the field, on every path in,
 * and never a 500 or a silently altered record.
 */

let svc: TestService;
let org: OrgFixture;
let agent: TestAgent;

beforeAll(async () => {
  svc = await startService();
  org = await newOrgFixture(svc);
  agent = await newAgent(svc, org);
});
afterAll(() => svc?.close());

function expectInvalid(res: { status: number; detail?: string; body: any; transport: string }, field: string, code = "invalid_character") {
  expectResult(res as never, 422, "validation_failed");
  expect(res.body.errors, JSON.stringify(res.body)).toContainEqual(expect.objectContaining({ field, code }));
}

describe.each(TRANSPORTS)("text Postgres cannot store, over %s", (transport) => {
  it("a U+0000 in a body field is refused and nothing is created", async () => {
    const before = (await svc.v1("GET", "/v1/principals?page_size=500", { bearer: org.apiKey })).body.principals.length;
    expectInvalid(await call(svc, transport, PrincipalService.method.createPrincipal, { display_name: "Pat\u0000Payables", kind: "person" }, { bearer: org.apiKey }), "display_name");
    expectInvalid(
      await call(svc, transport, AgentService.method.registerAgent, { name: "a", acting_for_principal_id: org.principalId, public_key: "ed25519:base64:AAAA", owner: "\u0000" }, { bearer: org.apiKey }),
      "owner",
    );
    expectInvalid(
      await call(svc, transport, AuthorityGraphService.method.uploadGovernanceDocument, { name: "matrix.csv", kind: "approval_matrix", format: "csv", content: "role,max\n\u0000,1\n" }, { bearer: org.apiKey }),
      "content",
    );
    expect((await svc.v1("GET", "/v1/principals?page_size=500", { bearer: org.apiKey })).body.principals).toHaveLength(before);
  });

  it("a U+0000 in a path variable is refused, not looked up", async () => {
    expectInvalid(await call(svc, transport, PrincipalService.method.getPrincipal, { principal_id: "pr_\u0000" }, { bearer: org.apiKey }), "principal_id");
  });

  it("a signed Intent carrying U+0000 is refused and records no decision", async () => {
    const before = await decisionCount(svc, org.apiKey, agent.agentId);
    expectInvalid(await submitIntent(svc, transport, signBody(agent, intentDoc(agent.agentId, { context: { note: "a\u0000b" } }))), "context.note");
    expectInvalid(await submitIntent(svc, transport, signBody(agent, intentDoc(agent.agentId, { ["k\u0000"]: 1 }))), "k\u0000");
    expect(await decisionCount(svc, org.apiKey, agent.agentId)).toBe(before);
  });

  it("a signed Intent that is not valid UTF-8 is refused, not stored with replacement characters", async () => {
    const before = await decisionCount(svc, org.apiKey, agent.agentId);
    const text = JSON.stringify(intentDoc(agent.agentId, { counterparty: "ACME_" }));
    const bytes = Buffer.from(text);
    bytes[text.indexOf("ACME_") + 4] = 0xff;
    expectInvalid(await submitIntent(svc, transport, signBody(agent, new Uint8Array(bytes))), "(body)", "invalid_encoding");
    expect(await decisionCount(svc, org.apiKey, agent.agentId)).toBe(before);
  });

  it("an agent-signed heartbeat carrying U+0000 is refused", async () => {
    expectInvalid(await heartbeat(svc, transport, agent, { nonce: `${randomUUID()}\u0000` }), "nonce");
  });
});

describe("text Postgres cannot store, over JSON-only paths", () => {
  it("/v1: a lone surrogate is refused rather than stored as U+FFFD", async () => {
    const res = await svc.v1("POST", "/v1/principals", { bearer: org.apiKey, body: { display_name: "Pat \ud800", kind: "person" } });
    expect(res.status, JSON.stringify(res.body)).toBe(422);
    expect(res.body.errors).toContainEqual(expect.objectContaining({ field: "display_name", code: "invalid_character" }));
  });

  it("/v1: a body that is not valid UTF-8 is refused", async () => {
    const res = await svc.v1("POST", "/v1/principals", { bearer: org.apiKey, headers: { "content-type": "application/json" }, body: Buffer.from([0x7b, 0x22, 0x64, 0x22, 0x3a, 0x22, 0xc3, 0x28, 0x22, 0x7d]) });
    expect(res.status, JSON.stringify(res.body)).toBe(422);
    expect(res.body.errors).toContainEqual(expect.objectContaining({ field: "(body)", code: "invalid_encoding" }));
  });

  it("Connect JSON: a U+0000 gets INVALID_ARGUMENT with an ErrorDetail (the case the fuzz test found)", async () => {
    const res = await svc.v1("POST", "/mandate.v1.OrganizationService/CreateOrganization", {
      headers: { "x-service-operator-key": svc.operatorKey!, "content-type": "application/json", "connect-protocol-version": "1" },
      body: Buffer.from('{"name":"\\u0000"}'),
    });
    expect(res.status, JSON.stringify(res.body)).toBe(400);
    expect(res.body.code).toBe("invalid_argument");
    const detail = fromBinary(ErrorDetailSchema, Buffer.from(res.body.details[0].value, "base64"));
    expect(detail.detail).toBe("validation_failed");
    expect(detail.errors.map((e) => e.field)).toEqual(["name"]);
  });
});

describe("edges the API fuzz test found (each was a 500)", () => {
  it("JSON nested deeper than 64 levels is refused with 422 too_deep, signed or not", async () => {
    const deep = (n: number): unknown => (n === 0 ? "leaf" : [deep(n - 1)]);
    const graph = await svc.v1("POST", "/v1/authority-graph/versions", { bearer: org.apiKey, body: `{"graph":{"x":${"[".repeat(10_000)}${"]".repeat(10_000)}}}` });
    expect(graph.status, JSON.stringify(graph.body)).toBe(422);
    expect(graph.body.errors[0]).toMatchObject({ code: "too_deep" });
    for (const transport of TRANSPORTS) {
      const res = await submitIntent(svc, transport, signBody(agent, intentDoc(agent.agentId, { context: { x: deep(100) } })));
      expectResult(res as never, 422, "validation_failed");
      expect(res.body.errors[0].code).toBe("too_deep");
      expect(res.body.errors[0].field).toMatch(/^context\.x(\[0\])+$/);
    }
  });

  it("Connect JSON nested thousands deep (which overflows connect's decoder) says so, as INVALID_ARGUMENT", async () => {
    const res = await svc.v1("POST", "/mandate.v1.AuthorityGraphService/CreateGraphVersion", {
      headers: { authorization: `Bearer ${org.apiKey}`, "content-type": "application/json", "connect-protocol-version": "1" },
      body: Buffer.from(`{"graph":{"x":${"[".repeat(20_000)}${"]".repeat(20_000)}}}`),
    });
    expect(res.status, JSON.stringify(res.body)).toBe(400);
    const detail = fromBinary(ErrorDetailSchema, Buffer.from(res.body.details[0].value, "base64"));
    expect(detail).toMatchObject({ detail: "validation_failed", message: "The message is nested too deeply." });
    expect(detail.errors.map((e) => e.code)).toEqual(["too_deep"]);
  });

  it("a page token holding an instant Postgres cannot store is a 422, not a query", async () => {
    for (const t of [["-004713-11-23T23:59:59.999Z", ""], [-8640000000000000, ""], ["2024-01-01T00:00:00.000Z", 5]]) {
      const token = Buffer.from(JSON.stringify(t)).toString("base64url");
      for (const path of ["/v1/agents", "/v1/principals", "/v1/decisions"]) {
        const res = await svc.v1("GET", `${path}?page_token=${token}`, { bearer: org.apiKey });
        expect(res.status, `${path} ${JSON.stringify(t)}: ${JSON.stringify(res.body)}`).toBe(422);
        expect(res.body.errors).toContainEqual(expect.objectContaining({ field: "page_token" }));
      }
    }
  });

  it("Connect ListEvidence with after_seq beyond 2^53 is INVALID_ARGUMENT, not a Postgres range error", async () => {
    for (const afterSeq of ["9223372036854775807", "-9223372036854775808", "9007199254740992"]) {
      const res = await svc.v1("POST", "/mandate.v1.EvidenceService/ListEvidence", {
        headers: { authorization: `Bearer ${org.apiKey}`, "content-type": "application/json", "connect-protocol-version": "1" },
        body: Buffer.from(JSON.stringify({ afterSeq })),
      });
      expect(res.status, `${afterSeq}: ${JSON.stringify(res.body)}`).toBe(400);
      const detail = fromBinary(ErrorDetailSchema, Buffer.from(res.body.details[0].value, "base64"));
      expect(detail).toMatchObject({ detail: "validation_failed" });
      expect(detail.errors.map((e) => e.field)).toEqual(["after_seq"]);
    }
  });
});
