import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AuthorityGraphService } from "../../src/gen/mandate/v1/authority_graph_pb.js";
import { call, expectResult, exportEvidence, newApiKey, newOrgFixture, TRANSPORTS, type OrgFixture, type Transport } from "../support/agents.js";
import { startService, type TestService } from "../support/service.js";

/*
 * Governance documents and graph versions through the service, over /v1 and gRPC: documents
 * are parsed at upload (refused at their file line, with the bad value), named, listed and
 * deleted; generation warns of delegation cycles and shadowed rows; a graph version needs a
 * second identity's approval before it can be published; every version stays readable.
 * test/cases/policies.yaml holds the contract cases (field names, codes, line and column on
 * every transport).
 */

const M = AuthorityGraphService.method;

let svc: TestService;
beforeAll(async () => {
  svc = await startService();
});
afterAll(() => svc?.close());

/** An organization with its all-permission key (the author), an approver key, and the principal's external_ref. */
async function setup(): Promise<OrgFixture & { approver: string; approverKeyId: string; authorKeyId: string; ref: string }> {
  const org = await newOrgFixture(svc);
  const approver = await newApiKey(svc, org.apiKey, ["POLICY_APPROVER", "EVIDENCE_READ"], "approver");
  const me = await svc.v1("GET", "/v1/organization/api-keys", { bearer: org.apiKey });
  const principal = await svc.v1("GET", `/v1/principals/${org.principalId}`, { bearer: org.apiKey });
  const authorKeyId = (me.body.api_keys as { key_id: string; name: string }[]).find((k) => k.key_id !== approver.keyId)!.key_id;
  return { ...org, approver: approver.apiKey, approverKeyId: approver.keyId, authorKeyId, ref: principal.body.external_ref };
}

const upload = (t: Transport, bearer: string, doc: { name: string; kind: string; format: string; content: string }) => call(svc, t, M.uploadGovernanceDocument, doc, { bearer });
const listDocuments = async (t: Transport, bearer: string) => (await call(svc, t, M.listGovernanceDocuments, {}, { bearer })).body.documents as Record<string, unknown>[];

