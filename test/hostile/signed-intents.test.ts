import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  decisionCount,
  evidenceCount,
  intentDoc,
  newAgent,
  newAgentKey,
  newOrgFixture,
  signBody,
  submitIntent,
  TRANSPORTS,
  type OrgFixture,
  type SignedBody,
  type TestAgent,
} from "../support/agents.js";
import { startService, type TestService } from "../support/service.js";
import { recordRow, scaled } from "./report.js";

/*
 * Hostile row 4, signature and parsing attacks on signed Intents. Each attack
 * is sent over /v1 and gRPC, REPEAT times (fresh nonces each time), and must be
 * refused with its status and error code. Nothing may be recorded: the agent's
 * decisions and the organization's evidence chain are counted before and
 * after (a replay's original is the only thing that may add one decision and
 * its evidence). A failure: a probe answered otherwise than expected, or a
 * decision or evidence record more than the replays' originals.
 */

const REPEAT = scaled(1, 10);

interface Attack {
  name: string;
  status: number;
  detail: string;
  /** The signed request to send (fresh each call). */
  make(agent: TestAgent, other: TestAgent): SignedBody;
  /**
   * A replay: `original` is sent first and must succeed (it records one decision); then the
   * probe. An exact replay must answer the original decision again (status 200, same id).
   */
  original?(agent: TestAgent, signed: SignedBody): SignedBody;
}

/** The Intent's JSON text with `extra` spliced in before its closing brace (for members JSON.stringify cannot repeat). */
const withRaw = (agent: TestAgent, extra: string, fields: Record<string, unknown> = {}) => JSON.stringify(intentDoc(agent.agentId, fields)).slice(0, -1) + extra + "}";
const sig = (agent: TestAgent, text: string | Uint8Array) => signBody(agent, typeof text === "string" ? new Uint8Array(Buffer.from(text, "utf8")) : text);
const flip = (b64: string) => {
  const bytes = Buffer.from(b64, "base64");
  bytes[7] = bytes[7]! ^ 0x01;
  return bytes.toString("base64");
};

const ATTACKS: Attack[] = [
  { name: "signature with one bit flipped", status: 401, detail: "signature_invalid", make: (a) => { const s = signBody(a, intentDoc(a.agentId)); return { ...s, signature: flip(s.signature) }; } },
  { name: "signed by a key nobody registered", status: 401, detail: "signature_invalid", make: (a) => { const k = newAgentKey(); const bytes = Buffer.from(JSON.stringify(intentDoc(a.agentId))); return { bytes: new Uint8Array(bytes), keyId: a.certificateId, signature: k.sign(bytes) }; } },
  { name: "another agent's key id on this agent's signature", status: 401, detail: "signature_invalid", make: (a, o) => ({ ...signBody(a, intentDoc(a.agentId)), keyId: o.certificateId }) },
  { name: "an unknown key id", status: 401, detail: "unknown_key", make: (a) => ({ ...signBody(a, intentDoc(a.agentId)), keyId: `crt_${randomUUID().replaceAll("-", "")}` }) },
  { name: "a signature of 63 bytes", status: 401, detail: "signature_invalid", make: (a) => { const s = signBody(a, intentDoc(a.agentId)); return { ...s, signature: Buffer.from(s.signature, "base64").subarray(0, 63).toString("base64") }; } },
  { name: "a space appended after signing", status: 401, detail: "signature_invalid", make: (a) => { const s = signBody(a, intentDoc(a.agentId)); return { ...s, bytes: new Uint8Array([...s.bytes, 0x20]) }; } },
  { name: "duplicate key: action twice", status: 422, detail: "duplicate_key", make: (a) => sig(a, withRaw(a, ',"action":"wire_transfer"')) },
  { name: "duplicate key: nonce twice", status: 422, detail: "duplicate_key", make: (a) => sig(a, withRaw(a, `,"nonce":"${randomUUID()}"`)) },
  { name: "duplicate key in context, spelled with an escape", status: 422, detail: "duplicate_key", make: (a) => sig(a, withRaw(a, ',"context":{"po":"1","p\\u006f":"2"}')) },
  { name: "imprecise number 9007199254740993", status: 422, detail: "imprecise_number", make: (a) => sig(a, withRaw(a, ',"amount":9007199254740993,"currency":"USD"')) },
  { name: "imprecise number 100000.0000000000001", status: 422, detail: "imprecise_number", make: (a) => sig(a, withRaw(a, ',"amount":100000.0000000000001,"currency":"USD"')) },
  { name: "trailing garbage after the object", status: 422, detail: "validation_failed", make: (a) => sig(a, `${JSON.stringify(intentDoc(a.agentId))}x`) },
  { name: "two objects back to back", status: 422, detail: "validation_failed", make: (a) => sig(a, JSON.stringify(intentDoc(a.agentId)) + JSON.stringify(intentDoc(a.agentId))) },
  { name: "a UTF-8 byte order mark before the object", status: 422, detail: "validation_failed", make: (a) => sig(a, new Uint8Array([0xef, 0xbb, 0xbf, ...Buffer.from(JSON.stringify(intentDoc(a.agentId)))])) },
  { name: "10,000 levels of nesting in context", status: 422, detail: "validation_failed", make: (a) => sig(a, withRaw(a, `,"context":{"x":${"[".repeat(10_000)}${"]".repeat(10_000)}}`)) },
  { name: "a byte that is not UTF-8 (0xff) in a string", status: 422, detail: "validation_failed", make: (a) => { const text = withRaw(a, ',"context":{"po":"AB"}'); const bytes = Buffer.from(text); bytes[bytes.indexOf("AB") + 1] = 0xff; return sig(a, new Uint8Array(bytes)); } },
  { name: "an overlong UTF-8 encoding (0xc0 0xaf)", status: 422, detail: "validation_failed", make: (a) => { const bytes = Buffer.from(withRaw(a, ',"context":{"po":"AB"}')); const at = bytes.indexOf("AB"); bytes[at] = 0xc0; bytes[at + 1] = 0xaf; return sig(a, new Uint8Array(bytes)); } },
  { name: "a lone surrogate escape (\\ud800)", status: 422, detail: "validation_failed", make: (a) => sig(a, withRaw(a, ',"context":{"po":"\\ud800"}')) },
  { name: "NaN, a leading zero, a bare word", status: 422, detail: "validation_failed", make: (a) => sig(a, withRaw(a, ',"amount":NaN')) },
  { name: "a body that is not an object (an array)", status: 422, detail: "validation_failed", make: (a) => sig(a, JSON.stringify([intentDoc(a.agentId)])) },
  { name: "an exact replay: answers the original decision, records nothing", status: 200, detail: "", make: (a) => signBody(a, intentDoc(a.agentId)), original: (_a, s) => s },
  {
    name: "a replay of the nonce with other bytes (a space added, properly signed)",
    status: 409,
    detail: "nonce_reused",
    make: (a) => signBody(a, intentDoc(a.agentId)),
    original: (a, s) => sig(a, `${Buffer.from(s.bytes).toString("utf8")} `),
  },
];

