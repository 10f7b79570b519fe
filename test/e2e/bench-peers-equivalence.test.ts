import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HttpClient } from "../../bench/support.js";
import { actingPrincipals, CERBOS_PATH, cerbosAllowed, cerbosBody, expected, OPA_PATH, opaBody, peerCases } from "../../bench/peers/policy.js";
import { CERBOS_BIN, setUpMandateOrg, signCase, startCerbos, startOpa, type PeerServer } from "../../bench/peers/systems.js";
import { startService, type TestService } from "../support/service.js";

/*
 * `npm run bench:peers` compares Mandate with OPA and Cerbos on one policy written natively for
 * each (bench/peers/policy.ts). Each form must decide as the oracle does, or the comparison means
 * nothing: the bench checks this before measuring; this catches a drift when it is made. The
 * suite's setup fetches the pinned Cerbos binary (scripts/fetch-cerbos.sh), as the bench's does.
 */

const cases = peerCases(actingPrincipals(8));
const oracle = cases.map(expected);

describe("bench:peers: the policy's three native forms decide as the oracle does", () => {
  it("has cases on both sides", () => {
    expect(oracle.filter(Boolean).length).toBeGreaterThan(10);
    expect(oracle.filter((allowed) => !allowed).length).toBeGreaterThan(10);
  });

  describe("Mandate (rules policy with the authority rule, 1,000-principal graph)", () => {
    let svc: TestService;
    let http: HttpClient;
    beforeAll(async () => {
      svc = await startService();
      http = new HttpClient(svc.baseUrl, 16);
    });
    afterAll(async () => {
      http?.close();
      await svc?.close();
    });

    it("answers every case over /v1 as the oracle", async () => {
      const agents = await setUpMandateOrg(http, svc.operatorKey!, actingPrincipals(8));
      const answers = await Promise.all(
        cases.map(async (c) => {
          const s = signCase(agents.get(c.principal)!, c);
          const res = await http.request("POST", "/v1/intents", s.bytes, { "x-service-key-id": s.keyId, "x-service-signature": s.signature });
          expect(res.status, res.text).toBe(200);
          return JSON.parse(res.text).outcome === "ALLOW";
        }),
      );
      expect(answers).toEqual(oracle);
    });
  });

  async function answers(server: PeerServer, path: string, body: (c: (typeof cases)[number]) => string, allowed: (answer: any, action: string) => boolean): Promise<boolean[]> {
    const http = new HttpClient(server.baseUrl, 8);
    try {
      return await Promise.all(
        cases.map(async (c) => {
          const res = await http.request("POST", path, body(c));
          expect(res.status, res.text).toBe(200);
          return allowed(JSON.parse(res.text), c.action);
        }),
      );
    } finally {
      http.close();
      await server.stop();
    }
  }

  it("opa run --server (Rego module over a data document) answers every case as the oracle", async () => {
    expect(await answers(await startOpa(), OPA_PATH, opaBody, (answer) => answer.result === true)).toEqual(oracle);
  });

  it("the Cerbos PDP (resource policy, graph in its constants) answers every case as the oracle", async () => {
    expect(await answers(await startCerbos(CERBOS_BIN), CERBOS_PATH, cerbosBody, cerbosAllowed)).toEqual(oracle);
  });
});
