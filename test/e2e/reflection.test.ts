import { execFile } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { create, createFileRegistry, fromBinary, getOption, hasOption, type DescService } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { http } from "../../src/gen/google/api/annotations_pb.js";
import { ErrorDetailSchema } from "../../src/gen/mandate/v1/errors_pb.js";
import { ACCESS } from "../../src/transport/access.js";
import { bindingOf, loadAllMandateServices } from "../support/api.js";
import { startService, uniqueEmail, type TestService } from "../support/service.js";

/*
 * A gRPC client with nothing but the server (no .proto files) can discover and
 * call the API: reflection (grpc.reflection.v1) lists every served service and
 * hands out complete descriptors; buf curl calls an RPC from reflection alone.
 * And every public RPC is reachable on /v1 and has an access rule.
 */

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const reflectionProto = path.join(root, "node_modules/@grpc/reflection/build/proto/grpc/reflection/v1/reflection.proto");
const buf = path.join(root, "node_modules/.bin/buf");
const run = promisify(execFile);

let svc: TestService;
beforeAll(async () => {
  svc = await startService();
});
afterAll(() => svc?.close());

interface ReflectionResponse {
  list_services_response?: { service: { name: string }[] };
  file_descriptor_response?: { file_descriptor_proto: Buffer[] };
  error_response?: { error_code: number; error_message: string };
}

/** Sends reflection requests on one stream (as grpcurl does) and collects one answer per request. */
async function reflect(requests: Record<string, unknown>[]): Promise<ReflectionResponse[]> {
  const def = protoLoader.loadSync(reflectionProto, { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true });
  const pkg = grpc.loadPackageDefinition(def) as any;
  const client = new pkg.grpc.reflection.v1.ServerReflection(`127.0.0.1:${svc.port}`, grpc.credentials.createInsecure());
  try {
    return await new Promise((resolve, reject) => {
      const answers: ReflectionResponse[] = [];
      const call = client.ServerReflectionInfo();
      call.on("data", (a: ReflectionResponse) => {
        answers.push(a);
        if (answers.length === requests.length) call.end();
      });
      call.on("error", reject);
      call.on("end", () => resolve(answers));
      for (const r of requests) call.write({ host: "", ...r });
    });
  } finally {
    client.close();
  }
}

/** Which mandate services this server actually serves: a call to any of their methods is not UNIMPLEMENTED. */
async function servedServices(services: DescService[]): Promise<string[]> {
  const transport = createGrpcTransport({ baseUrl: svc.baseUrl });
  const served: string[] = [];
  for (const service of services) {
    const client = createClient(service, transport) as unknown as Record<string, (req: object) => Promise<unknown> | AsyncIterable<unknown>>;
    // A unary method, else a server-streaming one (EventService has only WatchEvents).
    const method = service.methods.find((m) => m.methodKind === "unary") ?? service.methods.find((m) => m.methodKind === "server_streaming");
    if (!method) continue;
    try {
      const answer = client[method.localName]!({});
      if (Symbol.asyncIterator in answer) for await (const _ of answer) break;
      else await answer;
      served.push(service.typeName);
    } catch (err) {
      if (ConnectError.from(err).code !== Code.Unimplemented) served.push(service.typeName);
    }
  }
  return served;
}

