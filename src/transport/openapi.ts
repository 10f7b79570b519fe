import { getOption, ScalarType, type DescEnum, type DescField, type DescMessage, type DescService } from "@bufbuild/protobuf";
import { ErrorDetailSchema } from "../gen/mandate/v1/errors_pb.js";
import { field_maturity, Maturity, service_maturity } from "../gen/mandate/v1/options_pb.js";
import { accessOf, type Access } from "./access.js";
import { enumToWire } from "./json-wire.js";
import { HTTP_BODY, httpRoutes, type HttpRoute } from "./transcoder.js";

/*
 * The OpenAPI 3.1 document of /v1, derived from the same descriptors and
 * `google.api.http` annotations the transcoder routes by (httpRoutes), the
 * same wire form json-wire.ts speaks (snake_case names, `wire_name` enum
 * spellings, ISO timestamps, int64 as JSON integers) and the same access table
 * the pipeline enforces. Nothing here is written per endpoint, so the document
 * cannot drift from what the server answers.
 */

type Schema = Record<string, unknown>;

const ERROR_RESPONSE = { $ref: "#/components/responses/Error" };

// The content type each method answering google.api.HttpBody sets (the proto cannot declare it).
const HTTP_BODY_MEDIA_TYPES: Readonly<Record<string, string>> = { GetBundle: "application/gzip" };

/** Well-known types with a JSON mapping of their own (see json-wire.ts messageToWire). */
const WELL_KNOWN: Record<string, Schema> = {
  "google.protobuf.Timestamp": { type: "string", format: "date-time", examples: ["2026-11-25T21:47:37.120Z"] },
  "google.protobuf.Struct": { type: "object", additionalProperties: true },
  "google.protobuf.Value": {},
  "google.protobuf.ListValue": { type: "array", items: {} },
  "google.protobuf.Empty": { type: "object" },
};

/** Security schemes, one per credential (docs/architecture.md, "Authentication"). */
const SECURITY_SCHEMES = {
  bearer: { type: "http", scheme: "bearer", description: "An organization or sandbox API key." },
  operatorKey: { type: "apiKey", in: "header", name: "X-Service-Operator-Key", description: "Platform-internal operator key." },
  operatorOrganization: { type: "apiKey", in: "header", name: "X-Service-Organization-Id", description: "The organization the operator key acts for." },
  agentKeyId: { type: "apiKey", in: "header", name: "X-Service-Key-Id", description: "The agent's certificate_id." },
  agentSignature: {
    type: "apiKey",
    in: "header",
    name: "X-Service-Signature",
    description: "Standard base64 Ed25519 signature over the exact request body (or over `<METHOD> <path>\\n<X-Service-Timestamp>` for a bodiless GET).",
  },
};

/** The security requirement alternatives of one access rule (transport/access.ts). */
function securityOf(access: Access | undefined): Record<string, string[]>[] | undefined {
  const org: Record<string, string[]>[] = [{ bearer: [] }, { operatorKey: [], operatorOrganization: [] }];
  const agent: Record<string, string[]> = { agentKeyId: [], agentSignature: [] };
  switch (access?.mode) {
    case "public":
      return [];
    case "platform":
      return [{ operatorKey: [] }];
    case "operator":
      return [{ operatorKey: [], operatorOrganization: [] }];
    case "org":
      return org;
    case "agent":
      return [agent];
    case "org_or_agent":
      return [...org, agent];
    default:
      return undefined;
  }
}

/** Builds component schemas on demand, keyed by the proto type name. */
class Schemas {
  readonly components: Record<string, Schema> = {};

  ref(desc: DescMessage | DescEnum): Schema {
    const known = desc.kind === "message" ? WELL_KNOWN[desc.typeName] : undefined;
    if (known) return { ...known };
    if (!(desc.typeName in this.components)) {
      this.components[desc.typeName] = {}; // placeholder first: messages may be recursive
      this.components[desc.typeName] = desc.kind === "enum" ? this.enumSchema(desc) : this.messageSchema(desc);
    }
    return { $ref: `#/components/schemas/${desc.typeName}` };
  }

