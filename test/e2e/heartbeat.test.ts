import { generateKeyPairSync, randomUUID, sign } from "node:crypto";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startService, type TestService } from "../support/service.js";

let svc: TestService;
beforeAll(async () => {
  svc = await startService();
});
afterAll(async () => {
  await svc?.close();
});

it("accepts a heartbeat once and refuses its replay and anything sent earlier", async () => {
  const org = await svc.newOrg();
  const principal = await svc.v1("POST", "/v1/principals", { bearer: org.apiKey, body: { display_name: "P", kind: "service" } });
  const { publicKey, privateKey } = generateKeyPairSync("ed25519");
  const pk = `ed25519:base64:${Buffer.from(publicKey.export({ format: "jwk" }).x!, "base64url").toString("base64")}`;
  const agent = (await svc.v1("POST", "/v1/agents", { bearer: org.apiKey, body: { name: "hb", acting_for_principal_id: principal.body.principal_id, public_key: pk } })).body;
  await svc.v1("POST", `/v1/agents/${agent.agent_id}/activate`, { bearer: org.apiKey });
  const beat = (sentAt: Date) => {
    const body = Buffer.from(JSON.stringify({ agent_id: agent.agent_id, sent_at: sentAt.toISOString(), nonce: randomUUID() }));
    return fetch(`${svc.baseUrl}/v1/agents/${agent.agent_id}/heartbeat`, {
      method: "POST",
      body,
      headers: { "x-service-key-id": agent.certificate_id, "x-service-signature": sign(null, body, privateKey).toString("base64") },
    }).then(async (r) => ({ status: r.status, body: (await r.json()) as Record<string, string>, bytes: body }));
  };
  const now = Date.now();
  const first = await beat(new Date(now));
  expect(first.status).toBe(200);
  expect(first.body.last_heartbeat_at).toMatch(/\.\d{3}Z$/);
  const replayed = await fetch(`${svc.baseUrl}/v1/agents/${agent.agent_id}/heartbeat`, {
    method: "POST",
    body: first.bytes,
    headers: { "x-service-key-id": agent.certificate_id, "x-service-signature": sign(null, first.bytes, privateKey).toString("base64") },
  });
  expect(replayed.status).toBe(409);
  expect(((await replayed.json()) as { detail: string }).detail).toBe("nonce_reused");
  expect((await beat(new Date(now - 1000))).status).toBe(409);
  expect((await beat(new Date(now + 1000))).status).toBe(200);
  await svc.v1("POST", `/v1/agents/${agent.agent_id}/suspend`, { bearer: org.apiKey });
  const suspended = await beat(new Date(now + 2000));
  expect(suspended.status).toBe(403);
  expect(suspended.body.detail).toBe("agent_not_active");
});
