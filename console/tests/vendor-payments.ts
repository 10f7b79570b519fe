import { AgentKey, agentIdentity, type AgentIdentity, type MandateClient } from "@mandate/client";

/*
 * What the console journeys set up through the API before the browser sees it: the vendor
 * payments policy, an authority graph deciding within it, and active agents.
 */

/**
 * Publishes the `payments` policy (DENY over 1,000,000 USD, else the authority graph decides) and
 * a graph putting principal `principalRef` in role clerk (up to 50,000 USD) whose vendor_payment
 * USD approval matrix is `bands` ([up_to_amount, approvals_required] pairs). `approver`, another
 * key holding POLICY_APPROVER, approves and publishes both (four eyes).
 */
export async function publishVendorPayments(admin: MandateClient, approver: MandateClient, principalRef: string, bands: [number, number][]): Promise<void> {
  await admin.createPolicy(
    "payments",
    { actions: ["vendor_payment"], rules: [{ id: "hard_cap", when: { amount: { gt: 1_000_000 } }, outcome: "DENY", reason: "amount_over_hard_cap" }, { id: "authority", authority: true }] },
    "Vendor payments within delegated authority.",
  );
  await admin.submitPolicyVersion("payments", 1);
  await approver.approvePolicyVersion("payments", 1);
  await approver.publishPolicyVersion("payments", 1);
  const graph = await admin.createGraphVersion({
    roles: [{ role: "clerk", reports_to: null }],
    memberships: [{ principal: principalRef, role: "clerk" }],
    limits: [{ holder: "role:clerk", action: "vendor_payment", currency: "USD", max_amount: 50_000 }],
    delegations: [],
    approval_matrix: bands.map(([upTo, approvals]) => ({ action: "vendor_payment", currency: "USD", up_to_amount: upTo, approvals_required: approvals })),
  });
  await approver.approveGraphVersion(graph.version);
  await approver.publishGraphVersion(graph.version);
}

/** Registers and activates an agent named `name` acting for `principalId`, with a fresh key. */
export async function activeAgent(admin: MandateClient, name: string, principalId: string): Promise<AgentIdentity> {
  const key = await AgentKey.generate();
  const registered = await admin.registerAgent({ name, principal_id: principalId, key });
  await admin.activate(registered.agent_id);
  return agentIdentity(registered, key);
}