  enumSchema(desc: DescEnum): Schema {
    return { type: "string", enum: desc.values.filter((v) => v.number !== 0).map((v) => enumToWire(desc, v.number)) };
  }

  /** An object schema of `desc`'s fields, less `omit` (fields carried in the path or elsewhere). */
  messageSchema(desc: DescMessage, omit: readonly string[] = []): Schema {
    const properties: Record<string, Schema> = {};
    for (const field of desc.fields) {
      if (omit.includes(field.name)) continue;
      const schema = this.field(field);
      const maturity = maturityLabel(getOption(field, field_maturity));
      // A $ref takes no sibling keywords in every tool: an early-access reference is wrapped.
      properties[field.name] = maturity ? (schema.$ref ? { allOf: [schema], "x-maturity": maturity } : { ...schema, "x-maturity": maturity }) : schema;
    }
    return { type: "object", properties, additionalProperties: false };
  }

  field(field: DescField): Schema {
    switch (field.fieldKind) {
      case "list":
        return { type: "array", items: this.singular(field, field.listKind) };
      case "map":
        return { type: "object", additionalProperties: this.singular(field, field.mapKind) };
      default:
        return this.singular(field, field.fieldKind);
    }
  }

  singular(field: DescField, kind: "scalar" | "enum" | "message"): Schema {
    if (kind === "enum") return this.ref(field.enum!);
    if (kind === "message") return this.ref(field.message!);
    return scalarSchema(field.scalar!);
  }
}

/** The `x-maturity` value of a proto maturity option; undefined for the stable contract. */
function maturityLabel(maturity: Maturity): string | undefined {
  return maturity === Maturity.EARLY_ACCESS ? "early-access" : undefined;
}

function scalarSchema(scalar: ScalarType): Schema {
  switch (scalar) {
    case ScalarType.STRING:
      return { type: "string" };
    case ScalarType.BOOL:
      return { type: "boolean" };
    case ScalarType.DOUBLE:
      return { type: "number", format: "double" };
    case ScalarType.FLOAT:
      return { type: "number", format: "float" };
    case ScalarType.BYTES:
      return { type: "string", contentEncoding: "base64" };
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      return { type: "integer", format: "int32" };
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return { type: "integer", format: "int32", minimum: 0 };
    default:
      // 64-bit integers: JSON numbers on the wire (decimal strings beyond 2^53 are accepted too).
      return { type: "integer", format: "int64" };
  }
}

function isBytes(field: DescField): boolean {
  return field.fieldKind === "scalar" && field.scalar === ScalarType.BYTES;
}

/** The OpenAPI path of a template: `{name=*}` becomes `{name}`. */
function openApiPath(template: string): string {
  return template.replace(/\{([a-z_][a-z0-9_]*)(?:=\*)?\}/g, "{$1}");
}

