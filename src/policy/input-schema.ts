import type { DecisionInput, IntentInput } from "./engine.js";

/**
 * JSON Schema (draft-07) of the `input` every policy is evaluated with ({@link DecisionInput}),
 * for `opa check --schema` at publish: with it, opa's type checker refuses a hand-written module
 * that reads a field `input` never has (`input.intent.amout`) or compares a field with a value of
 * another type, instead of the rule quietly never firing. Write it to a file with
 * `JSON.stringify(INPUT_SCHEMA)` and pass that file as `--schema`. The members mirror
 * DecisionInput exactly (the type check at the end of this module fails the build when they
 * drift); a null Intent field counts as absent, as at intake.
 */
export const INPUT_SCHEMA = {
  $schema: "http://json-schema.org/draft-07/schema#",
  title: "Mandate policy input",
  type: "object",
  additionalProperties: false,
  required: ["intent", "agent", "principal", "now"],
  properties: {
    intent: {
      description: "The signed Intent document, as validated at POST /v1/intents.",
      type: "object",
      additionalProperties: false,
      required: ["agent_id", "action", "requested_at", "nonce"],
      properties: {
        agent_id: { type: "string" },
        action: { type: "string" },
        amount: { type: ["number", "null"], minimum: 0 },
        currency: { type: ["string", "null"], description: "ISO 4217, e.g. USD" },
        counterparty: { type: ["string", "null"] },
        resource: { type: ["string", "null"], description: "<kind>:<identifier>" },
        context: {
          type: ["object", "null"],
          description: "Free-form keys (or the keys an integration contract binds) with scalar values.",
          additionalProperties: { type: ["string", "number", "boolean"] },
        },
        requested_at: { type: "string", description: "ISO 8601 UTC" },
        nonce: { type: "string" },
      },
    },
    agent: {
      description: "The acting agent.",
      type: "object",
      additionalProperties: false,
      required: ["agent_id", "state"],
      properties: {
        agent_id: { type: "string" },
        state: { type: "string", enum: ["registered", "active", "suspended", "revoked", "retired"] },
      },
    },
    principal: {
      description: "The principal the agent acts for.",
      type: "object",
      additionalProperties: false,
      required: ["principal_id", "external_ref", "kind"],
      properties: {
        principal_id: { type: "string" },
        external_ref: { type: ["string", "null"] },
        kind: { type: "string", enum: ["person", "role", "org_unit", "service"] },
      },
    },
    now: { type: "string", description: "The evaluation's time, ISO 8601 UTC, supplied by the service (policies read no clock)." },
  },
} as const;

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Properties<S> = S extends { properties: infer P } ? keyof P : never;
type P = typeof INPUT_SCHEMA.properties;

// Fails to compile when DecisionInput (or its intent, agent or principal) gains or loses a member the schema does not.
const inSync: [
  Same<Properties<typeof INPUT_SCHEMA>, keyof DecisionInput>,
  Same<Properties<P["intent"]>, keyof IntentInput>,
  Same<Properties<P["agent"]>, keyof DecisionInput["agent"]>,
  Same<Properties<P["principal"]>, keyof DecisionInput["principal"]>,
] = [true, true, true, true];
void inSync;
