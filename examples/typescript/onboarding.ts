/**
 * The spec's eight onboarding steps against a sandbox organization, with the TypeScript client.
 *
 *     MANDATE_BASE_URL=http://127.0.0.1:8080 npx tsx examples/typescript/onboarding.ts
 *
 * 1. Create an organization (a self-service sandbox).
 * 2. Register an agent with a Principal; it starts `registered`.
 * 3. Upload governance documents: signing schedule, delegation of authority, approval matrix.
 * 4. Generate the Authority Graph from them, and publish it (a second key, holding POLICY_APPROVER).
 * 5. Publish a Runtime Policy: draft → review → approved (by the second key) → active.
 * 6. Connect the agent: activate it and send a signed heartbeat.
 * 7. Submit signed Intents.
 * 8. Receive each decision and its evidence reference.
 *
 * The last line printed is a JSON summary (the test suite reads it).
 */
import { mkdtemp } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { randomUUID } from "node:crypto";
import { agentIdentity, boundConstraints, MandateClient } from "@mandate/client";
import { loadOrCreateKey } from "@mandate/client/node";

const BASE_URL = process.env.MANDATE_BASE_URL ?? "http://127.0.0.1:8080";

const SIGNING_SCHEDULE = `principal,role,reports_to
,ap_clerk,finance_manager
,finance_manager,
pat,ap_clerk,
`;

const DELEGATION_OF_AUTHORITY = `holder,delegate,action,currency,max_amount,valid_until
role:finance_manager,,vendor_payment,USD,50000,
role:ap_clerk,,vendor_payment,USD,10000,
`;

const APPROVAL_MATRIX = `action,currency,up_to_amount,approvals_required
vendor_payment,USD,1000,0
vendor_payment,USD,5000,1
vendor_payment,USD,20000,2
`;

const PAYMENTS_POLICY = {
  actions: ["vendor_payment"],
  rules: [
    { id: "blocked_vendor", when: { counterparty: { eq: "Shady LLC" } }, outcome: "DENY", reason: "blocked_counterparty" },
    { id: "authority", authority: true },
  ],
};

const step = (n: number, text: string) => console.log(`[${n}/8] ${text}`);