function operation(route: HttpRoute, schemas: Schemas, operationId: string): Schema {
  const { method, service, variables } = route;
  const input = method.input;
  const parameters: Schema[] = variables.map((name) => ({
    name,
    in: "path",
    required: true,
    schema: schemas.field(input.fields.find((f) => f.name === name)!),
  }));
  const op: Schema = {
    operationId,
    tags: [service.name],
    summary: `${service.name}.${method.name}`,
    "x-grpc-method": `/${service.typeName}/${method.name}`,
  };
  const maturity = maturityLabel(getOption(service, service_maturity));
  if (maturity) op["x-maturity"] = maturity;
  if (route.body === "") {
    // No body: every other field that has a textual form is a query parameter.
    for (const field of input.fields) {
      if (variables.includes(field.name) || field.fieldKind === "map" || field.fieldKind === "message") continue;
      if (field.fieldKind === "list" && field.listKind === "message") continue;
      parameters.push({ name: field.name, in: "query", required: false, schema: schemas.field(field) });
    }
  } else if (route.body === "*") {
    // An empty body reads as `{}`, so the body itself may be left out.
    op.requestBody = {
      required: false,
      content: { "application/json": { schema: schemas.messageSchema(input, variables) } },
    };
  } else {
    const field = input.fields.find((f) => f.name === route.body)!;
    op.requestBody = {
      required: true,
      content: {
        "application/json": {
          // A bytes body field receives the raw body untouched: the signed JSON document itself.
          schema: isBytes(field)
            ? { type: "object", description: `The signed JSON document, sent as the raw body (the \`${field.name}\` field); X-Service-Signature covers these exact bytes.` }
            : schemas.field(field),
        },
      },
    };
  }
  if (parameters.length) op.parameters = parameters;
  const access = accessOf(service.typeName, method.name);
  const security = securityOf(access);
  if (security) op.security = security;
  if (access && "permission" in access && access.permission) op["x-mandate-permission"] = access.permission;
  op.responses = {
    "200":
      method.output.typeName === HTTP_BODY
        ? // The transcoder answers google.api.HttpBody with its bytes under its own content type.
          { description: "OK: the raw bytes", content: { [HTTP_BODY_MEDIA_TYPES[method.name] ?? "application/octet-stream"]: { schema: { type: "string", format: "binary" } } } }
        : { description: "OK", content: { "application/json": { schema: schemas.ref(method.output) } } },
    "4XX": ERROR_RESPONSE,
    "5XX": ERROR_RESPONSE,
  };
  return op;
}

/**
 * The OpenAPI 3.1 document of /v1: every RPC of `services` with a
 * `google.api.http` binding under `/v1/` (pass every service the server
 * registers), and the early-access `/v1alpha` bindings marked `x-maturity`. Pure: same
 * services, same document, so the server can build it once at start-up.
 */
export function openApiDocument(services: readonly DescService[]): Record<string, unknown> {
  const schemas = new Schemas();
  // The stable contract, and early-access routes (/v1alpha/…) only as marked early access
  // (x-maturity), so nobody mistakes them for part of it (spec, Versioning 2).
  const routes = httpRoutes(services).filter(
    (r) => r.template.startsWith("/v1/") || (r.template.startsWith("/v1alpha/") && maturityLabel(getOption(r.service, service_maturity)) !== undefined),
  );
  const names = routes.map((r) => r.method.name);
  const paths: Record<string, Record<string, Schema>> = {};
  for (const route of routes) {
    const { service, method } = route;
    // Method names are unique across Mandate's services; qualify them only if that ever changes.
    const operationId = names.filter((n) => n === method.name).length > 1 ? `${service.name}_${method.name}` : method.name;
    const item = (paths[openApiPath(route.template)] ??= {});
    item[route.httpMethod.toLowerCase()] = operation(route, schemas, operationId);
  }
  schemas.ref(ErrorDetailSchema);
  return {
    openapi: "3.1.0",
    info: {
      title: "Mandate API",
      version: "v1",
      description:
        "Agent identity and runtime authorization. Generated from the google.api.http annotations of proto/mandate/v1; " +
        "every non-2xx answer is an ErrorDetail ({detail, message, request_id, errors?}).",
    },
    tags: [...new Set(routes.map((r) => r.service.name))].sort().map((name) => ({ name })),
    paths,
    components: {
      schemas: Object.fromEntries(Object.entries(schemas.components).sort(([a], [b]) => a.localeCompare(b))),
      responses: {
        Error: {
          description: "Evaluation or the request did not complete; `detail` is the stable code.",
          content: { "application/json": { schema: { $ref: `#/components/schemas/${ErrorDetailSchema.typeName}` } } },
        },
      },
      securitySchemes: SECURITY_SCHEMES,
    },
  };
}
