import { afterAll, beforeAll, it } from "vitest";
import { startService, type TestService } from "../support/service.js";
import { call, newAgent, newOrgFixture, intentDoc, signBody, submitIntent, exportEvidence, heartbeat, agentGetDecision } from "../support/agents.js";
import { AgentService } from "../../src/gen/mandate/v1/agents_pb.js";
import { EvidenceService } from "../../src/gen/mandate/v1/evidence_pb.js";
import { verifyEvidenceExport } from "../../src/evidence/verify.js";

let svc: TestService;
beforeAll(async () => { const t = Date.now(); svc = await startService(); console.log("start ms", Date.now() - t); });
afterAll(() => svc?.close());

it("explore", async () => {
  const org = await newOrgFixture(svc);
  const a = await newAgent(svc, org);
  for (const t of ["v1", "grpc"] as const) {
    console.log(t, JSON.stringify(await call(svc, t, AgentService.method.getAgent, { agent_id: a.agentId }, { bearer: org.apiKey })));
    const s = signBody(a, intentDoc(a.agentId));
    const r = await submitIntent(svc, t, s);
    console.log(t, JSON.stringify(r));
    console.log(t, JSON.stringify(await submitIntent(svc, t, s)));
    console.log(t, JSON.stringify(await submitIntent(svc, t, signBody(a, intentDoc(a.agentId, {action: "pay"})))));
    console.log(t, JSON.stringify(await heartbeat(svc, t, a)));
    console.log(t, JSON.stringify(await agentGetDecision(svc, t, a, r.body.decision_id)));
    console.log(t, JSON.stringify(await call(svc, t, AgentService.method.suspendAgent, { agent_id: a.agentId }, { bearer: org.apiKey })));
    console.log(t, JSON.stringify(await call(svc, t, AgentService.method.suspendAgent, { agent_id: a.agentId, reason: "x" }, { bearer: org.apiKey })));
    console.log(t, JSON.stringify(await call(svc, t, AgentService.method.reactivateAgent, { agent_id: a.agentId, reason: "x" }, { bearer: org.apiKey })));
    console.log(t, JSON.stringify(await call(svc, t, EvidenceService.method.listEvidence, { after_seq: 2, page_size: 2 }, { bearer: org.apiKey })).slice(0, 1500));
  }
  const ex = await exportEvidence(svc, org.apiKey);
  console.log(ex.records.length, JSON.stringify(ex.jwks), JSON.stringify(verifyEvidenceExport(ex)));
});
