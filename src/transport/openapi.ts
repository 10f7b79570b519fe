import { getOption, ScalarType, type DescEnum, type DescField, type DescMessage, type DescService } from "@bufbuild/protobuf";
import { FieldBehavior, field_behavior } from "../gen/google/api/field_behavior_pb.js";
import { ErrorDetailSchema } from "../gen/mandate/v1/errors_pb.js";
import { field_maturity, Maturity, service_maturity } from "../gen/mandate/v1/options_pb.js";
import { accessOf, type Access } from "./access.js";
import { INTENT_FORMATS } from "../domain/intents.js";
import { enumToWire } from "./json-wire.js";
import { apiComments, type ProtoComments } from "./proto-comments.js";
import { HTTP_BODY, httpRoutes, type HttpRoute } from "./transcoder.js";

/*
 * The OpenAPI 3.1 document of /v1, derived from the same descriptors and
 * `google.api.http` annotations the transcoder routes by (httpRoutes), the
 * same wire form json-wire.ts speaks (snake_case names, `wire_name` enum
 * spellings, ISO timestamps, int64 as JSON integers or decimal strings) and the
 * same access table the pipeline enforces; descriptions are the proto comments
 * (proto-comments.ts) and `required` is `google.api.field_behavior = REQUIRED`.
 * Nothing here is written per endpoint, so the document cannot drift from what
 * the server answers. The one exception is the signed documents (below): their
 * bytes travel in a `bytes` field the proto cannot type.
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

  constructor(readonly comments: ProtoComments) {}

  ref(desc: DescMessage | DescEnum): Schema {
    const known = desc.kind === "message" ? WELL_KNOWN[desc.typeName] : undefined;
    if (known) return { ...known };
    if (!(desc.typeName in this.components)) {
      this.components[desc.typeName] = {}; // placeholder first: messages may be recursive
      this.components[desc.typeName] = desc.kind === "enum" ? this.enumSchema(desc) : this.messageSchema(desc);
    }
    return { $ref: `#/components/schemas/${desc.typeName}` };
  }

  /**
   * A named schema of the request body of `input` less `omit` (its path variables): the message's
   * own component when nothing is omitted, else `<type name>Body`, so that every request body is a
   * named component a generated client can name too.
   */
  requestBody(input: DescMessage, omit: readonly string[]): Schema {
    if (omit.length === 0 || !input.fields.some((f) => omit.includes(f.name))) return this.ref(input);
    const name = `${input.typeName}Body`;
    if (!(name in this.components)) this.components[name] = this.messageSchema(input, omit);
    return { $ref: `#/components/schemas/${name}` };
  }

  enumSchema(desc: DescEnum): Schema {
    const values = desc.values.filter((v) => v.number !== 0);
    // The values' comments as a list, since JSON Schema has no per-value description.
    const lines = values.flatMap((v) => {
      const comment = this.comments.of(v);
      return comment ? [`- \`${enumToWire(desc, v.number)}\`: ${comment.replace(/\s+/g, " ")}`] : [];
    });
    const description = [this.comments.of(desc), lines.join("\n")].filter(Boolean).join("\n\n");
    return { type: "string", ...(description ? { description } : {}), enum: values.map((v) => enumToWire(desc, v.number)) };
  }

  /** An object schema of `desc`'s fields, less `omit` (fields carried in the path or elsewhere). */
  messageSchema(desc: DescMessage, omit: readonly string[] = []): Schema {
    const properties: Record<string, Schema> = {};
    const required: string[] = [];
    for (const field of desc.fields) {
      if (omit.includes(field.name)) continue;
      if (getOption(field, field_behavior).includes(FieldBehavior.REQUIRED)) required.push(field.name);
      const extra: Schema = {};
      const description = this.comments.of(field);
      if (description) extra.description = description;
      const maturity = maturityLabel(getOption(field, field_maturity));
      if (maturity) extra["x-maturity"] = maturity;
      const schema = this.field(field);
      // A $ref takes no sibling keywords in every tool: a described reference is wrapped.
      properties[field.name] = Object.keys(extra).length === 0 ? schema : schema.$ref ? { allOf: [schema], ...extra } : { ...schema, ...extra };
    }
    const description = this.comments.of(desc);
    return {
      type: "object",
      ...(description ? { description } : {}),
      properties,
      ...(required.length ? { required } : {}),
      additionalProperties: false,
    };
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
      // 64-bit integers: JSON numbers on the wire while a double holds them exactly, decimal
      // strings past 2^53 (docs/architecture.md, The /v1 JSON wire form); both are read.
      return { type: ["integer", "string"], format: "int64", pattern: "^-?[0-9]+$" };
  }
}

