"""Human review with the Python client: a HUMAN_REVIEW resolved by two reviewers (dual
approval), the single-use Capability issued from the approved review, and a rejection.

    MANDATE_BASE_URL=http://127.0.0.1:8080 python examples/python/human_review.py

The last line printed is a JSON summary (test/e2e/human-review-examples.test.ts reads it).
"""

from __future__ import annotations

import json
import uuid

from mandate_client import AgentKey, ConflictError, MandateClient, PermissionDeniedError

# Payments up to 1,000 pass; up to 10,000 need one reviewer; above, two (requires_dual_approval).
PAYMENTS_POLICY = {
    "actions": ["vendor_payment"],
    "rules": [
        {"id": "small", "when": {"amount": {"lt": 1000}}, "outcome": "ALLOW", "reason": "small_payment"},
        {"id": "review", "when": {"amount": {"gte": 1000, "lt": 10000}}, "outcome": "HUMAN_REVIEW", "reason": "requires_approval"},
        {"id": "dual", "when": {"amount": {"gte": 10000}}, "outcome": "HUMAN_REVIEW", "reason": "requires_dual_approval"},
    ],
}


def main() -> None:
    # MANDATE_BASE_URL is the client's default. A sandbox key holds every permission, REVIEWER
    # included; a second key is the second reviewer (and the policy's approver: four eyes).
    with MandateClient() as anonymous:
        sandbox = anonymous.create_sandbox(f"review-{uuid.uuid4().hex[:10]}@example.com")
    alice = MandateClient(api_key=sandbox.api_key)
    bob = alice.with_api_key(alice.create_api_key("bob", ["REVIEWER", "POLICY_APPROVER", "DECISION_READ"]).api_key)

    created = alice.create_policy("payments", PAYMENTS_POLICY)
    alice.submit_policy_version("payments", created.version)
    bob.approve_policy_version("payments", created.version)
    bob.publish_policy_version("payments", created.version)

    principal = alice.create_principal("Pat Payables", "person")
    key = AgentKey.generate()
    agent = alice.register_agent("payables-bot", principal.principal_id, key)
    alice.activate(agent)
    me = agent.identity(key)

    # 1. An Intent above 10,000 waits for two reviewers.
    intent = {"amount": 25000, "currency": "USD", "counterparty": "ACME Corp"}
    pending = alice.submit_intent(me, "vendor_payment", **intent)
    print(f"{pending.outcome} ({pending.reason}) {pending.status}: {pending.decision_id}")

    # 2. The first approval is recorded; the review stays PENDING.
    first = alice.review_decision(pending.decision_id, "approved", "Invoice INV-1042 matches the PO")
    print(f"after alice: {first.status}, approvals: {len(first.raw.get('approvals') or [])}")

    # The same identity cannot approve twice.
    try:
        alice.review_decision(pending.decision_id, "approved", "approving again")
        same_key_refused = ""
    except PermissionDeniedError as err:
        same_key_refused = err.detail
        print(f"alice again: {err}")

    # 3. A second reviewer resolves it. The outcome keeps reading HUMAN_REVIEW.
    resolved = bob.review_decision(pending.decision_id, "approved", "Second approval: vendor verified")
    assert resolved.resolution is not None
    print(f"after bob: {resolved.outcome} {resolved.status}, resolution {resolved.resolution.resolution} by {resolved.resolution.resolved_by}")

    # 4. The approved review gets its one Capability (from-review), verified and consumed as any other.
    cap = alice.issue_capability_from_review(pending.decision_id, "erp-gateway", "payables-bot", ttl_seconds=120)
    verified = alice.verify_capability(cap.token, "erp-gateway", "vendor_payment", "", {"amount": "25000", "currency": "USD", "counterparty": "ACME Corp"})
    print(f"capability {verified.capability_id} consumed for {verified.decision_id}")

    # 5. A single-approval review rejected: no Capability can be issued from it.
    small = alice.submit_intent(me, "vendor_payment", **{**intent, "amount": 2500})
    rejected = bob.review_decision(small.decision_id, "rejected", "Duplicate of INV-1042")
    try:
        alice.issue_capability_from_review(small.decision_id, "erp-gateway", "payables-bot")
        from_rejected = ""
    except ConflictError as err:
        from_rejected = err.detail
    assert rejected.resolution is not None
    print(f"rejected: {rejected.status} {rejected.resolution.resolution}; from-review refused: {from_rejected}")

    print(
        json.dumps(
            {
                "pending": {"outcome": pending.outcome, "reason": pending.reason, "status": pending.status},
                "after_first": {"status": first.status, "approvals": len(first.raw.get("approvals") or [])},
                "same_key_refused": same_key_refused,
                "resolved": {
                    "outcome": resolved.outcome,
                    "status": resolved.status,
                    "resolution": resolved.resolution.resolution,
                    "approvals": len(resolved.raw.get("approvals") or []),
                },
                "capability_consumed": verified.decision_id == pending.decision_id,
                "rejected": {"status": rejected.status, "resolution": rejected.resolution.resolution},
                "from_rejected": from_rejected,
            }
        )
    )
    alice.close()
    bob.close()


if __name__ == "__main__":
    main()