describe.each(TRANSPORTS)("governance documents over %s", (t) => {
  it("refuses at upload a document that does not parse, at its file line and column, echoing the value, and stores nothing", async () => {
    const org = await setup();
    const csv = await upload(t, org.apiKey, {
      name: "doa.csv",
      kind: "delegation_of_authority",
      format: "csv",
      content: "holder,delegate,action,currency,max_amount,valid_until\nrole:clerk,,vendor_payment,USD,1000,\n\nrole:clerk,,vendor_payment,USD,lots,\n",
    });
    expectResult(csv, 422, "validation_failed");
    // Line 4: the header is line 1 and the blank line 3 still counts.
    expect(csv.body.errors).toEqual([expect.objectContaining({ field: "content[line 4].max_amount", code: "invalid_value", line: 4, column: 5 })]);
    expect(csv.body.errors[0].message).toMatch(/^content line 4, column 5: max_amount must be a plain decimal number .*\(found "lots"\)$/);

    const yaml = await upload(t, org.apiKey, {
      name: "matrix.yaml",
      kind: "approval_matrix",
      format: "yaml",
      content: "- action: vendor_payment\n  currency: USD\n  up_to_amount: 1000\n  approvals_required: 0\n- action: vendor_payment\n  currency: usd\n  up_to_amount: 5000\n  approvals_required: 1\n",
    });
    expectResult(yaml, 422, "validation_failed");
    expect(yaml.body.errors).toEqual([expect.objectContaining({ field: "content[line 6].currency", code: "invalid_value", line: 6, column: 13 })]);
    expect(yaml.body.errors[0].message).toContain('(found "usd")');

    const json = await upload(t, org.apiKey, { name: "schedule.json", kind: "signing_schedule", format: "json", content: '[\n  {"role": "ceo"},\n  {"role": "cfo" "reports_to": "ceo"}\n]' });
    expectResult(json, 422, "validation_failed");
    expect(json.body.errors).toEqual([expect.objectContaining({ field: "content[line 3]", code: "invalid_json", line: 3, column: 18 })]);

    expect(await listDocuments(t, org.apiKey)).toEqual([]);
  });

  it("names documents (required, at most 200 characters, unique), lists them with rows and author, and deletes them", async () => {
    const org = await setup();
    const other = await setup();
    const schedule = (name: string) => ({ name, kind: "signing_schedule", format: "csv", content: `principal,role,reports_to\n${org.ref},clerk,\n,controller,\n` });

    const unnamed = await upload(t, org.apiKey, schedule(""));
    expectResult(unnamed, 422, "validation_failed");
    expect(unnamed.body.errors).toEqual([expect.objectContaining({ field: "name", code: "required" })]);
    expectResult(await upload(t, org.apiKey, schedule("x".repeat(201))), 422, "validation_failed");

    const first = await upload(t, org.apiKey, schedule("é".repeat(200)));
    expectResult(first, 200);
    expect(first.body).toMatchObject({ name: "é".repeat(200), kind: "signing_schedule", format: "csv", rows: 2, author: org.authorKeyId });
    const taken = await upload(t, org.apiKey, schedule("é".repeat(200)));
    expectResult(taken, 409, "already_exists");
    // Names are per organization.
    expectResult(await upload(t, other.apiKey, { ...schedule("é".repeat(200)), content: "principal,role,reports_to\n,clerk,\n" }), 200);

    const second = await upload(t, org.apiKey, schedule("schedule-2.csv"));
    expect((await listDocuments(t, org.apiKey)).map((d) => [d.document_id, d.name, d.rows, d.author])).toEqual([
      [first.body.document_id, "é".repeat(200), 2, org.authorKeyId],
      [second.body.document_id, "schedule-2.csv", 2, org.authorKeyId],
    ]);

    // Another organization's document does not exist for this one.
    expectResult(await call(svc, t, M.deleteGovernanceDocument, { document_id: first.body.document_id }, { bearer: other.apiKey }), 404, "not_found");
    expectResult(await call(svc, t, M.deleteGovernanceDocument, { document_id: "doc_unknown" }, { bearer: org.apiKey }), 404, "not_found");
    const deleted = await call(svc, t, M.deleteGovernanceDocument, { document_id: first.body.document_id }, { bearer: org.apiKey });
    expectResult(deleted, 200);
    expect(deleted.body).toEqual({});
    expectResult(await call(svc, t, M.deleteGovernanceDocument, { document_id: first.body.document_id }, { bearer: org.apiKey }), 404, "not_found");
    expect((await listDocuments(t, org.apiKey)).map((d) => d.document_id)).toEqual([second.body.document_id]);
    // A deleted document is gone for generation too, and its name is free again.
    const named = await call(svc, t, M.generateGraphVersion, { document_ids: [first.body.document_id] }, { bearer: org.apiKey });
    expectResult(named, 422, "validation_failed");
    expect(named.body.errors).toEqual([expect.objectContaining({ field: "document_ids", code: "not_found" })]);
    expectResult(await upload(t, org.apiKey, schedule("é".repeat(200))), 200);
  });

  it("keeps a generated graph version when its documents are deleted", async () => {
    const org = await setup();
    const doc = await upload(t, org.apiKey, { name: "schedule.csv", kind: "signing_schedule", format: "csv", content: `principal,role,reports_to\n${org.ref},clerk,\n` });
    const generated = await call(svc, t, M.generateGraphVersion, {}, { bearer: org.apiKey });
    expectResult(generated, 200);
    expectResult(await call(svc, t, M.deleteGovernanceDocument, { document_id: doc.body.document_id }, { bearer: org.apiKey }), 200);
    const version = await call(svc, t, M.getGraphVersion, { version: generated.body.version }, { bearer: org.apiKey });
    expectResult(version, 200);
    expect(version.body.graph.memberships).toEqual([{ principal: org.ref, role: "clerk" }]);
    // With nothing left to generate from, generation says so (and is not broken by what was deleted).
    const none = await call(svc, t, M.generateGraphVersion, {}, { bearer: org.apiKey });
    expectResult(none, 422, "validation_failed");
    expect(none.body.errors).toEqual([expect.objectContaining({ field: "document_ids", code: "required" })]);
  });

  it("reports delegation cycles and shadowed rows as warnings citing the document by name and line, and creates the version", async () => {
    const org = await setup();
    const second = await svc.v1("POST", "/v1/principals", { bearer: org.apiKey, body: { display_name: "Sam", kind: "person", external_ref: `sam-${org.ref}` } });
    const sam = second.body.external_ref as string;
    const doa = await upload(t, org.apiKey, {
      name: "doa.csv",
      kind: "delegation_of_authority",
      format: "csv",
      content: [
        "holder,delegate,action,currency,max_amount,valid_until",
        `${org.ref},,vendor_payment,USD,1000,`,
        `${org.ref},${sam},vendor_payment,USD,500,`,
        `${sam},${org.ref},vendor_payment,USD,400,`,
        `${org.ref},,vendor_payment,USD,900,`,
      ].join("\n"),
    });
    expectResult(doa, 200);
    expectResult(await upload(t, org.apiKey, { name: "matrix.csv", kind: "approval_matrix", format: "csv", content: "action,currency,up_to_amount,approvals_required\nvendor_payment,USD,1000,1\nvendor_payment,USD,100,0\n" }), 200);
    const generated = await call(svc, t, M.generateGraphVersion, {}, { bearer: org.apiKey });
    expectResult(generated, 200);
    expect(generated.body).toMatchObject({ version: 1, state: "draft" });
    expect(generated.body.warnings).toEqual([
      { code: "delegation_cycle", document: "doa.csv", line: 4, message: `delegations of vendor_payment in USD form a cycle: ${org.ref} → ${sam} → ${org.ref}` },
      { code: "shadowed_row", document: "doa.csv", line: 5, message: `the limit of ${org.ref} for vendor_payment of 900 USD with no end never applies: doa.csv line 2 grants 1000 USD with no end` },
      expect.objectContaining({ code: "shadowed_row", document: "matrix.csv", line: 3 }),
    ]);
  });
});

