import { base64Decode } from "@bufbuild/protobuf/wire";
import { createFileRegistry, fromBinary, type FileRegistry, type DescEnum, type DescEnumValue, type DescField, type DescFile, type DescMessage, type DescMethod, type DescService } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { descriptorSetBase64 } from "../gen/mandate/descriptor_set.js";

/** A descriptor whose leading comment documents it. */
export type CommentedDesc = DescMessage | DescField | DescEnum | DescEnumValue | DescService | DescMethod;

/** The comments of proto/, looked up by the element a generated descriptor names. */
export interface ProtoComments {
  /** The element's leading comment, one space of indentation removed per line; undefined when it has none. */
  of(desc: CommentedDesc): string | undefined;
}

/** No comments at all: what a document built without the descriptor set says. */
export const NO_COMMENTS: ProtoComments = { of: () => undefined };

let documented: FileRegistry | undefined;
let generated: ProtoComments | undefined;

/**
 * Every file of proto/ with its source info, as `npm run generate` last embedded them
 * (src/gen/mandate/descriptor_set.ts): decoded once, for reflection and the comments alike.
 */
export function documentedProtoFiles(): FileRegistry {
  documented ??= createFileRegistry(fromBinary(FileDescriptorSetSchema, base64Decode(descriptorSetBase64)));
  return documented;
}

/** The comments of proto/ (documentedProtoFiles); read once. */
export function apiComments(): ProtoComments {
  generated ??= commentsOf(documentedProtoFiles());
  return generated;
}

/**
 * Reads the comments of a FileDescriptorSet built with source info (src/gen/mandate/descriptor_set.ts).
 * protobuf-es's embedded descriptors drop source info, so the comments that document the API in
 * proto/ (field comments are the API reference) are found here by the same
 * element's path in its file: the SourceCodeInfo path of descriptor.proto (message 4, nested 3,
 * field 2, enum 5, value 2, service 6, method 2).
 */
export function createProtoComments(descriptorSet: Uint8Array): ProtoComments {
  return commentsOf(createFileRegistry(fromBinary(FileDescriptorSetSchema, descriptorSet)));
}

function commentsOf(registry: FileRegistry): ProtoComments {
  const byFile = new Map<DescFile, Map<string, string>>();
  const commentsOf = (file: DescFile): Map<string, string> => {
    let map = byFile.get(file);
    if (!map) {
      map = new Map();
      for (const location of file.proto.sourceCodeInfo?.location ?? []) {
        const text = location.leadingComments.trim() === "" ? undefined : tidy(location.leadingComments);
        if (text) map.set(location.path.join("."), text);
      }
      byFile.set(file, map);
    }
    return map;
  };
  const messagePath = (m: DescMessage): number[] =>
    m.parent ? [...messagePath(m.parent), 3, m.parent.proto.nestedType.indexOf(m.proto)] : [4, m.file.proto.messageType.indexOf(m.proto)];
  const enumPath = (e: DescEnum): number[] => (e.parent ? [...messagePath(e.parent), 4, e.parent.proto.enumType.indexOf(e.proto)] : [5, e.file.proto.enumType.indexOf(e.proto)]);
  const servicePath = (s: DescService): number[] => [6, s.file.proto.service.indexOf(s.proto)];

  /** The same element in the set (generated descriptors carry no source info). */
  const locate = (desc: CommentedDesc): { file: DescFile; path: number[] } | undefined => {
    switch (desc.kind) {
      case "message": {
        const m = registry.getMessage(desc.typeName);
        return m && { file: m.file, path: messagePath(m) };
      }
      case "field": {
        const m = registry.getMessage(desc.parent.typeName);
        const f = m?.fields.find((x) => x.name === desc.name);
        return m && f && { file: m.file, path: [...messagePath(m), 2, m.proto.field.indexOf(f.proto)] };
      }
      case "enum": {
        const e = registry.getEnum(desc.typeName);
        return e && { file: e.file, path: enumPath(e) };
      }
      case "enum_value": {
        const e = registry.getEnum(desc.parent.typeName);
        const v = e?.values.find((x) => x.number === desc.number);
        return e && v && { file: e.file, path: [...enumPath(e), 2, e.proto.value.indexOf(v.proto)] };
      }
      case "service": {
        const s = registry.getService(desc.typeName);
        return s && { file: s.file, path: servicePath(s) };
      }
      case "rpc": {
        const s = registry.getService(desc.parent.typeName);
        const r = s?.methods.find((x) => x.name === desc.name);
        return s && r && { file: s.file, path: [...servicePath(s), 2, s.proto.method.indexOf(r.proto)] };
      }
    }
  };
  return {
    of(desc) {
      const at = locate(desc);
      return at && commentsOf(at.file).get(at.path.join("."));
    },
  };
}

/** `// text` lines arrive as " text\n": drop the one space protoc keeps and the last newline. */
function tidy(comment: string): string {
  return comment
    .replace(/\n$/, "")
    .split("\n")
    .map((line) => line.replace(/^ /, "").trimEnd())
    .join("\n")
    .trim();
}