function isBytes(field: DescField): boolean {
  return field.fieldKind === "scalar" && field.scalar === ScalarType.BYTES;
}

/** The OpenAPI path of a template: `{name=*}` becomes `{name}`. */
function openApiPath(template: string): string {
  return template.replace(/\{([a-z_][a-z0-9_]*)(?:=\*)?\}/g, "{$1}");
}

const SIGNATURE_NOTE =
  "Send it as the raw body, byte for byte as signed: `X-Service-Signature` is the standard base64 Ed25519 signature over these exact bytes " +
  "and `X-Service-Key-Id` the signer's certificate id (docs/architecture.md, Authentication). Re-serializing the JSON breaks the signature.";

/**
 * The signed JSON documents, which travel as the raw body of a `bytes` field so the signature
 * covers the exact bytes: the proto cannot type them, so they are typed here. The Intent's
 * formats are parseIntent's own (INTENT_FORMATS); the others say what their proto comment says.
 */
const SIGNED_DOCUMENTS: Readonly<Record<string, { name: string; schema: Schema }>> = {
  "mandate.v1.SubmitIntentRequest.intent": {
    name: "Intent",
    schema: {
      type: "object",
      description:
        "What an agent asks to do, signed by the agent. Unknown members, a member twice at any depth (`duplicate_key`) and numbers a double " +
        "cannot hold exactly (`imprecise_number`) are refused, so what is evaluated and recorded is exactly what was signed. " +
        SIGNATURE_NOTE,
      properties: {
        agent_id: { type: "string", pattern: INTENT_FORMATS.agent_id.source, description: "The signing agent's id: it must be the agent of the certificate named by `X-Service-Key-Id`.", examples: ["agt_9f2c1d4e"] },
        action: { type: "string", pattern: INTENT_FORMATS.action.source, description: "The action the agent asks to take (`vendor_payment`, `reference_noop`); policies are chosen by it.", examples: ["vendor_payment"] },
        amount: { type: "number", minimum: 0, description: "The amount, in units of `currency`.", examples: [1250.5] },
        currency: { type: "string", pattern: INTENT_FORMATS.currency.source, description: "ISO 4217 code.", examples: ["USD"] },
        counterparty: { type: "string", pattern: INTENT_FORMATS.counterparty.source, description: "Who the action is with (1..256 printable characters).", examples: ["ACME GmbH"] },
        resource: { type: "string", pattern: INTENT_FORMATS.resource.source, description: "What the action touches, as `<kind>:<identifier>`.", examples: ["invoice:INV-1001"] },
        context: {
          type: "object",
          description: "Further facts policies and integration contracts may read, by identifier.",
          propertyNames: { pattern: INTENT_FORMATS.context_key.source },
          additionalProperties: { type: ["string", "number", "boolean"] },
          examples: [{ po_number: "PO-4471" }],
        },
        requested_at: {
          type: "string",
          format: "date-time",
          pattern: INTENT_FORMATS.requested_at.source,
          description: "When the agent made the request, in UTC; within 300 s of the server's clock (else 422 `request_expired`).",
          examples: ["2026-11-25T21:47:37.120Z"],
        },
        nonce: {
          type: "string",
          format: "uuid",
          pattern: INTENT_FORMATS.nonce.source,
          description: "Idempotency key per agent: the same nonce with the same bytes answers the original decision; with other bytes, 409 `nonce_reused`.",
          examples: ["7d5e0c8a-3b1f-4f2e-9a6d-2c4b8e1f0a93"],
        },
      },
      required: ["agent_id", "action", "requested_at", "nonce"],
      additionalProperties: false,
    },
  },
  "mandate.v1.HeartbeatRequest.signed_body": {
    name: "Heartbeat",
    schema: {
      type: "object",
      description: `An agent's liveness signal, signed by the agent. ${SIGNATURE_NOTE}`,
      properties: {
        agent_id: { type: "string", description: "The signing agent's id, the same as the path's." },
        sent_at: { type: "string", format: "date-time", description: "When it was sent; within 300 s of the server's clock." },
        nonce: { type: "string", minLength: 1, maxLength: 128, description: "Unique per heartbeat." },
      },
      required: ["agent_id", "sent_at", "nonce"],
      additionalProperties: false,
    },
  },
};