describe("hostile: signature and parsing attacks on signed Intents", () => {
  let svc: TestService;
  let org: OrgFixture;
  let agent: TestAgent;
  let other: TestAgent;

  beforeAll(async () => {
    svc = await startService();
    org = await newOrgFixture(svc);
    [agent, other] = await Promise.all([newAgent(svc, org), newAgent(svc, org)]);
  });
  afterAll(async () => {
    await svc?.close();
  });

  it(`${ATTACKS.length} attacks × /v1 and gRPC × ${REPEAT}: each refused with its code, nothing recorded`, async () => {
    const decisionsBefore = await decisionCount(svc, org.apiKey, agent.agentId);
    const evidenceBefore = await evidenceCount(svc, org.apiKey);
    const failures: string[] = [];
    let probes = 0;
    let originals = 0;
    for (let n = 0; n < REPEAT; n++) {
      for (const attack of ATTACKS) {
        for (const transport of TRANSPORTS) {
          const signed = attack.make(agent, other);
          let first: Awaited<ReturnType<typeof submitIntent>> | undefined;
          if (attack.original) {
            first = await submitIntent(svc, transport, attack.original(agent, signed));
            if (first.status !== 200) failures.push(`${attack.name} over ${transport}: the original got ${first.status} ${first.detail}`);
            else originals++;
          }
          probes++;
          const res = await submitIntent(svc, transport, signed);
          if (res.status === 200 && first && res.body.decision_id !== first.body.decision_id)
            failures.push(`${attack.name} over ${transport}: a new decision ${res.body.decision_id}, not the original ${first.body.decision_id}`);
          else if (res.status !== attack.status || (res.detail ?? "") !== attack.detail)
            failures.push(`${attack.name} over ${transport}: ${res.status} ${res.detail ?? ""} (want ${attack.status} ${attack.detail}) ${JSON.stringify(res.body).slice(0, 200)}`);
        }
      }
    }
    // Each original records one decision and one evidence record (decision.recorded); nothing else may appear.
    probes++;
    const decisions = (await decisionCount(svc, org.apiKey, agent.agentId)) - decisionsBefore;
    const evidence = (await evidenceCount(svc, org.apiKey)) - evidenceBefore;
    if (decisions !== originals) failures.push(`${decisions} decisions recorded, ${originals} expected (the replays' originals)`);
    if (evidence !== originals) failures.push(`${evidence} evidence records appended, ${originals} expected (the replays' originals)`);
    recordRow({
      order: 4,
      attack: `signature and parsing attacks: ${ATTACKS.length} malformed or replayed signed Intents × /v1, gRPC × ${REPEAT}`,
      probes,
      failures: failures.length,
      note: `each refused with its code; ${decisions} decisions and ${evidence} evidence records added (${originals} replay originals)`,
    });
    expect(failures).toEqual([]);
  }, 300_000);
});
