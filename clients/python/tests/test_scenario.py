"""Issue 8's scenario suite against a live service (the TypeScript client runs the same one).

sandbox -> register twice (same identity) -> activate -> ALLOW -> capability ->
verify -> replay rejected; HUMAN_REVIEW -> poll while a reviewer approves ->
from-review capability; a tampered signature is a typed error sent once.
"""

from __future__ import annotations

import os
import re
import stat
import time
import uuid
from pathlib import Path
from typing import Callable, List, Tuple, Type

import pytest

from conftest import ActiveAgent, CountingTransport, Org, unique_email
from mandate_client import (
    AgentIdentity,
    AgentKey,
    AuthenticationError,
    ConflictError,
    MandateClient,
    MandateError,
    NotFoundError,
    PermissionDeniedError,
    ResolutionTimeoutError,
    ValidationError,
    bound_constraints,
)

WIRE_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


def test_sandbox_register_twice_activate_allow_capability_verify_replay(base_url: str, tmp_path: Path) -> None:
    with MandateClient(base_url) as anonymous:
        sandbox = anonymous.create_sandbox(unique_email("scenario"))
    assert sandbox.starter_policy_key == "starter"
    assert sandbox.organization_id
    with MandateClient(base_url, api_key=sandbox.api_key) as client:
        principal = client.create_principal("Pat Payables", "person", external_ref="pat")

        # Generated locally, kept in a 0600 file; only the public key is uploaded.
        key_file = tmp_path / "agent.pem"
        key = AgentKey.load_or_create(key_file)
        assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
        first = client.register_agent("payables-bot", principal.principal_id, key, environment="sandbox")
        assert first.state == "registered"
        assert first.public_key == key.public_key
        assert first.environment == "sandbox"

        # The same private key, read back from its file, registers as the same identity.
        again = client.register_agent("payables-bot", principal.principal_id, AgentKey.load_or_create(key_file))
        assert (again.agent_id, again.certificate_id) == (first.agent_id, first.certificate_id)

        assert client.activate(first, reason="go live").state == "active"
        me = first.identity(key)

        decision = client.submit_intent(me, "reference_noop", amount=12.5, currency="EUR", counterparty="ACME Corp")
        assert (decision.outcome, decision.reason, decision.status) == ("ALLOW", "starter_reference_action", None)
        assert sorted(decision.raw) == ["decision_id", "evaluated_at", "evidence_id", "outcome", "reason"]
        assert WIRE_TIMESTAMP.match(decision.evaluated_at)

        cap = client.issue_capability(decision.decision_id, audience="erp-gateway", issued_by="payables-bot", ttl_seconds=120)
        assert len(cap.token.split(".")) == 3
        constraints = bound_constraints(amount=12.5, currency="EUR", counterparty="ACME Corp")
        assert constraints == {"amount": "12.5", "currency": "EUR", "counterparty": "ACME Corp"}

        # A changed bound constraint is a 409 that leaves the token unconsumed...
        with pytest.raises(ConflictError) as mismatch:
            client.verify_capability(cap.token, "erp-gateway", "reference_noop", "", {**constraints, "amount": "125"})
        assert mismatch.value.detail == "capability_constraint_mismatch"

        # ...so the right one verifies, exactly once.
        verified = client.verify_capability(cap.token, "erp-gateway", "reference_noop", "", constraints)
        assert (verified.capability_id, verified.decision_id, verified.resource, verified.constraints) == (
            cap.capability_id,
            decision.decision_id,
            "",
            constraints,
        )
        with pytest.raises(ConflictError) as replay:
            client.verify_capability(cap.token, "erp-gateway", "reference_noop", "", constraints)
        assert (replay.value.status, replay.value.detail) == (409, "capability_consumed")
        assert replay.value.request_id

        # The Capability as stored: consumed, with the lifetime it was issued with; never its token.
        stored = client.get_capability(cap.capability_id)
        assert (stored.capability_id, stored.decision_id, stored.agent_id, stored.state) == (cap.capability_id, decision.decision_id, first.agent_id, "consumed")
        assert (stored.audience, stored.issued_by, stored.constraints, stored.expires_at, stored.ttl_seconds) == ("erp-gateway", "payables-bot", constraints, cap.expires_at, 120)
        assert WIRE_TIMESTAMP.match(stored.issued_at) and WIRE_TIMESTAMP.match(stored.consumed_at or "")
        assert cap.token not in str(stored.raw)

        # Same nonce, same bytes: the same decision (what makes a retried Intent safe).
        nonce, at = str(uuid.uuid4()), time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
        once = client.submit_intent(me, "reference_noop", nonce=nonce, requested_at=at)
        twice = client.submit_intent(me, "reference_noop", nonce=nonce, requested_at=at)
        assert once.decision_id == twice.decision_id


