import { cp, mkdtemp, readdir, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startService, type TestService } from "../support/service.js";
import { ROOT, run } from "./clients-python-env.js";

/*
 * Issue 23, "a proto that compiles anywhere": a copy of proto/ alone (no buf.yaml, no
 * node_modules) compiles with protoc, and Go stubs generated from that copy with
 * `buf generate` (protoc-gen-go, protoc-gen-go-grpc) drive examples/grpc/go, which
 * submits a signed Intent over gRPC to a real service.
 */

/** Pinned plugin versions, built from the Go module proxy into .tools/bin like opa. */
const GO_PLUGINS = [
  { name: "protoc-gen-go", module: "google.golang.org/protobuf/cmd/protoc-gen-go", version: "v1.36.11" },
  { name: "protoc-gen-go-grpc", module: "google.golang.org/grpc/cmd/protoc-gen-go-grpc", version: "v1.6.1" },
];
const TOOLS = path.join(ROOT, ".tools/bin");
const PATH = `${TOOLS}${path.delimiter}${process.env.PATH}`;

/** Installs a plugin unless .tools/bin already holds the pinned version (`--version` ends with it). */
async function ensureGoPlugin(plugin: (typeof GO_PLUGINS)[number]): Promise<void> {
  const have = await run(path.join(TOOLS, plugin.name), ["--version"]).catch(() => undefined);
  if (have?.code === 0 && have.stdout.trim().endsWith(plugin.version.slice(1))) return;
  const res = await run("go", ["install", `${plugin.module}@${plugin.version}`], { env: { GOBIN: TOOLS, GOFLAGS: "-mod=mod" }, cwd: os.tmpdir(), timeoutMs: 600_000 });
  if (res.code !== 0) throw new Error(`go install ${plugin.module}@${plugin.version} failed:\n${res.stderr}`);
}

let svc: TestService;
let work: string;

beforeAll(async () => {
  work = await mkdtemp(path.join(os.tmpdir(), "mandate-proto-"));
  // proto/ alone, as someone who copied only that folder would have it.
  await cp(path.join(ROOT, "proto"), path.join(work, "proto"), { recursive: true });
  [svc] = await Promise.all([startService(), ...GO_PLUGINS.map(ensureGoPlugin)]);
}, 900_000);
afterAll(async () => {
  await svc?.close();
  if (work) await rm(work, { recursive: true, force: true });
});

/** Every .proto file under `dir`, relative to it. */
async function protosUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((e) => e.isFile() && e.name.endsWith(".proto")).map((e) => path.relative(dir, path.join(e.parentPath, e.name)));
}

describe("proto/ alone", () => {
  it("compiles with protoc, googleapis imports included", async () => {
    const protos = await protosUnder(path.join(work, "proto"));
    expect(protos).toEqual(expect.arrayContaining(["mandate/v1/intents.proto", "mandate/v1/errors.proto", "mandate/v1alpha/events.proto", "google/api/annotations.proto"]));
    const res = await run("protoc", ["-I", path.join(work, "proto"), `--descriptor_set_out=${path.join(work, "api.binpb")}`, "--include_imports", ...protos], { cwd: work });
    expect(res.code, `protoc (from Debian's protobuf-compiler and libprotobuf-dev, installed by scripts/setup.sh):\n${res.stderr}`).toBe(0);
  });

  it("generates Go with buf generate, and the Go example submits a signed Intent over gRPC", async () => {
    const example = path.join(work, "go");
    // The example without any stubs generated in the working tree: only its committed files.
    await cp(path.join(ROOT, "examples/grpc/go"), example, {
      recursive: true,
      filter: (src) => !path.relative(path.join(ROOT, "examples/grpc/go/gen"), src).startsWith("mandate"),
    });
    const buf = path.join(ROOT, "node_modules/.bin/buf");
    const generated = await run(buf, ["generate", path.join(work, "proto"), "--path", path.join(work, "proto/mandate")], { cwd: example, env: { PATH } });
    expect(generated.code, generated.stderr).toBe(0);
    expect(await readdir(path.join(example, "gen/mandate/v1"))).toEqual(expect.arrayContaining(["intents.pb.go", "intents_grpc.pb.go", "errors.pb.go"]));

    // -mod=readonly (the default, made explicit): go.mod and the committed go.sum must be complete.
    const res = await run("go", ["run", "-mod=readonly", "."], { cwd: example, env: { PATH, MANDATE_BASE_URL: svc.baseUrl, GOFLAGS: "" }, timeoutMs: 600_000 });
    expect(res.code, `${res.stdout}\n${res.stderr}`).toBe(0);
    const out = JSON.parse(res.stdout.trim().split("\n").at(-1)!) as Record<string, unknown>;
    expect(out).toMatchObject({
      agent_state: "AGENT_STATE_ACTIVE",
      outcome: "OUTCOME_ALLOW",
      reason: "starter_reference_action",
      decision_id: expect.stringMatching(/\S/),
      evidence_id: expect.stringMatching(/\S/),
      tampered: ["Unauthenticated", "signature_invalid"],
    });
    // The same signed bytes again answer the original decision: the nonce is an idempotency key.
    expect(out.resubmitted_decision_id).toBe(out.decision_id);
  });
});