/** The signature headers of an agent-signed operation, as parameters so a generated client asks for them. */
const SIGNATURE_PARAMETERS: readonly Schema[] = [
  { name: "X-Service-Key-Id", in: "header", required: true, description: "The signer's certificate id.", schema: { type: "string" } },
  {
    name: "X-Service-Signature",
    in: "header",
    required: true,
    description: "Standard base64 of the Ed25519 signature over the exact request body (unpadded base64url is accepted too).",
    schema: { type: "string" },
  },
];

/** For an agent reading its own decision: the time its signature covers. */
const TIMESTAMP_PARAMETER: Schema = {
  name: "X-Service-Timestamp",
  in: "header",
  required: false,
  description:
    "Agent reads only: the UTC time, within 300 s of the server's, that the agent signed as `<METHOD> <path>\\n<timestamp>` (`X-Service-Signature`), instead of using an API key.",
  schema: { type: "string", format: "date-time" },
};

/** The tag every early-access operation carries besides its service's, so readers see it at a glance. */
export const EARLY_ACCESS_TAG = "Early access";

/**
 * A summary that reads as English: the method name in words ("Create API key", "Submit intent").
 * Not the comment's first sentence: many of those are state transitions ("registered → active")
 * that read well only under the method's name. The comment itself is the description.
 */
export function summaryOf(methodName: string): string {
  const words = methodName
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .toLowerCase()
    .replace(/\bapi\b/g, "API");
  return words.charAt(0).toUpperCase() + words.slice(1);
}