describe("gRPC server reflection", () => {
  it("lists exactly the services this server serves, and describes each completely", async () => {
    const [listing] = await reflect([{ list_services: "" }]);
    const listed = listing!.list_services_response!.service.map((s) => s.name).sort();
    const all = await loadAllMandateServices();
    const mandate = all.map((s) => s.service);
    const served = await servedServices(mandate);

    expect(listed).toContain("grpc.reflection.v1.ServerReflection");
    expect(served).toEqual(expect.arrayContaining(["mandate.v1.SandboxService", "mandate.v1.OrganizationService"]));
    expect(listed.filter((n) => n !== "grpc.reflection.v1.ServerReflection")).toEqual([...served].sort());

    // file_containing_symbol for every listed service and every method, on one stream as
    // grpcurl asks: a server need not resend a file it already sent on the stream, so the
    // answers together must form a complete descriptor set.
    const symbols = listed.flatMap((name) => [name, ...(mandate.find((s) => s.typeName === name)?.methods.map((m) => `${name}.${m.name}`) ?? [])]);
    const answers = await reflect(symbols.map((s) => ({ file_containing_symbol: s })));
    expect(answers).toHaveLength(symbols.length);
    const files = new Map<string, ReturnType<typeof fromBinary<typeof FileDescriptorProtoSchema>>>();
    answers.forEach((a, i) => {
      expect(a.error_response, `reflection error for ${symbols[i]}: ${a.error_response?.error_message}`).toBeFalsy();
      for (const b of a.file_descriptor_response!.file_descriptor_proto) {
        const file = fromBinary(FileDescriptorProtoSchema, b);
        files.set(file.name, file);
      }
    });
    // Every file resolves from the answers alone: dependencies first, and a missing
    // import makes createFileRegistry throw.
    const ordered: (typeof files extends Map<string, infer F> ? F : never)[] = [];
    const visit = (name: string, from: string): void => {
      const file = files.get(name);
      if (!file) throw new Error(`reflection never sent ${name}, imported by ${from}`);
      if (ordered.includes(file)) return;
      file.dependency.forEach((d) => visit(d, name));
      ordered.push(file);
    };
    for (const name of files.keys()) visit(name, "(answer)");
    const registry = createFileRegistry(create(FileDescriptorSetSchema, { file: ordered }));
    for (const name of listed) {
      const service = registry.getService(name);
      expect(service, `${name} not described`).toBeDefined();
      const generated = mandate.find((s) => s.typeName === name);
      if (!generated) continue;
      expect(service!.methods.map((m) => m.name)).toEqual(generated.methods.map((m) => m.name));
      // The descriptors carry the options a transcoding client would need.
      if (all.find((s) => s.service === generated)!.internal) continue;
      for (const m of service!.methods) expect(hasOption(m, http), `${name}.${m.name} lost its http option`).toBe(true);
    }
  });

  it("answers unknown symbols and files with NOT_FOUND, not by failing the stream", async () => {
    const [bySymbol, byFile] = await reflect([{ file_containing_symbol: "mandate.v1.NoSuchService" }, { file_by_filename: "mandate/v1/nothing.proto" }]);
    expect(bySymbol!.error_response?.error_code).toBe(Code.NotFound);
    expect(byFile!.error_response?.error_code).toBe(Code.NotFound);
  });

  it("resolves types no service imports (mandate.v1.ErrorDetail) and serves the proto comments", async () => {
    const [detail, intents] = await reflect([{ file_containing_symbol: "mandate.v1.ErrorDetail" }, { file_containing_symbol: "mandate.v1.IntentService" }]);
    const filesOf = (a: ReflectionResponse) => (a.file_descriptor_response?.file_descriptor_proto ?? []).map((b) => fromBinary(FileDescriptorProtoSchema, b));
    /** The leading comment of a top-level message, from the source info as grpcurl describe reads it (path [4, index]). */
    const commentOf = (file: ReturnType<typeof filesOf>[number], message: string): string | undefined => {
      const index = file.messageType.findIndex((m) => m.name === message);
      return file.sourceCodeInfo?.location.find((l) => l.path.length === 2 && l.path[0] === 4 && l.path[1] === index)?.leadingComments;
    };

    expect(detail!.error_response, detail!.error_response?.error_message).toBeFalsy();
    const errors = filesOf(detail!).find((f) => f.name === "mandate/v1/errors.proto");
    expect(errors?.messageType.map((m) => m.name)).toContain("ErrorDetail");
    expect(commentOf(errors!, "ErrorDetail")).toMatch(/\S/);

    // How a signed Intent travels over gRPC is documented on SubmitIntentRequest, and reaches the client.
    const intentsFile = filesOf(intents!).find((f) => f.name === "mandate/v1/intents.proto");
    expect(intentsFile, "intents.proto not served").toBeDefined();
    expect(commentOf(intentsFile!, "SubmitIntentRequest")).toContain("x-service-signature");
    // The annotations' own file comes with it, comments included.
    const http = filesOf(intents!).find((f) => f.name === "google/api/http.proto");
    expect(http?.sourceCodeInfo?.location.some((l) => l.leadingComments.includes("gRPC Transcoding"))).toBe(true);
  });

  it("lets buf curl list the methods and call CreateSandboxOrganization from reflection alone", async () => {
    const url = `http://127.0.0.1:${svc.port}`;
    const { stdout: methods } = await run(buf, ["curl", "--protocol", "grpc", "--http2-prior-knowledge", "--list-methods", url], { cwd: "/" });
    expect(methods.split("\n")).toEqual(expect.arrayContaining(["mandate.v1.SandboxService/CreateSandboxOrganization", "mandate.v1.OrganizationService/RevokeApiKey"]));

    // cwd "/" so that no local buf.yaml or .proto file could stand in for reflection.
    const { stdout } = await run(
      buf,
      ["curl", "--protocol", "grpc", "--http2-prior-knowledge", "-d", JSON.stringify({ email: uniqueEmail("bufcurl") }), `${url}/mandate.v1.SandboxService/CreateSandboxOrganization`],
      { cwd: "/" },
    );
    const answer = JSON.parse(stdout) as Record<string, string>;
    expect(answer).toEqual({ organizationId: expect.stringMatching(/^org_/), apiKey: expect.stringMatching(/^mk_/), starterPolicyKey: "starter" });

    // The key it returned works on /v1: one backend behind both.
    const org = await svc.v1("GET", "/v1/organization", { bearer: answer.apiKey });
    expect(org.status).toBe(200);
    expect(org.body.organization_id).toBe(answer.organizationId);
  });

  it("shows buf curl the error detail of a refused call", async () => {
    const url = `http://127.0.0.1:${svc.port}/mandate.v1.OrganizationService/GetOrganization`;
    const failed = await run(buf, ["curl", "--protocol", "grpc", "--http2-prior-knowledge", "-d", "{}", url], { cwd: "/" }).then(
      () => undefined,
      (err: { stderr: string; code: number }) => err,
    );
    expect(failed, "an unauthenticated GetOrganization must fail").toBeDefined();
    // buf curl prints the status as JSON; the ErrorDetail travels as an Any in its details.
    const status = JSON.parse(failed!.stderr) as { code: string; details: { type: string; value: string }[] };
    expect(status.code).toBe("unauthenticated");
    const detail = status.details.find((d) => d.type === "mandate.v1.ErrorDetail");
    expect(detail, failed!.stderr).toBeDefined();
    expect(fromBinary(ErrorDetailSchema, Buffer.from(detail!.value, "base64")).detail).toBe("missing_credentials");
  });
});