describe.each(TRANSPORTS)("graph versions over %s", (t) => {
  const graph = (ref: string, max: number) => ({
    roles: [{ role: "clerk", reports_to: "" }],
    memberships: [{ principal: ref, role: "clerk" }],
    limits: [{ holder: "role:clerk", action: "vendor_payment", currency: "USD", max_amount: max }],
    delegations: [],
    approval_matrix: [{ action: "vendor_payment", currency: "USD", up_to_amount: max, approvals_required: 0 }],
  });

  it("need a second identity's approval before publication, and graph.published evidence names author and approver", async () => {
    const org = await setup();
    const created = await call(svc, t, M.createGraphVersion, { graph: graph(org.ref, 100) }, { bearer: org.apiKey });
    expectResult(created, 200);
    expect(created.body).toEqual({ version: 1, state: "draft", warnings: [] });
    expectResult(await call(svc, t, M.publishGraphVersion, { version: 1 }, { bearer: org.approver }), 409, "invalid_transition");
    expectResult(await call(svc, t, M.approveGraphVersion, { version: 1 }, { bearer: org.apiKey }), 403, "permission_denied");
    const approved = await call(svc, t, M.approveGraphVersion, { version: 1 }, { bearer: org.approver });
    expectResult(approved, 200);
    expect(approved.body).toEqual({ version: 1, state: "approved", warnings: [] });
    const published = await call(svc, t, M.publishGraphVersion, { version: 1 }, { bearer: org.approver });
    expect(published.body).toEqual({ version: 1, state: "active", warnings: [] });

    const { records } = await exportEvidence(svc, org.approver);
    const evidence = records.filter((r) => r.kind === "graph.published");
    expect(evidence).toHaveLength(1);
    expect(evidence[0].payload).toMatchObject({ version: 1, author: org.authorKeyId, approver: org.approverKeyId, by: org.approverKeyId });
    const active = await call(svc, t, M.getAuthorityGraph, {}, { bearer: org.apiKey });
    expect(active.body).toMatchObject({ version: 1, state: "active", author: org.authorKeyId, approver: org.approverKeyId });
  });

  it("are all listed newest first without graphs, and each is readable whatever its state", async () => {
    const org = await setup();
    const other = await setup();
    for (const max of [100, 200, 300, 400]) expectResult(await call(svc, t, M.createGraphVersion, { graph: graph(org.ref, max) }, { bearer: org.apiKey }), 200);
    for (const v of [1, 2, 3]) expectResult(await call(svc, t, M.approveGraphVersion, { version: v }, { bearer: org.approver }), 200);
    for (const v of [1, 2]) expectResult(await call(svc, t, M.publishGraphVersion, { version: v }, { bearer: org.approver }), 200);

    const list = await call(svc, t, M.listGraphVersions, {}, { bearer: org.apiKey });
    expectResult(list, 200);
    const versions = list.body.versions as Record<string, unknown>[];
    expect(versions.map((v) => [v.version, v.state])).toEqual([
      [4, "draft"],
      [3, "approved"],
      [2, "active"],
      [1, "superseded"],
    ]);
    expect(versions.every((v) => v.graph === undefined && v.author === org.authorKeyId && typeof v.created_at === "string")).toBe(true);
    expect(versions.map((v) => v.approver || null)).toEqual([null, org.approverKeyId, org.approverKeyId, org.approverKeyId]);
    expect(versions.map((v) => typeof v.published_at)).toEqual(["undefined", "undefined", "string", "string"]);

    for (const [version, state, max] of [[1, "superseded", 100], [3, "approved", 300], [4, "draft", 400]] as const) {
      const one = await call(svc, t, M.getGraphVersion, { version }, { bearer: org.apiKey });
      expectResult(one, 200);
      expect(one.body).toMatchObject({ version, state, author: org.authorKeyId, created_at: expect.any(String) });
      expect(one.body.graph.limits[0].max_amount).toBe(max);
    }
    expectResult(await call(svc, t, M.getGraphVersion, { version: 5 }, { bearer: org.apiKey }), 404, "not_found");
    expectResult(await call(svc, t, M.getGraphVersion, { version: 1 }, { bearer: other.apiKey }), 404, "not_found");
    expect((await call(svc, t, M.listGraphVersions, {}, { bearer: other.apiKey })).body.versions).toEqual([]);
  });
});