def test_human_review_poll_while_a_reviewer_approves_then_from_review_capability(org: Org, active: ActiveAgent) -> None:
    client = org.client
    decision = client.submit_intent(active.identity, "wire_transfer", resource="account:DE89-3704", context={"ticket": "FIN-7"})
    assert (decision.outcome, decision.reason, decision.status) == ("HUMAN_REVIEW", "unrecognized_action", "PENDING")

    # The reviewer approves, with a client of its own, exactly when the poller has seen the
    # decision PENDING and is about to wait: the next poll must find it resolved.
    waits: list[float] = []

    def approve_on_first_wait(seconds: float) -> None:
        if not waits:
            with MandateClient(client.base_url, api_key=org.sandbox.api_key) as reviewer:
                reviewer.review_decision(decision.decision_id, "approved", "Checked with treasury.")
        waits.append(seconds)

    with MandateClient(client.base_url, api_key=org.sandbox.api_key, sleep=approve_on_first_wait) as poller:
        # stream=False keeps this the polling path; the stream's is tested in test_events.py.
        final = poller.wait_for_resolution(decision.decision_id, timeout=20, interval=0.1, agent=active.identity, stream=False)
    assert waits == [0.1]  # one poll saw it PENDING, the next RESOLVED
    assert final.outcome == "HUMAN_REVIEW"  # never rewritten to ALLOW
    assert final.status == "RESOLVED"
    assert final.resolution is not None and final.resolution.resolution == "approved"
    assert final.resolution.reason == "Checked with treasury."
    assert final.approved and final.is_final

    with pytest.raises(ConflictError):
        client.issue_capability(decision.decision_id, "bank", "ops")
    cap = client.issue_capability_from_review(decision.decision_id, "bank", "ops")
    verified = client.verify_capability(cap.token, "bank", "wire_transfer", "account:DE89-3704", {})
    assert verified.decision_id == decision.decision_id
    assert verified.resource == "account:DE89-3704"


def test_wait_for_resolution_times_out_while_pending(org: Org, active: ActiveAgent) -> None:
    decision = org.client.submit_intent(active.identity, "open_account")
    for stream in (False, True):
        with pytest.raises(ResolutionTimeoutError) as err:
            org.client.wait_for_resolution(decision.decision_id, timeout=0.3, interval=0.05, stream=stream)
        assert err.value.detail == "resolution_timeout"
        assert isinstance(err.value, MandateError) and isinstance(err.value, TimeoutError)


def test_tampered_signature_is_an_authentication_error_sent_once(base_url: str, org: Org, active: ActiveAgent) -> None:
    transport = CountingTransport()
    with MandateClient(base_url, api_key=org.sandbox.api_key, transport=transport, max_retries=6, backoff_base=0.01) as client:
        impostor = AgentIdentity(active.agent.agent_id, active.agent.certificate_id, AgentKey.generate())
        with pytest.raises(AuthenticationError) as err:
            client.submit_intent(impostor, "reference_noop")
        assert (err.value.status, err.value.detail) == (401, "signature_invalid")
        assert err.value.request_id and err.value.message
        assert transport.calls == ["POST /v1/intents"]

        transport.calls.clear()
        with pytest.raises(AuthenticationError) as unknown:
            client.submit_intent(AgentIdentity(active.agent.agent_id, "crt_unknown", active.key), "reference_noop")
        assert unknown.value.detail == "unknown_key"
        assert transport.calls == ["POST /v1/intents"]


def test_4xx_answers_map_to_their_classes_after_one_request(base_url: str, org: Org, active: ActiveAgent) -> None:
    client, transport = org.client, org.transport
    idle_key = AgentKey.generate()
    idle = client.register_agent("idle", org.principal.principal_id, idle_key)
    cases: List[Tuple[Callable[[], object], Type[MandateError], int, str]] = [
        (lambda: MandateClient(base_url, transport=transport).create_principal("x", "person"), AuthenticationError, 401, "missing_credentials"),
        (lambda: client.submit_intent(idle.identity(idle_key), "reference_noop"), PermissionDeniedError, 403, "agent_not_active"),
        (lambda: client.get_decision("dec_missing"), NotFoundError, 404, "not_found"),
        (lambda: client.activate(active.agent), ConflictError, 409, "invalid_transition"),
        (lambda: client.create_principal("x", "robot"), ValidationError, 422, "validation_failed"),
    ]
    for call, cls, status, detail in cases:
        transport.calls.clear()
        with pytest.raises(cls) as err:
            call()
        assert (err.value.status, err.value.detail) == (status, detail)
        assert len(transport.calls) == 1, (detail, transport.calls)
    with pytest.raises(ValidationError) as invalid:
        client.create_principal("x", "robot")
    assert "kind" in [e["field"] for e in invalid.value.errors]


