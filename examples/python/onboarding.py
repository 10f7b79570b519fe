"""The spec's eight onboarding steps against a sandbox organization, with the Python client.

    pip install -e clients/python
    MANDATE_BASE_URL=http://127.0.0.1:8080 python examples/python/onboarding.py

1. Create an organization (a self-service sandbox).
2. Register an agent with a Principal; it starts `registered`.
3. Upload governance documents: signing schedule, delegation of authority, approval matrix.
4. Generate the Authority Graph from them, and publish it (a second key, holding POLICY_APPROVER).
5. Publish a Runtime Policy: draft -> review -> approved (by the second key) -> active.
6. Connect the agent: activate it and send a signed heartbeat.
7. Submit signed Intents.
8. Receive each decision and its evidence reference.

The last line printed is a JSON summary (the test suite reads it).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any, Dict, List

from mandate_client import AgentKey, MandateClient, bound_constraints

BASE_URL = os.environ.get("MANDATE_BASE_URL", "http://127.0.0.1:8080")

SIGNING_SCHEDULE = """principal,role,reports_to
,ap_clerk,finance_manager
,finance_manager,
pat,ap_clerk,
"""

DELEGATION_OF_AUTHORITY = """holder,delegate,action,currency,max_amount,valid_until
role:finance_manager,,vendor_payment,USD,50000,
role:ap_clerk,,vendor_payment,USD,10000,
"""

APPROVAL_MATRIX = """action,currency,up_to_amount,approvals_required
vendor_payment,USD,1000,0
vendor_payment,USD,5000,1
vendor_payment,USD,20000,2
"""

PAYMENTS_POLICY = {
    "actions": ["vendor_payment"],
    "rules": [
        {"id": "blocked_vendor", "when": {"counterparty": {"eq": "Shady LLC"}}, "outcome": "DENY", "reason": "blocked_counterparty"},
        {"id": "authority", "authority": True},
    ],
}


def step(n: int, text: str) -> None:
    print(f"[{n}/8] {text}")


def main() -> int:
    summary: Dict[str, Any] = {}

    # 1. Create an organization: a sandbox needs no authentication and comes with an
    #    all-permission API key and the active starter policy.
    with MandateClient(BASE_URL) as anonymous:
        sandbox = anonymous.create_sandbox(f"onboarding-{uuid.uuid4().hex[:10]}@example.com")
    step(1, f"sandbox organization {sandbox.organization_id} (starter policy: {sandbox.starter_policy_key})")
    admin = MandateClient(BASE_URL, api_key=sandbox.api_key)
    summary["organization_id"] = sandbox.organization_id

    # 2. Register an agent with a Principal. The key pair is generated here; only the
    #    public key is uploaded. Registering the same key again is the same agent.
    principal = admin.create_principal("Pat Payables", "person", external_ref="pat")
    key_file = Path(tempfile.mkdtemp(prefix="mandate-onboarding-")) / "payables-bot.pem"
    key = AgentKey.load_or_create(key_file)
    agent = admin.register_agent("payables-bot", principal.principal_id, key, owner="finance-ops", environment="sandbox")
    assert admin.register_agent("payables-bot", principal.principal_id, key).agent_id == agent.agent_id
    step(2, f"agent {agent.agent_id} ({agent.state}) acting for {principal.principal_id}; key in {key_file}")
    summary["agent_state_after_registration"] = agent.state

    # 3. Upload the governance documents.
    documents = [
        admin.upload_governance_document("signing-schedule.csv", "signing_schedule", "csv", SIGNING_SCHEDULE),
        admin.upload_governance_document("delegation-of-authority.csv", "delegation_of_authority", "csv", DELEGATION_OF_AUTHORITY),
        admin.upload_governance_document("approval-matrix.csv", "approval_matrix", "csv", APPROVAL_MATRIX),
    ]
    step(3, "uploaded " + ", ".join(f"{d.name}: {d.kind}, {d.rows} rows ({d.document_id})" for d in documents))

    # 4. Generate the Authority Graph, approve it and publish it. Approving and publishing need
    #    POLICY_APPROVER, and the approver cannot be the key that generated it (four eyes): a
    #    second key holds it, as it will approve the policy the first key authors.
    approver = admin.with_api_key(admin.create_api_key("approver", ["POLICY_APPROVER"]).api_key)
    graph = admin.generate_graph_version([d.document_id for d in documents])
    for w in graph.warnings:
        print(f"  warning: {w.document} line {w.line}: {w.message}", file=sys.stderr)
    approver.approve_graph_version(graph.version)
    graph = approver.publish_graph_version(graph.version)
    step(4, f"authority graph version {graph.version} is {graph.state}")

    # 5. Publish a Runtime Policy: draft -> in_review -> approved (four eyes) -> active.
    policy = admin.create_policy("payments", PAYMENTS_POLICY, description="Vendor payments within delegated authority")
    admin.submit_policy_version(policy.policy_key, policy.version)
    approver.approve_policy_version(policy.policy_key, policy.version)
    policy = approver.publish_policy_version(policy.policy_key, policy.version)
    step(5, f"runtime policy {policy.policy_key} v{policy.version} is {policy.state}")

    # 6. Connect the agent: activate it, then it signs its own heartbeat.
    admin.activate(agent, reason="onboarding complete")
    me = agent.identity(key)
    beat = admin.heartbeat(me)
    step(6, f"agent is {beat.state}, heartbeat at {beat.last_heartbeat_at}")

    # 7 + 8. Submit signed Intents; each answers a decision and its evidence reference.
    decisions: List[Dict[str, Any]] = []
    for amount, counterparty in ((500, "ACME Corp"), (2500, "ACME Corp"), (75000, "ACME Corp"), (100, "Shady LLC")):
        d = admin.submit_intent(me, "vendor_payment", amount=amount, currency="USD", counterparty=counterparty)
        decisions.append({"amount": amount, "counterparty": counterparty, "outcome": d.outcome, "reason": d.reason, "status": d.status, "decision_id": d.decision_id, "evidence_id": d.evidence_id})
        step(7, f"vendor_payment {amount} USD to {counterparty}")
        step(8, f"  -> {d.outcome} ({d.reason}){' ' + d.status if d.status else ''}, decision {d.decision_id}, evidence {d.evidence_id}")
    summary["decisions"] = decisions

    # The ALLOW can be turned into a single-use Capability for the enforcement point.
    allowed = decisions[0]
    cap = admin.issue_capability(allowed["decision_id"], audience="erp-gateway", issued_by="payables-bot", ttl_seconds=120)
    verified = admin.verify_capability(cap.token, "erp-gateway", "vendor_payment", "", bound_constraints(amount=500, currency="USD", counterparty="ACME Corp"))
    print(f"capability {verified.capability_id} verified and consumed for decision {verified.decision_id}")
    summary["capability_verified"] = verified.decision_id == allowed["decision_id"]

    evidence = admin.get_evidence(allowed["evidence_id"])
    print(f"evidence {evidence['evidence_id']}: kind={evidence['kind']} seq={evidence['seq']} signed by {evidence['kid']}")
    summary["evidence_kind"] = evidence["kind"]

    admin.close()
    approver.close()
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
