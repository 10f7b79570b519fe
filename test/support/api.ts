import { readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import {
  create,
  getOption,
  hasOption,
  toJson,
  type DescEnum,
  type DescField,
  type DescFile,
  type DescMessage,
  type DescMethod,
  type DescService,
  type Message,
} from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import { http } from "../../src/gen/google/api/annotations_pb.js";
import { internal, wire_name } from "../../src/gen/mandate/v1/options_pb.js";

/*
 * The public API as the generated descriptors state it, and the /v1 wire form
 * re-derived here independently of src/transport, so that contract tests can
 * hold both transports to one expectation without trusting the code under test.
 */

const genRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../src/gen/mandate");

/** Every generated file of package `mandate.<version>` (each `*_pb.ts` under src/gen/mandate/<version>). */
async function loadPackageFiles(version: string): Promise<DescFile[]> {
  const dir = path.join(genRoot, version);
  const files: DescFile[] = [];
  for (const name of readdirSync(dir).filter((f) => f.endsWith("_pb.ts")).sort()) {
    const mod = (await import(path.join(dir, name))) as Record<string, unknown>;
    const file = Object.entries(mod).find(([k]) => k.startsWith(`file_mandate_${version}_`))?.[1] as DescFile | undefined;
    if (!file) throw new Error(`${version}/${name} exports no file descriptor`);
    files.push(file);
  }
  return files;
}

/** Every generated file of package mandate.v1 (each `*_pb.ts`), loaded once. */
export async function loadMandateFiles(): Promise<DescFile[]> {
  return loadPackageFiles("v1");
}

const markInternal = (files: DescFile[]) =>
  files.flatMap((f) => f.services.map((service) => ({ service, internal: hasOption(service, internal) && getOption(service, internal) })));

/** Every service of package mandate.v1, marked public or `(mandate.v1.internal)`. */
export async function loadMandateServices(): Promise<{ service: DescService; internal: boolean }[]> {
  return markInternal(await loadMandateFiles());
}

/** Every service of every mandate package (v1 and the early-access ones such as v1alpha). */
export async function loadAllMandateServices(): Promise<{ service: DescService; internal: boolean }[]> {
  const versions = readdirSync(genRoot, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name).sort();
  return markInternal((await Promise.all(versions.map(loadPackageFiles))).flat());
}

/** One method's `google.api.http` binding, compiled to a matcher. */
export interface Binding {
  verb: string;
  template: string;
  body: string;
  /** Matches a concrete path; returns the path variables or null. */
  match(path: string): Record<string, string> | null;
}

/** The method's `google.api.http` binding, or undefined when it has none. */
export function bindingOf(method: DescMethod): Binding | undefined {
  if (!hasOption(method, http)) return undefined;
  const rule = getOption(method, http);
  const { case: verb, value } = rule.pattern;
  if (verb === undefined || verb === "custom" || !value) return undefined;
  const names: string[] = [];
  const source = value
    .split(/(\{[a-z_][a-z0-9_]*(?:=\*)?\})/)
    .map((part) => {
      const m = /^\{([a-z_][a-z0-9_]*)(?:=\*)?\}$/.exec(part);
      if (m) {
        names.push(m[1]!);
        return "([^/:]+)";
      }
      return part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    })
    .join("");
  const pattern = new RegExp(`^${source}$`);
  return {
    verb: verb.toUpperCase(),
    template: value,
    body: rule.body,
    match(p) {
      const m = pattern.exec(p);
      return m ? Object.fromEntries(names.map((n, i) => [n, decodeURIComponent(m[i + 1]!)])) : null;
    },
  };
}

/** The spec's spelling of an enum value: its `wire_name`, else the proto name without the enum prefix. */
export function wireNameOf(desc: DescEnum, number: number): string | undefined {
  const value = desc.values.find((v) => v.number === number);
  if (!value || number === 0) return undefined;
  return hasOption(value, wire_name) ? getOption(value, wire_name) : value.name.slice(desc.sharedPrefix?.length ?? 0);
}

function enumFromWire(desc: DescEnum, name: unknown, where: string): number {
  for (const v of desc.values) if (v.number !== 0 && wireNameOf(desc, v.number) === name) return v.number;
  throw new Error(`${where}: ${JSON.stringify(name)} is no wire spelling of ${desc.typeName}`);
}

/** Raised when a /v1 JSON body has no protobuf equivalent (unknown field, wrong type…): such a case is /v1-only. */
export class NotExpressible extends Error {}

function singularFromWire(field: DescField, kind: "scalar" | "enum" | "message", v: unknown, where: string): unknown {
  if (kind === "enum") return enumFromWire(field.enum!, v, where);
  if (kind === "message") return messageFromWireJson(field.message!, v, where);
  return v;
}

/** Builds a request message from its /v1 JSON form (snake_case, spec enum spellings, ISO timestamps). */
export function messageFromWireJson(desc: DescMessage, json: unknown, where = desc.typeName): Message {
  if (desc.typeName === "google.protobuf.Timestamp") return timestampFromDate(new Date(json as string));
  if (typeof json !== "object" || json === null || Array.isArray(json)) throw new NotExpressible(`${where}: not an object`);
  // A Struct field holds plain JSON in protobuf-es: the /v1 object is its value as it is.
  if (desc.typeName === "google.protobuf.Struct") return json as Message;
  const init: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(json)) {
    const field = desc.fields.find((f) => f.name === key);
    if (!field) throw new NotExpressible(`${where}: no field ${key}`);
    const at = `${where}.${key}`;
    if (field.fieldKind === "list") {
      if (!Array.isArray(value)) throw new NotExpressible(`${at}: not a list`);
      init[field.localName] = value.map((item, i) => singularFromWire(field, field.listKind, item, `${at}[${i}]`));
    } else if (field.fieldKind === "map") {
      init[field.localName] = Object.fromEntries(Object.entries(value as object).map(([k, item]) => [k, singularFromWire(field, field.mapKind, item, `${at}.${k}`)]));
    } else {
      init[field.localName] = singularFromWire(field, field.fieldKind, value, at);
    }
  }
  return create(desc, init);
}

