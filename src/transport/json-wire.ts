import {
  create,
  fromJson,
  getOption,
  hasOption,
  isFieldSet,
  ScalarType,
  toJson,
  type DescEnum,
  type DescField,
  type DescMessage,
  type JsonValue,
  type Message,
} from "@bufbuild/protobuf";
import {
  ListValueSchema,
  timestampDate,
  timestampFromDate,
  ValueSchema,
  type Timestamp,
} from "@bufbuild/protobuf/wkt";
import { validationFailed, type FieldError } from "../base/errors.js";
import { wire_name } from "../gen/mandate/v1/options_pb.js";

/*
 * The /v1 JSON wire form (docs/architecture.md, "The /v1 JSON wire form"):
 * snake_case proto field names, enum values spelled as the spec spells them (the
 * `wire_name` option), timestamps as ISO 8601 UTC with exactly three fractional
 * digits, int64 as JSON numbers. It is driven by the descriptors, so every
 * message gets the same treatment.
 */

interface EnumSpelling {
  toWire: Map<number, string>;
  fromWire: Map<string, number>;
}
const spellings = new WeakMap<DescEnum, EnumSpelling>();

/** The enum's wire spellings: the `wire_name` option, or the proto name without the enum's prefix. */
function spelling(desc: DescEnum): EnumSpelling {
  let s = spellings.get(desc);
  if (!s) {
    s = { toWire: new Map(), fromWire: new Map() };
    for (const value of desc.values) {
      if (value.number === 0) continue;
      const name = hasOption(value, wire_name) ? getOption(value, wire_name) : value.name.slice(desc.sharedPrefix?.length ?? 0);
      s.toWire.set(value.number, name);
      s.fromWire.set(name, value.number);
    }
    spellings.set(desc, s);
  }
  return s;
}

/** The wire spelling of an enum value (the empty string for the zero value). */
export function enumToWire(desc: DescEnum, value: number): string {
  return spelling(desc).toWire.get(value) ?? "";
}

/** ISO 8601 UTC with exactly three fractional digits. */
function timestampToWire(ts: Timestamp): string {
  return timestampDate(ts).toISOString();
}

// --- message → wire JSON --------------------------------------------------

function singularToWire(field: DescField, kind: "scalar" | "enum" | "message", value: unknown): unknown {
  if (kind === "enum") return enumToWire(field.enum!, value as number);
  if (kind === "message") return messageToWire(field.message!, value as Message);
  switch (field.scalar) {
    case ScalarType.INT64:
    case ScalarType.UINT64:
    case ScalarType.SINT64:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64: {
      const n = typeof value === "bigint" ? value : BigInt(value as number);
      return n <= BigInt(Number.MAX_SAFE_INTEGER) && n >= BigInt(Number.MIN_SAFE_INTEGER) ? Number(n) : n.toString();
    }
    case ScalarType.BYTES:
      return Buffer.from(value as Uint8Array).toString("base64");
    default:
      return value;
  }
}

/** Converts a message to its /v1 JSON object. Unset enums, messages and optional fields are omitted. */
export function messageToWire(desc: DescMessage, message: Message): JsonValue {
  switch (desc.typeName) {
    case "google.protobuf.Timestamp":
      return timestampToWire(message as Timestamp);
    case "google.protobuf.Struct":
      // protobuf-es represents Struct fields as plain JSON objects already.
      return message as unknown as JsonValue;
    case "google.protobuf.Value":
    case "google.protobuf.ListValue":
      return toJson(desc, message);
  }
  const out: Record<string, JsonValue> = {};
  const record = message as unknown as Record<string, unknown>;
  for (const field of desc.fields) {
    const value = record[field.localName];
    switch (field.fieldKind) {
      case "list":
        out[field.name] = (value as unknown[]).map((v) => singularToWire(field, field.listKind, v) as JsonValue);
        break;
      case "map": {
        const obj: Record<string, JsonValue> = {};
        for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
          obj[k] = singularToWire(field, field.mapKind, v) as JsonValue;
        }
        out[field.name] = obj;
        break;
      }
      case "message":
        if (value !== undefined) out[field.name] = messageToWire(field.message, value as Message);
        break;
      case "enum":
        if (value !== 0) out[field.name] = enumToWire(field.enum, value as number);
        break;
      case "scalar":
        if (field.presence === 1 /* EXPLICIT */ && !isFieldSet(message, field)) break;
        out[field.name] = singularToWire(field, "scalar", value) as JsonValue;
        break;
    }
  }
  return out;
}

// --- wire JSON → message --------------------------------------------------

function typeName(v: unknown): string {
  return v === null ? "null" : Array.isArray(v) ? "array" : typeof v;
}

class Reader {
  readonly errors: FieldError[] = [];

  fail(field: string, code: string, message: string): undefined {
    this.errors.push({ field, code, message });
    return undefined;
  }

