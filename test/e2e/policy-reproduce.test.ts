import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exportEvidence, expectResult, newAgent, newOrgFixture, paymentDoc, publishPaymentsPolicy, signBody, submitIntent, type OrgFixture } from "../support/agents.js";
import { startService, type TestService } from "../support/service.js";

/*
 * `mandate policy reproduce`: a recorded decision evaluated again offline, with opa-wasm alone,
 * from its bundle (downloaded with GET /v1/bundles/{digest}) and the input its evidence records
 * (the Intent, now, agent, principal).
 */

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

let svc: TestService;
let org: OrgFixture;
let tmp: string;
let exported: { records: any[]; jwks: { keys: any[] }; head: any };
/** The decisions recorded, by expected outcome. */
const decisions: Record<string, { decision_id: string; evidence_id: string; bundle_digest: string }> = {};

function cli(...args: string[]): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ["--import", "tsx", "src/cli/main.ts", "policy", "reproduce", ...args], { cwd: root, timeout: 60_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === "number" ? err.code : -1) : 0;
      resolve({ code, out: `${stdout}${stderr}` });
    });
  });
}

async function writeJson(name: string, value: unknown): Promise<string> {
  const file = path.join(tmp, name);
  await writeFile(file, JSON.stringify(value, null, 2));
  return file;
}

beforeAll(async () => {
  // Not a test of the time limit: room for a first evaluation in a worker on a loaded machine.
  svc = await startService({ MANDATE_EVALUATION_TIMEOUT_MS: "5000" } as never);
  org = await newOrgFixture(svc);
  tmp = await mkdtemp(path.join(os.tmpdir(), "mandate-reproduce-"));
  // The payments policy decides from the authority graph: the bundle's data matters too.
  await publishPaymentsPolicy(svc, org);
  const agent = await newAgent(svc, org);
  for (const amount of [10, 2_500, 30_000]) {
    const res = await submitIntent(svc, "v1", signBody(agent, paymentDoc(agent.agentId, amount)));
    expectResult(res, 200);
    decisions[res.body.outcome] = res.body;
  }
  expect(Object.keys(decisions).sort()).toEqual(["ALLOW", "DENY", "HUMAN_REVIEW"]);
  exported = await exportEvidence(svc, org.apiKey);
  for (const d of Object.values(decisions)) d.bundle_digest = exported.records.find((r) => r.subject_id === d.decision_id).payload.bundle_digest;
  // The bundle the decisions were evaluated with, downloaded, saved where reproduce looks by default.
  const digest = decisions.ALLOW!.bundle_digest;
  const res = await fetch(`${svc.baseUrl}/v1/bundles/${digest}`, { headers: { authorization: `Bearer ${org.apiKey}` } });
  expect(res.status).toBe(200);
  await writeFile(path.join(tmp, `${digest}.tar.gz`), Buffer.from(await res.arrayBuffer()));
}, 120_000);

afterAll(async () => {
  await svc?.close();
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

describe("mandate policy reproduce", () => {
  it("reproduces each recorded decision of an export from its bundle and recorded input", async () => {
    const file = await writeJson("export.json", exported);
    for (const [outcome, d] of Object.entries(decisions)) {
      const res = await cli("--decision", d.decision_id, file);
      expect(res.code, res.out).toBe(0);
      expect(res.out).toContain(`reproduced: ${outcome}`);
      expect(res.out).toContain("match:");
    }
  }, 120_000);

  it("reproduces a single decision record read from GET /v1/evidence/{id}, with the bundle named", async () => {
    const record = await svc.v1("GET", `/v1/evidence/${decisions.DENY!.evidence_id}`, { bearer: org.apiKey });
    expect(record.status).toBe(200);
    const file = await writeJson("one.json", record.body);
    const res = await cli("--bundle", path.join(tmp, `${decisions.DENY!.bundle_digest}.tar.gz`), file);
    expect(res.code, res.out).toBe(0);
    expect(res.out).toContain("reproduced: DENY exceeds_approval_limit");
  }, 60_000);

  it("reports a mismatch (exit 1) when the recorded outcome or the recorded input was altered", async () => {
    const record = (await svc.v1("GET", `/v1/evidence/${decisions.ALLOW!.evidence_id}`, { bearer: org.apiKey })).body;
    const outcome = structuredClone(record);
    outcome.payload.outcome = "DENY";
    let res = await cli(await writeJson("tampered-outcome.json", outcome));
    expect(res.code, res.out).toBe(1);
    expect(res.out).toContain("MISMATCH");
    expect(res.out).toContain("recorded:   DENY");
    expect(res.out).toContain("reproduced: ALLOW within_delegated_authority");

    const input = structuredClone(record);
    input.payload.intent.amount = 30_000;
    res = await cli(await writeJson("tampered-input.json", input));
    expect(res.code, res.out).toBe(1);
    expect(res.out).toContain("reproduced: DENY exceeds_approval_limit");
  }, 60_000);

  it("refuses bad input with exit 2: several decisions unnamed, a wrong bundle, a record without its input, not JSON", async () => {
    const all = await writeJson("all.json", exported);
    let res = await cli(all);
    expect(res.code, res.out).toBe(2);
    expect(res.out).toContain("--decision");

    const record = (await svc.v1("GET", `/v1/evidence/${decisions.ALLOW!.evidence_id}`, { bearer: org.apiKey })).body;
    const wrong = path.join(tmp, "wrong.tar.gz");
    await writeFile(wrong, Buffer.from("not the bundle"));
    res = await cli("--bundle", wrong, await writeJson("one-allow.json", record));
    expect(res.code, res.out).toBe(2);
    expect(res.out).toContain(`not ${decisions.ALLOW!.bundle_digest}`);

    const old = structuredClone(record);
    delete old.payload.now;
    res = await cli(await writeJson("no-now.json", old));
    expect(res.code, res.out).toBe(2);
    expect(res.out).toContain("does not record its evaluation's input");

    const garbage = path.join(tmp, "garbage.json");
    await writeFile(garbage, "{not json");
    res = await cli(garbage);
    expect(res.code, res.out).toBe(2);
  }, 60_000);
});