async function main(): Promise<void> {
  const summary: Record<string, unknown> = {};

  // 1. Create an organization: a sandbox needs no authentication and comes with an
  //    all-permission API key and the active starter policy.
  const sandbox = await new MandateClient({ base_url: BASE_URL }).createSandbox(`onboarding-${randomUUID().slice(0, 10)}@example.com`);
  step(1, `sandbox organization ${sandbox.organization_id} (starter policy: ${sandbox.starter_policy_key})`);
  const admin = new MandateClient({ base_url: BASE_URL, api_key: sandbox.api_key });
  summary.organization_id = sandbox.organization_id;

  // 2. Register an agent with a Principal. The key pair is generated here; only the
  //    public key is uploaded. Registering the same key again is the same agent.
  const principal = await admin.createPrincipal({ display_name: "Pat Payables", kind: "person", external_ref: "pat" });
  const keyFile = path.join(await mkdtemp(path.join(os.tmpdir(), "mandate-onboarding-")), "payables-bot.pem");
  const key = await loadOrCreateKey(keyFile);
  const agent = await admin.registerAgent({ name: "payables-bot", principal_id: principal.principal_id, key, owner: "finance-ops", environment: "sandbox" });
  const again = await admin.registerAgent({ name: "payables-bot", principal_id: principal.principal_id, key });
  if (again.agent_id !== agent.agent_id) throw new Error("registration is idempotent per key");
  step(2, `agent ${agent.agent_id} (${agent.state}) acting for ${principal.principal_id}; key in ${keyFile}`);
  summary.agent_state_after_registration = agent.state;

  // 3. Upload the governance documents.
  const documents = [
    await admin.uploadGovernanceDocument("signing-schedule.csv", "signing_schedule", "csv", SIGNING_SCHEDULE),
    await admin.uploadGovernanceDocument("delegation-of-authority.csv", "delegation_of_authority", "csv", DELEGATION_OF_AUTHORITY),
    await admin.uploadGovernanceDocument("approval-matrix.csv", "approval_matrix", "csv", APPROVAL_MATRIX),
  ];
  step(3, `uploaded ${documents.map((d) => `${d.name}: ${d.kind}, ${d.rows} rows (${d.document_id})`).join(", ")}`);

  // 4. Generate the Authority Graph, approve it and publish it. Approving and publishing need
  //    POLICY_APPROVER, and the approver cannot be the key that generated it (four eyes): a
  //    second key holds it, as it will approve the policy the first key authors.
  const approver = admin.withApiKey((await admin.createApiKey("approver", ["POLICY_APPROVER"])).api_key);
  const draft = await admin.generateGraphVersion(documents.map((d) => d.document_id));
  for (const w of draft.warnings) console.warn(`  warning: ${w.document} line ${w.line}: ${w.message}`);
  await approver.approveGraphVersion(draft.version);
  const graph = await approver.publishGraphVersion(draft.version);
  step(4, `authority graph version ${graph.version} is ${graph.state}`);

  // 5. Publish a Runtime Policy: draft → in_review → approved (four eyes) → active.
  const created = await admin.createPolicy("payments", PAYMENTS_POLICY, "Vendor payments within delegated authority");
  await admin.submitPolicyVersion(created.policy_key, created.version);
  await approver.approvePolicyVersion(created.policy_key, created.version);
  const policy = await approver.publishPolicyVersion(created.policy_key, created.version);
  step(5, `runtime policy ${policy.policy_key} v${policy.version} is ${policy.state}`);

  // 6. Connect the agent: activate it, then it signs its own heartbeat.
  await admin.activate(agent, "onboarding complete");
  const me = agentIdentity(agent, key);
  const beat = await admin.heartbeat(me);
  step(6, `agent is ${beat.state}, heartbeat at ${beat.last_heartbeat_at}`);

  // 7 + 8. Submit signed Intents; each answers a decision and its evidence reference.
  const decisions = [];
  for (const [amount, counterparty] of [[500, "ACME Corp"], [2500, "ACME Corp"], [75000, "ACME Corp"], [100, "Shady LLC"]] as const) {
    const d = await admin.submitIntent(me, { action: "vendor_payment", amount, currency: "USD", counterparty });
    decisions.push({ amount, counterparty, outcome: d.outcome, reason: d.reason, status: d.status ?? null, decision_id: d.decision_id, evidence_id: d.evidence_id });
    step(7, `vendor_payment ${amount} USD to ${counterparty}`);
    step(8, `  -> ${d.outcome} (${d.reason})${d.status ? ` ${d.status}` : ""}, decision ${d.decision_id}, evidence ${d.evidence_id}`);
  }
  summary.decisions = decisions;

  // The ALLOW can be turned into a single-use Capability for the enforcement point.
  const allowed = decisions[0]!;
  const cap = await admin.issueCapability(allowed.decision_id, { audience: "erp-gateway", issued_by: "payables-bot", ttl_seconds: 120 });
  const verified = await admin.verifyCapability({
    token: cap.token,
    audience: "erp-gateway",
    action: "vendor_payment",
    resource: "",
    constraints: boundConstraints({ amount: 500, currency: "USD", counterparty: "ACME Corp" }),
  });
  console.log(`capability ${verified.capability_id} verified and consumed for decision ${verified.decision_id}`);
  summary.capability_verified = verified.decision_id === allowed.decision_id;

  const evidence = await admin.getEvidence(allowed.evidence_id);
  console.log(`evidence ${String(evidence.evidence_id)}: kind=${String(evidence.kind)} seq=${String(evidence.seq)} signed by ${String(evidence.kid)}`);
  summary.evidence_kind = evidence.kind;

  console.log(JSON.stringify(summary));
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