  scalar(field: DescField, path: string, v: unknown): unknown {
    const scalar = field.scalar!;
    switch (scalar) {
      case ScalarType.STRING:
        return typeof v === "string" ? v : this.fail(path, "invalid_type", `expected a string, got ${typeName(v)}`);
      case ScalarType.BOOL:
        return typeof v === "boolean" ? v : this.fail(path, "invalid_type", `expected a boolean, got ${typeName(v)}`);
      case ScalarType.DOUBLE:
      case ScalarType.FLOAT:
        return typeof v === "number" && Number.isFinite(v) ? v : this.fail(path, "invalid_type", `expected a number, got ${typeName(v)}`);
      case ScalarType.BYTES:
        if (typeof v !== "string" || !/^[A-Za-z0-9+/_-]*={0,2}$/.test(v)) {
          return this.fail(path, "invalid_type", "expected base64 bytes");
        }
        return new Uint8Array(Buffer.from(v, "base64"));
      case ScalarType.INT32:
      case ScalarType.SINT32:
      case ScalarType.SFIXED32:
      case ScalarType.UINT32:
      case ScalarType.FIXED32: {
        const unsigned = scalar === ScalarType.UINT32 || scalar === ScalarType.FIXED32;
        const [min, max] = unsigned ? [0, 0xffffffff] : [-0x80000000, 0x7fffffff];
        if (typeof v !== "number" || !Number.isInteger(v)) return this.fail(path, "invalid_type", `expected an integer, got ${typeName(v)}`);
        if (v < min || v > max) return this.fail(path, "out_of_range", `must be between ${min} and ${max}`);
        return v;
      }
      default: {
        // 64-bit integers: a safe-integer number or a decimal string.
        if (typeof v === "number" && Number.isSafeInteger(v)) return BigInt(v);
        if (typeof v === "string" && /^-?\d{1,19}$/.test(v)) return BigInt(v);
        return this.fail(path, "invalid_type", `expected an integer, got ${typeName(v)}`);
      }
    }
  }

  enumValue(desc: DescEnum, path: string, v: unknown): number | undefined {
    const s = spelling(desc);
    if (typeof v === "string") {
      const n = s.fromWire.get(v);
      if (n !== undefined) return n;
    }
    return this.fail(path, "invalid_enum", `expected one of ${[...s.fromWire.keys()].map((k) => JSON.stringify(k)).join(", ")}`);
  }

  singular(field: DescField, kind: "scalar" | "enum" | "message", path: string, v: unknown): unknown {
    if (kind === "enum") return this.enumValue(field.enum!, path, v);
    if (kind === "message") return this.message(field.message!, path, v);
    return this.scalar(field, path, v);
  }

  message(desc: DescMessage, path: string, v: unknown): Message | undefined {
    switch (desc.typeName) {
      case "google.protobuf.Timestamp": {
        if (typeof v !== "string" || !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/.test(v)) {
          return this.fail(path, "invalid_format", "expected an ISO 8601 timestamp");
        }
        const date = new Date(v);
        if (Number.isNaN(date.getTime())) return this.fail(path, "invalid_format", "expected an ISO 8601 timestamp");
        return timestampFromDate(date);
      }
      case "google.protobuf.Struct":
        if (typeName(v) !== "object") return this.fail(path, "invalid_type", `expected an object, got ${typeName(v)}`);
        // protobuf-es represents Struct fields as plain JSON objects.
        return v as unknown as Message;
      case "google.protobuf.ListValue":
        if (!Array.isArray(v)) return this.fail(path, "invalid_type", `expected an array, got ${typeName(v)}`);
        return fromJson(ListValueSchema, v as JsonValue);
      case "google.protobuf.Value":
        return fromJson(ValueSchema, v as JsonValue);
    }
    if (typeName(v) !== "object") return this.fail(path || "(body)", "invalid_type", `expected an object, got ${typeName(v)}`);
    const init: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(v as Record<string, unknown>)) {
      const fieldPath = path ? `${path}.${key}` : key;
      const field = desc.fields.find((f) => f.name === key);
      if (!field) {
        this.fail(fieldPath, "unknown_field", "unknown field");
        continue;
      }
      if (value === null) continue;
      init[field.localName] = this.field(field, fieldPath, value);
    }
    return create(desc, init);
  }

  field(field: DescField, path: string, value: unknown): unknown {
    switch (field.fieldKind) {
      case "list":
        if (!Array.isArray(value)) return this.fail(path, "invalid_type", `expected an array, got ${typeName(value)}`);
        return value.map((item, i) => this.singular(field, field.listKind, `${path}[${i}]`, item));
      case "map": {
        if (typeName(value) !== "object") return this.fail(path, "invalid_type", `expected an object, got ${typeName(value)}`);
        const out: Record<string, unknown> = {};
        for (const [k, item] of Object.entries(value as Record<string, unknown>)) {
          out[k] = this.singular(field, field.mapKind, `${path}.${k}`, item);
        }
        return out;
      }
      default:
        return this.singular(field, field.fieldKind, path, value);
    }
  }
}

/** Parses a /v1 JSON value into a message; throws 422 `validation_failed` listing every bad field. */
export function messageFromWire<Desc extends DescMessage>(desc: Desc, json: unknown): Message {
  const reader = new Reader();
  const message = reader.message(desc, "", json);
  if (reader.errors.length > 0 || !message) throw validationFailed(reader.errors);
  return message;
}

/**
 * Parses one textual value (a path variable or query parameter) for `field`,
 * e.g. "3" for an int32 or "PENDING" for an enum.
 */
export function fieldFromText(field: DescField, path: string, text: string): unknown {
  const reader = new Reader();
  let value: unknown = text;
  const kind = field.fieldKind === "list" ? field.listKind : field.fieldKind === "map" ? "message" : field.fieldKind;
  if (kind === "scalar") {
    const s = field.scalar!;
    if (s === ScalarType.BOOL) value = text === "true" ? true : text === "false" ? false : text;
    else if (s !== ScalarType.STRING && s !== ScalarType.BYTES && /^-?\d+(\.\d+)?$/.test(text)) value = Number(text);
  }
  const result = kind === "message" ? reader.fail(path, "invalid_type", "cannot be given as text") : reader.singular(field, kind, path, value);
  if (reader.errors.length > 0) throw validationFailed(reader.errors);
  return result;
}
