"""Mandate over plain gRPC from Python, with stubs generated from proto/ alone.

No Mandate client library: grpcio, the stubs grpcio-tools generates from
proto/mandate/v1/*.proto (plus google/api/{annotations,http,field_behavior}.proto,
vendored in proto/, and google/rpc/status.proto for the error details), and
`cryptography` for the agent's Ed25519 key.

Generate the stubs, then run (MANDATE_BASE_URL is the service's URL; gRPC is
served on the same port, h2c):

    python -m grpc_tools.protoc -I proto -I node_modules/google-proto-files \
        --python_out=/tmp/stubs --grpc_python_out=/tmp/stubs \
        proto/mandate/v1/*.proto google/api/annotations.proto google/api/http.proto \
        google/api/field_behavior.proto google/rpc/status.proto
    PYTHONPATH=/tmp/stubs MANDATE_BASE_URL=http://127.0.0.1:8080 python examples/grpc/python/submit_and_verify.py

It creates a sandbox organization, registers and activates an agent, submits
a signed Intent (the exact JSON bytes in `SubmitIntentRequest.intent`, the key
id and signature in metadata), issues a Capability, verifies it, and shows
that a replay and a tampered signature fail with a mandate.v1.ErrorDetail.
Prints one JSON object with what happened.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import uuid
from datetime import datetime, timezone
from typing import Any, Dict, Tuple
from urllib.parse import urlparse

import grpc
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from google.rpc import status_pb2

from mandate.v1 import (
    agents_pb2,
    agents_pb2_grpc,
    capabilities_pb2,
    capabilities_pb2_grpc,
    decisions_pb2,
    errors_pb2,
    intents_pb2,
    intents_pb2_grpc,
    organizations_pb2,
    organizations_pb2_grpc,
    principals_pb2,
    principals_pb2_grpc,
)


def error_detail(err: grpc.RpcError) -> Tuple[str, str]:
    """The gRPC code name and the mandate.v1.ErrorDetail `detail` of a failed call."""
    detail = ""
    for key, value in err.trailing_metadata() or ():  # type: ignore[attr-defined]
        if key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
            for any_detail in status.details:
                d = errors_pb2.ErrorDetail()
                if any_detail.Unpack(d):
                    detail = d.detail
    return err.code().name, detail  # type: ignore[attr-defined]


def main() -> int:
    url = urlparse(os.environ.get("MANDATE_BASE_URL", "http://127.0.0.1:8080"))
    channel = grpc.insecure_channel(f"{url.hostname}:{url.port or 80}")
    out: Dict[str, Any] = {}

    sandbox = organizations_pb2_grpc.SandboxServiceStub(channel).CreateSandboxOrganization(
        organizations_pb2.CreateSandboxOrganizationRequest(email=f"grpc-{uuid.uuid4().hex[:10]}@example.com")
    )
    bearer = (("authorization", f"Bearer {sandbox.api_key}"),)
    principal = principals_pb2_grpc.PrincipalServiceStub(channel).CreatePrincipal(
        principals_pb2.CreatePrincipalRequest(display_name="Accounts Payable", kind=principals_pb2.PRINCIPAL_KIND_ROLE),
        metadata=bearer,
    )

    # The agent's key never leaves this process; only the public key is registered.
    key = Ed25519PrivateKey.generate()
    raw_public = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    agents = agents_pb2_grpc.AgentServiceStub(channel)
    agent = agents.RegisterAgent(
        agents_pb2.RegisterAgentRequest(
            name="grpc-python-agent",
            acting_for_principal_id=principal.principal_id,
            public_key="ed25519:base64:" + base64.b64encode(raw_public).decode(),
        ),
        metadata=bearer,
    )
    agent = agents.ActivateAgent(agents_pb2.TransitionAgentRequest(agent_id=agent.agent_id), metadata=bearer)
    out["agent_state"] = agents_pb2.AgentState.Name(agent.state)

    # The signed bytes are the exact JSON Intent document.
    intent = json.dumps(
        {
            "agent_id": agent.agent_id,
            "action": "reference_noop",
            "amount": 42,
            "currency": "USD",
            "requested_at": datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "nonce": str(uuid.uuid4()),
        }
    ).encode()
    signature = base64.b64encode(key.sign(intent)).decode()
    intents = intents_pb2_grpc.IntentServiceStub(channel)
    decision = intents.SubmitIntent(
        intents_pb2.SubmitIntentRequest(intent=intent),
        metadata=(("x-service-key-id", agent.certificate_id), ("x-service-signature", signature)),
    )
    out["outcome"] = decisions_pb2.Outcome.Name(decision.outcome)
    out["reason"] = decision.reason
    out["decision_id"] = decision.decision_id
    out["evidence_id"] = decision.evidence_id

    capabilities = capabilities_pb2_grpc.CapabilityServiceStub(channel)
    issued = capabilities.IssueCapability(
        capabilities_pb2.IssueCapabilityRequest(decision_id=decision.decision_id, audience="erp", issued_by="grpc-python", ttl_seconds=60),
        metadata=bearer,
    )
    verify = capabilities_pb2.VerifyCapabilityRequest(
        token=issued.token, audience="erp", action="reference_noop", resource="", constraints={"amount": "42", "currency": "USD"}
    )
    verified = capabilities.VerifyCapability(verify, metadata=bearer)
    out["verified_capability_id"] = verified.capability_id
    out["capability_id"] = issued.capability_id
    out["verified_decision_id"] = verified.decision_id
    out["verified_constraints"] = dict(verified.constraints)
    try:
        capabilities.VerifyCapability(verify, metadata=bearer)
        out["replay"] = ["OK", ""]
    except grpc.RpcError as err:
        out["replay"] = list(error_detail(err))

    tampered = intent.replace(b"reference_noop", b"reference_nop!")
    try:
        intents.SubmitIntent(
            intents_pb2.SubmitIntentRequest(intent=tampered),
            metadata=(("x-service-key-id", agent.certificate_id), ("x-service-signature", signature)),
        )
        out["tampered"] = ["OK", ""]
    except grpc.RpcError as err:
        out["tampered"] = list(error_detail(err))

    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
