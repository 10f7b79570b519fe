import { create, toBinary, type DescFile, type DescMessage, type DescService } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  ServerReflection,
  ServerReflectionResponseSchema,
  type ServerReflectionRequest,
  type ServerReflectionResponse,
} from "../gen/grpc/reflection/v1/reflection_pb.js";
import { documentedProtoFiles } from "./proto-comments.js";

/** Every file given and all it imports, dependencies first, one per name. */
function closureOf(roots: readonly DescFile[]): DescFile[] {
  const out: DescFile[] = [];
  const seen = new Set<string>();
  const visit = (file: DescFile): void => {
    if (seen.has(file.name)) return;
    seen.add(file.name);
    file.dependencies.forEach(visit);
    out.push(file);
  };
  roots.forEach(visit);
  return out;
}

/**
 * The files to serve: every file of proto/ with its comments, from the descriptor set
 * `npm run generate` writes (scripts/protoc-gen-descriptor-set.mjs), so that
 * `grpcurl describe` shows the API reference and resolves types no service imports
 * (mandate.v1.ErrorDetail, which travels only in error details); then the served files
 * from elsewhere (reflection.proto), from the generated descriptors.
 */
function filesToServe(services: readonly DescService[]): DescFile[] {
  const documented = documentedProtoFiles();
  return closureOf([...documented.files, ...services.map((s) => documented.getFile(s.file.name) ?? s.file)]);
}

/** Fully-qualified symbol → file, for file_containing_symbol. */
function symbolIndex(files: readonly DescFile[]): Map<string, DescFile> {
  const index = new Map<string, DescFile>();
  const addMessage = (file: DescFile, m: DescMessage): void => {
    index.set(m.typeName, file);
    m.nestedMessages.forEach((n) => addMessage(file, n));
    m.nestedEnums.forEach((e) => index.set(e.typeName, file));
    m.nestedExtensions.forEach((x) => index.set(x.typeName, file));
  };
  for (const file of files) {
    file.messages.forEach((m) => addMessage(file, m));
    file.enums.forEach((e) => index.set(e.typeName, file));
    file.extensions.forEach((x) => index.set(x.typeName, file));
    for (const s of file.services) {
      index.set(s.typeName, file);
      s.methods.forEach((m) => index.set(`${s.typeName}.${m.name}`, file));
    }
  }
  return index;
}

/**
 * gRPC server reflection (grpc.reflection.v1), served from the API's descriptors
 * with their source info: connect-node has none (connect-es #507), and grpcurl,
 * buf curl and other stacks need it to call the API without the .proto files.
 */
export function createReflectionService(services: readonly DescService[]): ServiceImpl<typeof ServerReflection> {
  const files = filesToServe(services);
  const byName = new Map(files.map((f) => [f.name + ".proto", f]));
  const bySymbol = symbolIndex(files);
  const serialized = new Map<DescFile, Uint8Array>();
  const bytesOf = (f: DescFile): Uint8Array => {
    let b = serialized.get(f);
    if (!b) serialized.set(f, (b = toBinary(FileDescriptorProtoSchema, f.proto)));
    return b;
  };
  /** The file and everything it imports, as the protocol expects. */
  const withDependencies = (file: DescFile): Uint8Array[] => {
    const out: DescFile[] = [];
    const visit = (f: DescFile): void => {
      if (out.includes(f)) return;
      out.push(f);
      f.dependencies.forEach(visit);
    };
    visit(file);
    return out.map(bytesOf);
  };

  const answer = (req: ServerReflectionRequest): ServerReflectionResponse => {
    const base = { validHost: req.host, originalRequest: req };
    const notFound = (what: string) =>
      create(ServerReflectionResponseSchema, {
        ...base,
        messageResponse: { case: "errorResponse", value: { errorCode: 5, errorMessage: `${what} not found` } },
      });
    const files = (file: DescFile | undefined, what: string) =>
      file
        ? create(ServerReflectionResponseSchema, {
            ...base,
            messageResponse: { case: "fileDescriptorResponse", value: { fileDescriptorProto: withDependencies(file) } },
          })
        : notFound(what);
    switch (req.messageRequest.case) {
      case "listServices":
        return create(ServerReflectionResponseSchema, {
          ...base,
          messageResponse: { case: "listServicesResponse", value: { service: services.map((s) => ({ name: s.typeName })) } },
        });
      case "fileByFilename":
        return files(byName.get(req.messageRequest.value), `file ${req.messageRequest.value}`);
      case "fileContainingSymbol":
        return files(bySymbol.get(req.messageRequest.value), `symbol ${req.messageRequest.value}`);
      case "allExtensionNumbersOfType":
        return create(ServerReflectionResponseSchema, {
          ...base,
          messageResponse: { case: "allExtensionNumbersResponse", value: { baseTypeName: req.messageRequest.value, extensionNumber: [] } },
        });
      default:
        return notFound("extension");
    }
  };

  return {
    async *serverReflectionInfo(requests) {
      for await (const req of requests) yield answer(req);
    },
  };
}