describe("under concurrency (the database decides)", () => {
  it("one of several uploads under one name is stored, the others are already_exists", async () => {
    const org = await setup();
    const results = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        upload(i % 2 ? "grpc" : "v1", org.apiKey, { name: "race.csv", kind: "signing_schedule", format: "csv", content: `principal,role,reports_to\n,role${i},\n` }),
      ),
    );
    expect(results.map((r) => r.status).sort()).toEqual([200, 409, 409, 409, 409, 409]);
    expect(results.filter((r) => r.status === 409).every((r) => r.detail === "already_exists")).toBe(true);
    expect(await listDocuments("v1", org.apiKey)).toHaveLength(1);
  });

  it("one of two approvals racing for a draft wins; the other finds it approved", async () => {
    const org = await setup();
    const second = await newApiKey(svc, org.apiKey, ["POLICY_APPROVER"], "second approver");
    expectResult(await call(svc, "v1", M.createGraphVersion, { graph: {} }, { bearer: org.apiKey }), 200);
    const results = await Promise.all([org.approver, second.apiKey].map((bearer) => call(svc, "v1", M.approveGraphVersion, { version: 1 }, { bearer })));
    expect(results.map((r) => [r.status, r.detail ?? null]).sort()).toEqual([
      [200, null],
      [409, "invalid_transition"],
    ]);
    const winner = results.findIndex((r) => r.status === 200);
    const version = await call(svc, "v1", M.getGraphVersion, { version: 1 }, { bearer: org.apiKey });
    expect(version.body).toMatchObject({ state: "approved", approver: [org.approverKeyId, second.keyId][winner] });
  });
});
