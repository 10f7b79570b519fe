"""The /v1 resources as typed, read-only records.

Field names are the wire names (snake_case) and enum values the spec's
spellings (``ALLOW``, ``PENDING``, ``registered``); timestamps stay ISO 8601
strings. Each record keeps the whole answer in ``raw`` so that a field added by
a later service version is never lost.
"""

from __future__ import annotations

import math
from decimal import Decimal
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from .keys import AgentKey

__all__ = [
    "Sandbox",
    "Principal",
    "Agent",
    "AgentIdentity",
    "Heartbeat",
    "Resolution",
    "Decision",
    "Capability",
    "CapabilityToken",
    "VerifiedCapability",
    "ApiKey",
    "PolicyVersionRef",
    "GraphVersionRef",
    "GovernanceDocument",
    "Webhook",
    "WebhookAttempt",
    "WebhookDelivery",
    "bound_constraints",
    "js_number",
]

Json = Dict[str, Any]


def _s(raw: Mapping[str, Any], name: str) -> str:
    value = raw.get(name)
    return value if isinstance(value, str) else ""


def _opt(raw: Mapping[str, Any], name: str) -> Optional[str]:
    value = raw.get(name)
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class Sandbox:
    """Answer of ``POST /v1/sandbox/organizations``."""

    organization_id: str
    #: Shown once; kept out of ``repr`` so that logging the answer does not log the key.
    api_key: str = field(repr=False)
    starter_policy_key: str
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_wire(cls, raw: Json) -> "Sandbox":
        return cls(_s(raw, "organization_id"), _s(raw, "api_key"), _s(raw, "starter_policy_key"), raw)


@dataclass(frozen=True)
class Principal:
    principal_id: str
    display_name: str
    kind: str
    external_ref: str
    created_at: Optional[str]
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_wire(cls, raw: Json) -> "Principal":
        return cls(_s(raw, "principal_id"), _s(raw, "display_name"), _s(raw, "kind"), _s(raw, "external_ref"), _opt(raw, "created_at"), raw)


@dataclass(frozen=True)
class AgentIdentity:
    """What an agent signs with: its id, its current certificate and its private key."""

    agent_id: str
    certificate_id: str
    key: AgentKey = field(repr=False)


@dataclass(frozen=True)
class Agent:
    agent_id: str
    certificate_id: str
    name: str
    acting_for_principal_id: str
    public_key: str
    owner: str
    business_unit: str
    environment: str
    #: ``registered``, ``active``, ``suspended``, ``revoked`` or ``retired``.
    state: str
    created_at: Optional[str]
    updated_at: Optional[str]
    last_heartbeat_at: Optional[str]
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_wire(cls, raw: Json) -> "Agent":
        return cls(
            _s(raw, "agent_id"),
            _s(raw, "certificate_id"),
            _s(raw, "name"),
            _s(raw, "acting_for_principal_id"),
            _s(raw, "public_key"),
            _s(raw, "owner"),
            _s(raw, "business_unit"),
            _s(raw, "environment"),
            _s(raw, "state"),
            _opt(raw, "created_at"),
            _opt(raw, "updated_at"),
            _opt(raw, "last_heartbeat_at"),
            raw,
        )

    def identity(self, key: AgentKey) -> AgentIdentity:
        """This agent's signing identity with ``key`` (use the answer of a key rotation after rotating)."""
        return AgentIdentity(self.agent_id, self.certificate_id, key)


@dataclass(frozen=True)
class Heartbeat:
    agent_id: str
    state: str
    last_heartbeat_at: Optional[str]
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_wire(cls, raw: Json) -> "Heartbeat":
        return cls(_s(raw, "agent_id"), _s(raw, "state"), _opt(raw, "last_heartbeat_at"), raw)


@dataclass(frozen=True)
class Resolution:
    #: ``approved`` or ``rejected``.
    resolution: str
    resolved_by: str
    resolved_at: str
    reason: str

    @classmethod
    def from_wire(cls, raw: Json) -> "Resolution":
        return cls(_s(raw, "resolution"), _s(raw, "resolved_by"), _s(raw, "resolved_at"), _s(raw, "reason"))