describe("the public surface", () => {
  it("gives every public RPC a google.api.http binding that fits its request message", async () => {
    const problems: string[] = [];
    const seen = new Map<string, string>();
    for (const { service, internal } of await loadAllMandateServices()) {
      if (internal) continue;
      for (const method of service.methods) {
        const name = `${service.name}.${method.name}`;
        const binding = bindingOf(method);
        if (!binding) {
          problems.push(`${name} has no google.api.http binding`);
          continue;
        }
        if (!binding.template.startsWith("/v1/") && !binding.template.startsWith("/v1alpha/")) problems.push(`${name}: ${binding.template} is not under /v1 or /v1alpha`);
        const route = `${binding.verb} ${binding.template}`;
        if (seen.has(route)) problems.push(`${name} and ${seen.get(route)} share ${route}`);
        seen.set(route, name);
        const fieldNames = method.input.fields.map((f) => f.name);
        for (const v of binding.template.matchAll(/\{([a-z_][a-z0-9_]*)/g)) {
          if (!fieldNames.includes(v[1]!)) problems.push(`${name}: path variable ${v[1]} is no field of ${method.input.name}`);
        }
        if (binding.body !== "" && binding.body !== "*" && !fieldNames.includes(binding.body)) problems.push(`${name}: body ${binding.body} is no field`);
        if (binding.verb === "GET" && binding.body !== "") problems.push(`${name}: GET with a body`);
        if (getOption(method, http).additionalBindings.length) problems.push(`${name}: additional_bindings are not served`);
      }
    }
    expect(problems).toEqual([]);
  });

  it("gives every RPC an access rule in ACCESS, and ACCESS names no RPC that does not exist", async () => {
    const methods = (await loadAllMandateServices()).flatMap(({ service }) => service.methods.map((m) => `${service.name}.${m.name}`));
    // An RPC without a rule is refused by the pipeline (never let through), so it could not be called at all.
    expect(methods.filter((m) => !(m in ACCESS))).toEqual([]);
    const extra = Object.keys(ACCESS).filter((k) => !methods.includes(k) && k !== "ServerReflection.ServerReflectionInfo");
    expect(extra).toEqual([]);
    expect(ACCESS["ServerReflection.ServerReflectionInfo"]).toEqual({ mode: "public" });
  });
});