def test_lifecycle_heartbeat_suspend_reactivate_rotate_revoke_retire(org: Org, active: ActiveAgent) -> None:
    client, agent = org.client, active.agent
    beat = client.heartbeat(active.identity)
    assert (beat.agent_id, beat.state) == (agent.agent_id, "active")

    assert client.suspend(agent, reason="investigating").state == "suspended"
    held = client.submit_intent(active.identity, "reference_noop")
    assert (held.outcome, held.reason, held.status) == ("HUMAN_REVIEW", "agent_suspended", "PENDING")
    assert client.reactivate(agent).state == "active"

    new_key = AgentKey.generate()
    rotated = client.rotate_key(agent, new_key)
    assert rotated.certificate_id != agent.certificate_id
    assert rotated.public_key == new_key.public_key
    with pytest.raises(AuthenticationError) as old:
        client.submit_intent(active.identity, "reference_noop")
    assert old.value.detail == "unknown_key"
    current = rotated.identity(new_key)
    decision = client.submit_intent(current, "reference_noop")
    assert decision.outcome == "ALLOW"
    assert client.get_decision(decision.decision_id, agent=current).decision_id == decision.decision_id

    assert client.revoke(agent, reason="key leaked").state == "revoked"
    with pytest.raises(PermissionDeniedError) as revoked:
        client.submit_intent(current, "reference_noop")
    assert revoked.value.detail == "agent_revoked"

    other = client.register_agent("old", org.principal.principal_id, AgentKey.generate())
    assert client.retire(other).state == "retired"
    with pytest.raises(ConflictError):
        client.activate(other)


def test_operator_key_naming_its_organization(base_url: str, org: Org) -> None:
    operator_key = os.environ.get("MANDATE_OPERATOR_KEY")
    if not operator_key:
        pytest.skip("MANDATE_OPERATOR_KEY is not set")
    with MandateClient(base_url, operator_key=operator_key, organization_id=org.sandbox.organization_id) as operator:
        principal = operator.create_principal("Ops", "service")
        key = AgentKey.generate()
        agent = operator.register_agent("ops-bot", principal.principal_id, key)
        assert operator.activate(agent).state == "active"
        assert org.client.get_agent(agent.agent_id).acting_for_principal_id == principal.principal_id
    with MandateClient(base_url, operator_key=operator_key) as unnamed:
        with pytest.raises(AuthenticationError) as err:
            unnamed.create_principal("x", "person")
        assert err.value.detail == "missing_credentials"


def test_governance_documents_and_graph_versions(org: Org) -> None:
    """Documents are parsed at upload (a bad one is a ValidationError at its line), named and
    deletable; a graph version is approved by a second key before it is published, and every
    version stays readable."""
    client = org.client
    with pytest.raises(ValidationError) as refused:
        client.upload_governance_document("matrix.csv", "approval_matrix", "csv", "action,currency,up_to_amount,approvals_required\nvendor_payment,USD,lots,0\n")
    assert refused.value.status == 422
    doc = client.upload_governance_document("schedule.csv", "signing_schedule", "csv", "principal,role,reports_to\n,clerk,controller\n,controller,\n")
    assert (doc.name, doc.kind, doc.rows) == ("schedule.csv", "signing_schedule", 2)
    with pytest.raises(ConflictError):
        client.upload_governance_document("schedule.csv", "signing_schedule", "csv", "principal,role,reports_to\n,clerk,\n")
    assert [d.document_id for d in client.list_governance_documents()] == [doc.document_id]

    draft = client.generate_graph_version()
    assert (draft.state, draft.warnings) == ("draft", ())
    with pytest.raises(PermissionDeniedError):
        client.approve_graph_version(draft.version)
    approver = client.with_api_key(client.create_api_key("approver", ["POLICY_APPROVER"]).api_key)
    assert approver.approve_graph_version(draft.version).state == "approved"
    assert approver.publish_graph_version(draft.version).state == "active"

    client.delete_governance_document(doc.document_id)
    assert client.list_governance_documents() == []
    [listed] = client.list_graph_versions()
    assert (listed.version, listed.state, listed.graph) == (draft.version, "active", None)
    assert WIRE_TIMESTAMP.match(listed.published_at or "")
    read = client.get_graph_version(draft.version)
    assert read.approver and read.approver != read.author
    assert [r["role"] for r in (read.graph or {})["roles"]] == ["clerk", "controller"]
    with pytest.raises(NotFoundError):
        client.get_graph_version(draft.version + 1)