function operation(route: HttpRoute, schemas: Schemas, operationId: string): Schema {
  const { method, service, variables } = route;
  const input = method.input;
  const comments = schemas.comments;
  const parameters: Schema[] = variables.map((name) => {
    const field = input.fields.find((f) => f.name === name)!;
    const description = comments.of(field);
    return { name, in: "path", required: true, ...(description ? { description } : {}), schema: schemas.field(field) };
  });
  const comment = comments.of(method);
  const op: Schema = {
    operationId,
    tags: [service.name],
    summary: summaryOf(method.name),
    ...(comment ? { description: comment } : {}),
    "x-grpc-method": `/${service.typeName}/${method.name}`,
  };
  const maturity = maturityLabel(getOption(service, service_maturity));
  if (maturity) {
    op["x-maturity"] = maturity;
    (op.tags as string[]).push(EARLY_ACCESS_TAG);
  }
  if (route.body === "") {
    // No body: every other field that has a textual form is a query parameter.
    for (const field of input.fields) {
      if (variables.includes(field.name) || field.fieldKind === "map" || field.fieldKind === "message") continue;
      if (field.fieldKind === "list" && field.listKind === "message") continue;
      const description = comments.of(field);
      const required = getOption(field, field_behavior).includes(FieldBehavior.REQUIRED);
      parameters.push({ name: field.name, in: "query", required, ...(description ? { description } : {}), schema: schemas.field(field) });
    }
  } else if (route.body === "*") {
    const schema = schemas.requestBody(input, variables);
    const body = schema.$ref ? schemas.components[String(schema.$ref).slice("#/components/schemas/".length)] : undefined;
    op.requestBody = {
      // An empty body reads as `{}`, so it may be left out unless a member is required.
      required: Array.isArray(body?.required) && body.required.length > 0,
      content: { "application/json": { schema } },
    };
  } else {
    const field = input.fields.find((f) => f.name === route.body)!;
    const signed = SIGNED_DOCUMENTS[`${input.typeName}.${field.name}`];
    let schema: Schema;
    if (signed) {
      schemas.components[signed.name] ??= signed.schema;
      schema = { $ref: `#/components/schemas/${signed.name}` };
    } else if (isBytes(field)) {
      // A bytes body field receives the raw body untouched: a signed JSON document typed only by its comment.
      const name = input.name.replace(/^Submit/, "").replace(/Request$/, "");
      schemas.components[name] ??= { type: "object", description: `${comments.of(input) ?? "The signed JSON document."} ${SIGNATURE_NOTE}` };
      schema = { $ref: `#/components/schemas/${name}` };
    } else {
      schema = schemas.field(field);
    }
    op.requestBody = { required: true, content: { "application/json": { schema } } };
  }
  const access = accessOf(service.typeName, method.name);
  if (access?.mode === "agent") parameters.push(...SIGNATURE_PARAMETERS);
  if (access?.mode === "org_or_agent" && route.body === "") parameters.push(TIMESTAMP_PARAMETER);
  if (parameters.length) op.parameters = parameters;
  const security = securityOf(access);
  if (security) op.security = security;
  if (access && "permission" in access && access.permission) op["x-mandate-permission"] = access.permission;
  const output = comments.of(method.output);
  op.responses = {
    "200":
      method.output.typeName === HTTP_BODY
        ? // The transcoder answers google.api.HttpBody with its bytes under its own content type.
          {
            description: "OK: the raw bytes",
            content: { [HTTP_BODY_MEDIA_TYPES[method.name] ?? "application/octet-stream"]: { schema: { type: "string", format: "binary" } } },
          }
        : { description: output ? `OK: ${output.split(/\n\s*\n/, 1)[0]!.replace(/\s+/g, " ")}` : "OK", content: { "application/json": { schema: schemas.ref(method.output) } } },
    "4XX": ERROR_RESPONSE,
    "5XX": ERROR_RESPONSE,
  };
  return op;
}

/** What the document says about where the API is and who publishes it. */
export interface OpenApiOptions {
  /** The proto comments (descriptions); default: those of proto/ embedded by `npm run generate`. */
  comments?: ProtoComments;
  /** The API's base URL as clients reach it; default `/`, the origin the document was fetched from. */
  serverUrl?: string;
}

/**
 * The OpenAPI 3.1 document of /v1: every RPC of `services` with a
 * `google.api.http` binding under `/v1/` (pass every service the server
 * registers), and the early-access `/v1alpha` bindings marked `x-maturity`. Pure: same
 * services, same document, so the server can build it once at start-up.
 */
export function openApiDocument(services: readonly DescService[], options: OpenApiOptions = {}): Record<string, unknown> {
  const comments = options.comments ?? apiComments();
  const schemas = new Schemas(comments);
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
  const serviceTags = [...new Map(routes.map((r) => [r.service.name, r.service])).values()]
    .sort((a, b) => a.name.localeCompare(b.name))
    .map((service) => {
      const description = comments.of(service);
      return { name: service.name, ...(description ? { description } : {}) };
    });
  const earlyAccess = routes.some((r) => maturityLabel(getOption(r.service, service_maturity)) !== undefined);
  return {
    openapi: "3.1.0",
    info: {
      title: "Mandate API",
      version: "v1",
      description:
        "Agent identity and runtime authorization. Generated from proto/mandate (the `google.api.http` annotations route, the comments describe, " +
        "`google.api.field_behavior` marks what is required). JSON uses proto field names, enum values as the spec spells them and ISO 8601 UTC " +
        "timestamps. Every non-2xx answer is an ErrorDetail (`{detail, message, request_id, errors?}`); a DENY or HUMAN_REVIEW is a 200.",
    },
    servers: [{ url: options.serverUrl ?? "/", description: "This Mandate service" }],
    tags: [
      ...serviceTags,
      ...(earlyAccess
        ? [{ name: EARLY_ACCESS_TAG, description: "Early access (`x-maturity: early-access`, paths under /v1alpha): may change or go without the notice the stable /v1 contract gets." }]
        : []),
    ],
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