@dataclass(frozen=True)
class Decision:
    """A decision: submitting an Intent answers the spec's shape, reading it adds the rest."""

    decision_id: str
    #: ``ALLOW``, ``DENY`` or ``HUMAN_REVIEW``.
    outcome: str
    #: Stable machine-readable code, e.g. ``within_delegated_authority``.
    reason: str
    evidence_id: str
    evaluated_at: str
    #: ``PENDING`` or ``RESOLVED`` for HUMAN_REVIEW; None for ALLOW and DENY.
    status: Optional[str]
    resolution: Optional[Resolution]
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_wire(cls, raw: Json) -> "Decision":
        resolution = raw.get("resolution")
        return cls(
            _s(raw, "decision_id"),
            _s(raw, "outcome"),
            _s(raw, "reason"),
            _s(raw, "evidence_id"),
            _s(raw, "evaluated_at"),
            _opt(raw, "status"),
            Resolution.from_wire(resolution) if isinstance(resolution, dict) else None,
            raw,
        )

    @property
    def is_final(self) -> bool:
        """True for ALLOW and DENY, and for a HUMAN_REVIEW once RESOLVED."""
        return self.outcome != "HUMAN_REVIEW" or self.status == "RESOLVED"

    @property
    def approved(self) -> bool:
        """True for ALLOW, and for a HUMAN_REVIEW resolved ``approved``."""
        return self.outcome == "ALLOW" or (self.resolution is not None and self.resolution.resolution == "approved")


@dataclass(frozen=True)
class CapabilityToken:
    """Answer of issuing a Capability; the token is shown only here."""

    token: str = field(repr=False)
    capability_id: str = ""
    expires_at: str = ""
    raw: Json = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_wire(cls, raw: Json) -> "CapabilityToken":
        return cls(_s(raw, "token"), _s(raw, "capability_id"), _s(raw, "expires_at"), raw)


@dataclass(frozen=True)
class Capability:
    """A Capability as stored (``GET /v1/capabilities/{id}``); never its token."""

    capability_id: str
    decision_id: str
    agent_id: str
    #: ``issued``, ``consumed`` or ``expired``.
    state: str
    audience: str
    issued_by: str
    action: str
    resource: str
    constraints: Dict[str, str]
    issued_at: str
    expires_at: str
    #: None until consumed.
    consumed_at: Optional[str]
    #: The lifetime it was issued with, in seconds: ``expires_at - issued_at``.
    ttl_seconds: int
    #: "" when no integration is bound.
    integration_id: str
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_wire(cls, raw: Json) -> "Capability":
        constraints = raw.get("constraints")
        ttl = raw.get("ttl_seconds")
        return cls(
            _s(raw, "capability_id"),
            _s(raw, "decision_id"),
            _s(raw, "agent_id"),
            _s(raw, "state"),
            _s(raw, "audience"),
            _s(raw, "issued_by"),
            _s(raw, "action"),
            _s(raw, "resource"),
            dict(constraints) if isinstance(constraints, dict) else {},
            _s(raw, "issued_at"),
            _s(raw, "expires_at"),
            _opt(raw, "consumed_at"),
            ttl if isinstance(ttl, int) and not isinstance(ttl, bool) else 0,
            _s(raw, "integration_id"),
            raw,
        )


@dataclass(frozen=True)
class VerifiedCapability:
    capability_id: str
    decision_id: str
    resource: str
    constraints: Dict[str, str]
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_wire(cls, raw: Json) -> "VerifiedCapability":
        constraints = raw.get("constraints")
        return cls(
            _s(raw, "capability_id"),
            _s(raw, "decision_id"),
            _s(raw, "resource"),
            dict(constraints) if isinstance(constraints, dict) else {},
            raw,
        )


@dataclass(frozen=True)
class ApiKey:
    key_id: str
    api_key: str = field(repr=False)
    name: str = ""
    permissions: List[str] = field(default_factory=list)
    raw: Json = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_wire(cls, raw: Json) -> "ApiKey":
        return cls(_s(raw, "key_id"), _s(raw, "api_key"), _s(raw, "name"), list(raw.get("permissions") or []), raw)


@dataclass(frozen=True)
class PolicyVersionRef:
    policy_key: str
    version: int
    #: ``draft``, ``in_review``, ``approved``, ``active`` or ``superseded``.
    state: str

    @classmethod
    def from_wire(cls, raw: Json) -> "PolicyVersionRef":
        return cls(_s(raw, "policy_key"), int(raw.get("version") or 0), _s(raw, "state"))


@dataclass(frozen=True)
class GraphWarning:
    """A delegation cycle or a row another row makes irrelevant, at its document (by name) and file line."""

    #: ``delegation_cycle`` or ``shadowed_row``.
    code: str
    message: str
    document: str
    line: int

    @classmethod
    def from_wire(cls, raw: Json) -> "GraphWarning":
        return cls(_s(raw, "code"), _s(raw, "message"), _s(raw, "document"), int(raw.get("line") or 0))


