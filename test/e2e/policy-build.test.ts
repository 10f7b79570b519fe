import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startService, type TestService } from "../support/service.js";

/*
 * `mandate policy build` against the service: the example directory published through /v1
 * (principals, governance documents, graph generated, approved and published, every policy
 * authored, approved by a second key and published) ends with the bundle digest the CLI
 * computes offline for the same directory. And a module using a built-in the service refuses
 * is refused by the CLI with the service's own message.
 */

const EXAMPLE = "examples/policy-test";
const run = promisify(execFile);
const mandate = (...args: string[]) =>
  run(process.execPath, ["--import", "tsx", "src/cli/main.ts", ...args]).then(
    (r) => ({ code: 0, out: r.stdout, err: r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, out: e.stdout, err: e.stderr }),
  );

let svc: TestService;
const scratch: string[] = [];
beforeAll(async () => {
  svc = await startService();
}, 120_000);
afterAll(async () => {
  await svc?.close();
  for (const d of scratch) await rm(d, { recursive: true, force: true });
});

async function ok(method: string, path: string, bearer: string, body?: unknown) {
  const res = await svc.v1(method, path, { bearer, ...(body === undefined ? {} : { body }) });
  expect(res.status, `${method} ${path}: ${JSON.stringify(res.body)}`).toBe(200);
  return res.body;
}

/** The bundle_digest of the organization's last policy or graph publication, from its evidence. */
async function publishedDigest(key: string): Promise<string> {
  let after = 0;
  let digest: string | undefined;
  for (;;) {
    const page = await ok("GET", `/v1/evidence?after_seq=${after}&page_size=1000`, key);
    for (const r of page.records as { seq: string | number; kind: string; payload: { bundle_digest?: string } }[]) {
      if (r.kind === "policy.published" || r.kind === "graph.published") digest = r.payload.bundle_digest;
      after = Number(r.seq);
    }
    if (!page.has_more) break;
  }
  if (!digest) throw new Error("no publication in the evidence");
  return digest;
}

describe("mandate policy build and the service", () => {
  it("builds byte for byte the bundle the service builds when the same directory is published", async () => {
    const org = await svc.newOrg();
    const author = org.apiKey;
    const approver = (await ok("POST", "/v1/organization/api-keys", author, { name: "approver", permissions: ["POLICY_APPROVER", "EVIDENCE_READ"] })).api_key as string;

    const names = (await readdir(EXAMPLE)).sort();
    const text = (name: string) => readFile(join(EXAMPLE, name), "utf8");

    const principals = (await text("principals.csv")).trim().split("\n").slice(1);
    for (const line of principals) {
      const [external_ref, display_name, kind] = line.split(",");
      await ok("POST", "/v1/principals", author, { external_ref, display_name, kind });
    }
    for (const kind of ["signing_schedule", "delegation_of_authority", "approval_matrix"]) {
      await ok("POST", "/v1/authority-graph/documents", author, { kind, name: kind, format: "csv", content: await text(`${kind}.csv`) });
    }
    const graph = await ok("POST", "/v1/authority-graph/versions:generate", author, {});
    await ok("POST", `/v1/authority-graph/versions/${graph.version}/approve`, approver, {});
    await ok("POST", `/v1/authority-graph/versions/${graph.version}/publish`, approver, {});

    for (const name of names) {
      const rules = /^(.+)\.rules\.yaml$/.exec(name)?.[1];
      const rego = !name.endsWith("_test.rego") ? /^(.+)\.rego$/.exec(name)?.[1] : undefined;
      const key = rules ?? rego;
      if (key === undefined) continue;
      const source = rules ? { rules_yaml: await text(name) } : { rego: await text(name) };
      const created = await ok("POST", "/v1/policies", author, { policy_key: key, description: key, source });
      await ok("POST", `/v1/policies/${key}/versions/${created.version}/submit`, author, {});
      await ok("POST", `/v1/policies/${key}/versions/${created.version}/approve`, approver, {});
      await ok("POST", `/v1/policies/${key}/versions/${created.version}/publish`, approver, {});
    }
    const serviceDigest = await publishedDigest(approver);

    const dir = await mkdtemp(join(tmpdir(), "policy-build-"));
    scratch.push(dir);
    const out = join(dir, "bundle.tar.gz");
    const built = await mandate("policy", "build", EXAMPLE, "-o", out, "--graph-version", String(graph.version));
    expect(built.code, built.out + built.err).toBe(0);
    expect(built.out).toContain(`sha256 ${serviceDigest}`);
  }, 180_000);

  it("refuses a built-in the service refuses, with the service's message", async () => {
    const org = await svc.newOrg();
    const rego = `package mandate.policies.clock

actions := {"late_payment"}

results contains {"outcome": "DENY", "reason": "too_late", "rule": "clock"} if {
	time.now_ns() > 0
}
`;
    const res = await svc.v1("POST", "/v1/policies", { bearer: org.apiKey, body: { policy_key: "clock", description: "clock", source: { rego } } });
    expect(res.status).toBe(422);
    const problem = (res.body.errors as { message: string; line: number; column: number }[])[0]!;
    expect(problem.message).toContain("time.now_ns");

    const dir = await mkdtemp(join(tmpdir(), "policy-build-"));
    scratch.push(dir);
    await writeFile(join(dir, "clock.rego"), rego);
    const tested = await mandate("policy", "build", dir, "-o", join(dir, "bundle.tar.gz"));
    expect(tested.code).toBe(1);
    expect(tested.out).toContain(`${join(dir, "clock.rego")}:${problem.line}:${problem.column}: `);
    expect(tested.out).toContain(problem.message);
  }, 60_000);
});