function singularToWire(field: DescField, kind: "scalar" | "enum" | "message", v: unknown): unknown {
  if (kind === "enum") return wireNameOf(field.enum!, v as number) ?? "";
  if (kind === "message") return messageToWireJson(field.message!, v as Message);
  if (typeof v === "bigint") return Number(v);
  if (v instanceof Uint8Array) return Buffer.from(v).toString("base64");
  return v;
}

/**
 * A gRPC response message in the /v1 JSON form, so one expectation covers both
 * transports: snake_case names, spec enum spellings, timestamps as
 * `toISOString()`, unset messages and zero enums omitted.
 */
export function messageToWireJson(desc: DescMessage, message: Message): unknown {
  if (desc.typeName === "google.protobuf.Timestamp") return timestampDate(message as Timestamp).toISOString();
  // Struct fields are plain JSON in protobuf-es; Value and ListValue are messages with a JSON form.
  if (desc.typeName === "google.protobuf.Struct") return message;
  if (desc.typeName === "google.protobuf.Value" || desc.typeName === "google.protobuf.ListValue") return toJson(desc, message);
  const out: Record<string, unknown> = {};
  const record = message as unknown as Record<string, unknown>;
  for (const field of desc.fields) {
    const value = record[field.localName];
    if (field.fieldKind === "list") out[field.name] = (value as unknown[]).map((v) => singularToWire(field, field.listKind, v));
    else if (field.fieldKind === "map")
      out[field.name] = Object.fromEntries(Object.entries(value as object).map(([k, v]) => [k, singularToWire(field, field.mapKind, v)]));
    else if (field.fieldKind === "message") {
      if (value !== undefined) out[field.name] = singularToWire(field, "message", value);
    } else if (field.fieldKind === "enum") {
      if (value !== 0) out[field.name] = singularToWire(field, "enum", value);
    } else if (field.oneof === undefined || value !== undefined) {
      out[field.name] = singularToWire(field, "scalar", value);
    }
  }
  return out;
}

/** ISO 8601 UTC with exactly three fractional digits: the only timestamp form on the /v1 wire. */
export const WIRE_TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/**
 * Problems with a /v1 JSON answer's wire form, checked against the message
 * descriptor: every key is a proto field name (snake_case, so never the
 * camelCase JSON name), every timestamp is WIRE_TIMESTAMP, every enum is one of
 * the spec's spellings, lists are arrays. Map keys and Struct contents are data,
 * not names, and are left alone.
 */
export function wireFormProblems(desc: DescMessage, value: unknown, at = "$"): string[] {
  switch (desc.typeName) {
    case "google.protobuf.Timestamp":
      return typeof value === "string" && WIRE_TIMESTAMP.test(value) ? [] : [`${at}: timestamp ${JSON.stringify(value)} is not ${WIRE_TIMESTAMP}`];
    case "google.protobuf.Struct":
    case "google.protobuf.Value":
    case "google.protobuf.ListValue":
      return [];
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return [`${at}: expected an object for ${desc.typeName}`];
  const problems: string[] = [];
  const singular = (field: DescField, kind: "scalar" | "enum" | "message", v: unknown, where: string): string[] => {
    if (kind === "message") return wireFormProblems(field.message!, v, where);
    if (kind === "enum") {
      const spellings = field.enum!.values.filter((e) => e.number !== 0).map((e) => wireNameOf(field.enum!, e.number));
      return spellings.includes(v as string) ? [] : [`${where}: ${JSON.stringify(v)} is not one of ${spellings.join(", ")}`];
    }
    return [];
  };
  for (const [key, v] of Object.entries(value)) {
    const field = desc.fields.find((f) => f.name === key);
    const where = `${at}.${key}`;
    if (!field) {
      problems.push(`${where}: no field ${JSON.stringify(key)} in ${desc.typeName}`);
      continue;
    }
    if (field.fieldKind === "list") {
      if (!Array.isArray(v)) problems.push(`${where}: expected an array`);
      else v.forEach((item, i) => problems.push(...singular(field, field.listKind, item, `${where}[${i}]`)));
    } else if (field.fieldKind === "map") {
      for (const [k, item] of Object.entries(v as object)) problems.push(...singular(field, field.mapKind, item, `${where}.${k}`));
    } else {
      problems.push(...singular(field, field.fieldKind, v, where));
    }
  }
  return problems;
}
