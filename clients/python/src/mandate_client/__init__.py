"""Mandate's synchronous Python client.

Generates Ed25519 agent keys locally, registers agents (idempotently per key),
signs Intents and sets the certificate headers, polls HUMAN_REVIEW decisions,
issues and verifies Capabilities, drives the agent lifecycle, retries what is
safe to retry and raises a typed exception per failure class. Events (early
access): ``watch_events`` (the resumable stream), webhook subscriptions and
``verify_webhook`` for receivers.

    from mandate_client import AgentKey, MandateClient

    with MandateClient("http://127.0.0.1:8080") as anonymous:
        sandbox = anonymous.create_sandbox("dev@example.com")
    client = MandateClient("http://127.0.0.1:8080", api_key=sandbox.api_key)
    principal = client.create_principal("Accounts Payable", "role")
    key = AgentKey.load_or_create("agent.pem")
    agent = client.register_agent("payables-bot", principal.principal_id, key)
    client.activate(agent)
    decision = client.submit_intent(agent.identity(key), "reference_noop")
"""

from .client import DEFAULT_BACKOFF_BASE, DEFAULT_BACKOFF_CAP, DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT, MAX_RETRIES_LIMIT, MandateClient
from .errors import (
    ApiError,
    AuthenticationError,
    ConflictError,
    GoneError,
    MandateError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RateLimitedError,
    ResolutionTimeoutError,
    ServerError,
    TransportError,
    ValidationError,
    WebhookVerificationError,
)
from .events import EVENT_NAMES, WEBHOOK_TOLERANCE_SECONDS, EventEnvelope, verify_webhook
from .keys import AgentKey
from .models import (
    Agent,
    AgentIdentity,
    ApiKey,
    Capability,
    CapabilityToken,
    Decision,
    GovernanceDocument,
    GraphVersion,
    GraphVersionRef,
    GraphWarning,
    Heartbeat,
    PolicyVersionRef,
    Principal,
    Resolution,
    Sandbox,
    VerifiedCapability,
    Webhook,
    WebhookAttempt,
    WebhookDelivery,
    bound_constraints,
    js_number,
)

__version__ = "0.1.0"

__all__ = [
    "MandateClient",
    "AgentKey",
    "AgentIdentity",
    "Agent",
    "ApiKey",
    "Capability",
    "CapabilityToken",
    "Decision",
    "GovernanceDocument",
    "GraphVersion",
    "GraphVersionRef",
    "GraphWarning",
    "Heartbeat",
    "PolicyVersionRef",
    "Principal",
    "Resolution",
    "Sandbox",
    "VerifiedCapability",
    "Webhook",
    "WebhookAttempt",
    "WebhookDelivery",
    "EventEnvelope",
    "EVENT_NAMES",
    "WEBHOOK_TOLERANCE_SECONDS",
    "verify_webhook",
    "bound_constraints",
    "js_number",
    "MandateError",
    "ApiError",
    "AuthenticationError",
    "PermissionDeniedError",
    "NotFoundError",
    "ConflictError",
    "GoneError",
    "PayloadTooLargeError",
    "ValidationError",
    "RateLimitedError",
    "ServerError",
    "TransportError",
    "ResolutionTimeoutError",
    "WebhookVerificationError",
    "MAX_RETRIES_LIMIT",
    "DEFAULT_TIMEOUT",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_BACKOFF_BASE",
    "DEFAULT_BACKOFF_CAP",
]
