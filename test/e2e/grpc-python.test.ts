import { mkdtemp, readdir, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startService, uniqueEmail, type TestService } from "../support/service.js";
import { pythonVenv, ROOT, run } from "./clients-python-env.js";

/*
 * Issue 8, "any gRPC stack": Python stubs generated with grpcio-tools from
 * proto/ alone (google/api vendored there; google/rpc/status.proto, for the
 * status details, from google-proto-files), then
 * examples/grpc/python/submit_and_verify.py submits a signed Intent over gRPC
 * (bytes field + x-service-key-id / x-service-signature metadata), issues and
 * verifies a Capability over gRPC, and reads the mandate.v1.ErrorDetail of a
 * replay and of a tampered signature. And `buf curl` works from reflection.
 */

let svc: TestService;
let python: string;
let stubs: string;

beforeAll(async () => {
  [svc, python, stubs] = await Promise.all([startService(), pythonVenv(), mkdtemp(path.join(os.tmpdir(), "mandate-grpc-py-"))]);
}, 300_000);
afterAll(async () => {
  await svc?.close();
  if (stubs) await rm(stubs, { recursive: true, force: true });
});

describe("Python grpcio with stubs generated from proto/", () => {
  it("generates the stubs with grpcio-tools", async () => {
    const include = await run(python, ["-c", "import grpc_tools, os; print(os.path.join(os.path.dirname(grpc_tools.__file__), '_proto'))"]);
    expect(include.code, include.stderr).toBe(0);
    const protos = (await readdir(path.join(ROOT, "proto/mandate/v1"))).filter((f) => f.endsWith(".proto")).map((f) => `proto/mandate/v1/${f}`);
    const res = await run(python, [
      "-m",
      "grpc_tools.protoc",
      "-I",
      "proto",
      "-I",
      "node_modules/google-proto-files",
      "-I",
      include.stdout.trim(),
      `--python_out=${stubs}`,
      `--grpc_python_out=${stubs}`,
      ...protos.map((p) => path.relative("proto", p)),
      "google/api/annotations.proto",
      "google/api/http.proto",
      "google/api/field_behavior.proto",
      "google/rpc/status.proto",
    ]);
    expect(res.code, res.stderr).toBe(0);
    const generated = await readdir(path.join(stubs, "mandate/v1"));
    expect(generated).toContain("intents_pb2_grpc.py");
    expect(generated).toContain("capabilities_pb2_grpc.py");
  });

  it("submits a signed Intent and verifies its Capability over gRPC; replay and tampering fail with an ErrorDetail", async () => {
    const res = await run(python, [path.join(ROOT, "examples/grpc/python/submit_and_verify.py")], {
      env: { PYTHONPATH: stubs, MANDATE_BASE_URL: svc.baseUrl, PYTHONDONTWRITEBYTECODE: "1" },
      timeoutMs: 60_000,
    });
    expect(res.code, `${res.stdout}\n${res.stderr}`).toBe(0);
    const out = JSON.parse(res.stdout.trim().split("\n").at(-1)!);
    expect(out).toMatchObject({
      agent_state: "AGENT_STATE_ACTIVE",
      outcome: "OUTCOME_ALLOW",
      reason: "starter_reference_action",
      verified_constraints: { amount: "42", currency: "USD" },
      replay: ["FAILED_PRECONDITION", "capability_consumed"],
      tampered: ["UNAUTHENTICATED", "signature_invalid"],
    });
    expect(out.verified_capability_id).toBe(out.capability_id);
    expect(out.verified_decision_id).toBe(out.decision_id);
  });
});

describe("buf curl from server reflection", () => {
  it("calls an RPC knowing only the service URL", async () => {
    const res = await run("npx", [
      "buf",
      "curl",
      "--protocol",
      "grpc",
      "--http2-prior-knowledge",
      "-d",
      JSON.stringify({ email: uniqueEmail("bufcurl") }),
      `${svc.baseUrl}/mandate.v1.SandboxService/CreateSandboxOrganization`,
    ]);
    expect(res.code, res.stderr).toBe(0);
    const body = JSON.parse(res.stdout);
    expect(body.organizationId).toMatch(/^org_/);
    expect(body.starterPolicyKey).toBe("starter");
  });
});