@dataclass(frozen=True)
class GraphVersionRef:
    version: int
    #: ``draft``, ``approved``, ``active`` or ``superseded``.
    state: str
    #: What generation accepted but an author should look at (generate_graph_version only).
    warnings: Tuple[GraphWarning, ...] = ()

    @classmethod
    def from_wire(cls, raw: Json) -> "GraphVersionRef":
        warnings = tuple(GraphWarning.from_wire(w) for w in raw.get("warnings") or [])
        return cls(int(raw.get("version") or 0), _s(raw, "state"), warnings)


@dataclass(frozen=True)
class GraphVersion:
    """A graph version; ``graph`` only when one version is read (get_graph_version)."""

    version: int
    state: str
    author: str
    approver: Optional[str]
    created_at: str
    published_at: Optional[str]
    graph: Optional[Json]

    @classmethod
    def from_wire(cls, raw: Json) -> "GraphVersion":
        return cls(
            int(raw.get("version") or 0),
            _s(raw, "state"),
            _s(raw, "author"),
            raw.get("approver") or None,
            _s(raw, "created_at"),
            raw.get("published_at") or None,
            raw.get("graph"),
        )


@dataclass(frozen=True)
class GovernanceDocument:
    document_id: str
    name: str
    kind: str
    format: str
    #: Data rows, counted at upload.
    rows: int
    author: str

    @classmethod
    def from_wire(cls, raw: Json) -> "GovernanceDocument":
        return cls(_s(raw, "document_id"), _s(raw, "name"), _s(raw, "kind"), _s(raw, "format"), int(raw.get("rows") or 0), _s(raw, "author"))


def js_number(value: Union[int, float]) -> str:
    """``value`` written as JavaScript's ``String(number)`` writes it (``5``, ``12.5``).

    The service binds an Intent's amount in that form; Python's ``str(5.0)``
    would say ``5.0``.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError("expected a number")
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise ValueError("amounts are finite numbers")
        if value.is_integer() and abs(value) < 1e21:
            return str(int(value))
        text = repr(value)  # the shortest round-trip digits, as JavaScript picks them
        if "e" not in text:
            return text
        mantissa, exponent = text.split("e")
        exp = int(exponent)
        if -7 < exp < 21:  # JavaScript writes these positionally (Python switches earlier)
            return format(Decimal(text), "f")
        return f"{mantissa}e{'+' if exp > 0 else '-'}{abs(exp)}"
    return str(value)


def bound_constraints(
    *, amount: Union[int, float, None] = None, currency: Optional[str] = None, counterparty: Optional[str] = None
) -> Dict[str, str]:
    """The constraints a Capability binds when no integration contract applies.

    Whichever of amount, currency and counterparty the Intent carried, the
    amount in JavaScript's number form: what ``verify_capability`` must be given.
    """
    out: Dict[str, str] = {}
    if amount is not None:
        out["amount"] = js_number(amount)
    if currency is not None:
        out["currency"] = currency
    if counterparty is not None:
        out["counterparty"] = counterparty
    return out


@dataclass(frozen=True)
class Webhook:
    """A webhook subscription (early access); ``secret`` (``whsec_...``) only in the answers of create and rotate."""

    webhook_id: str
    url: str
    #: Event names delivered; all when empty.
    events: List[str]
    description: str
    #: ``active`` or ``failing``.
    state: str
    secret: Optional[str] = field(repr=False)
    created_at: str
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_wire(cls, raw: Json) -> "Webhook":
        return cls(_s(raw, "webhook_id"), _s(raw, "url"), list(raw.get("events") or []), _s(raw, "description"), _s(raw, "state"), _opt(raw, "secret") or None, _s(raw, "created_at"), raw)


@dataclass(frozen=True)
class WebhookAttempt:
    attempted_at: str
    #: The receiver's HTTP status; 0 when none (timeout, refused connection).
    status: int
    latency_ms: int
    error: str

    @classmethod
    def from_wire(cls, raw: Json) -> "WebhookAttempt":
        return cls(_s(raw, "attempted_at"), int(raw.get("status") or 0), int(raw.get("latency_ms") or 0), _s(raw, "error"))


@dataclass(frozen=True)
class WebhookDelivery:
    """An event's delivery to one webhook; ``delivery_id`` is also every attempt's ``webhook-id`` header."""

    delivery_id: str
    webhook_id: str
    event_id: str
    event: str
    #: ``pending``, ``delivered`` or ``failed``.
    state: str
    attempts: List[WebhookAttempt]
    raw: Json = field(repr=False, compare=False)

    @classmethod
    def from_wire(cls, raw: Json) -> "WebhookDelivery":
        attempts = [WebhookAttempt.from_wire(a) for a in raw.get("attempts") or [] if isinstance(a, dict)]
        return cls(_s(raw, "delivery_id"), _s(raw, "webhook_id"), _s(raw, "event_id"), _s(raw, "event"), _s(raw, "state"), attempts, raw)
