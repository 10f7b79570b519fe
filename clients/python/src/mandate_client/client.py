"""The synchronous Python client of Mandate's /v1 JSON API.

Retries
    Connection failures, timeouts and 5xx answers are retried up to
    ``max_retries`` times (default 4, never more than :data:`MAX_RETRIES_LIMIT`
    = 10), sleeping a random time in ``[0, min(backoff_cap, backoff_base * 2**n)]``
    before retry ``n`` ("full jitter"; defaults 0.25 s base, 5 s cap, so with the
    defaults a call gives up after at most about 1 + 4 x 5 s of sleeping plus
    the attempts' own timeouts). A 4xx answer (401, 403, 404, 409, 422, 429, ...)
    is never retried.

Idempotency
    A retried Intent resends the exact bytes that were signed: its nonce makes
    it idempotent, so the service answers the original decision. Registering
    an agent is idempotent per key. Lifecycle transitions and capability issue
    or verify are not: a retry after a lost answer can surface as a 409
    (``invalid_transition``, ``capability_already_issued``,
    ``capability_consumed``), which fails safe.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import random
import threading
import time
import uuid
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple, Union
from urllib.parse import quote

import httpx

from .errors import ApiError, MandateError, ResolutionTimeoutError, ServerError, TransportError, error_from_response
from .events import EventEnvelope, SseParser
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
    Heartbeat,
    PolicyVersionRef,
    Principal,
    Sandbox,
    VerifiedCapability,
    Webhook,
    WebhookDelivery,
)

__all__ = ["MandateClient", "MAX_RETRIES_LIMIT", "DEFAULT_TIMEOUT", "DEFAULT_MAX_RETRIES", "DEFAULT_BACKOFF_BASE", "DEFAULT_BACKOFF_CAP"]

#: Hard upper bound on ``max_retries``, whatever the caller asks for.
MAX_RETRIES_LIMIT = 10
DEFAULT_TIMEOUT = 10.0
DEFAULT_MAX_RETRIES = 4
DEFAULT_BACKOFF_BASE = 0.25
DEFAULT_BACKOFF_CAP = 5.0

#: Retries are logged here at DEBUG (``logging.getLogger("mandate").setLevel(logging.DEBUG)``).
logger = logging.getLogger("mandate")

AgentRef = Union[str, Agent, AgentIdentity]
_Headers = Dict[str, str]


def _agent_id(agent: AgentRef) -> str:
    return agent if isinstance(agent, str) else agent.agent_id


def _now_iso() -> str:
    """Now, ISO 8601 UTC with milliseconds (the wire form)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _seg(value: str) -> str:
    """A path segment, percent-encoded."""
    return quote(value, safe="")


class MandateClient:
    """A synchronous client of one Mandate service.

    Authenticates administrative calls with ``api_key`` (``Authorization:
    Bearer``) or, for platform-internal use, ``operator_key`` naming
    ``organization_id``. Intents and heartbeats are signed by the agent's own
    key and carry no administrative credential. Every failure is a
    :class:`~mandate_client.errors.MandateError` subclass.

    Use it as a context manager, or call :meth:`close`.
    """

    def __init__(
        self,
        base_url: Optional[str] = None,
        api_key: Optional[str] = None,
        operator_key: Optional[str] = None,
        organization_id: Optional[str] = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        backoff_base: float = DEFAULT_BACKOFF_BASE,
        backoff_cap: float = DEFAULT_BACKOFF_CAP,
        transport: Optional[httpx.BaseTransport] = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """
        :param base_url: e.g. ``http://127.0.0.1:8080`` (the ``/v1`` prefix is the client's);
            default ``MANDATE_BASE_URL``, else ``http://127.0.0.1:8080``.
        :param api_key: default ``MANDATE_API_KEY`` (only when no ``operator_key`` is given).
        :param timeout: seconds per attempt (connect, read, write, pool); the calls that take a
            ``timeout`` argument override it for that call.
        :param max_retries: retries after the first attempt, clamped to 0..10.
        :param backoff_base: seconds; retry ``n`` sleeps up to ``backoff_base * 2**n``...
        :param backoff_cap: ...but never more than this many seconds.
        :param transport: an httpx transport (tests count requests with one).
        :param sleep: how to wait between retries and polls.
        """
        self.base_url = (base_url or os.environ.get("MANDATE_BASE_URL") or "http://127.0.0.1:8080").rstrip("/")
        # An explicit operator key means platform-internal use: the environment's API key
        # would otherwise take precedence over it in _org_headers.
        self.api_key = api_key if api_key is not None or operator_key else (os.environ.get("MANDATE_API_KEY") or None)
        self.operator_key = operator_key
        self.organization_id = organization_id
        self.timeout = timeout
        self.max_retries = max(0, min(MAX_RETRIES_LIMIT, int(max_retries)))
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self._transport = transport
        self._sleep = sleep
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, transport=transport, headers={"user-agent": "mandate-client-python/0.1"})

    def __enter__(self) -> "MandateClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        # Never the keys themselves: a client logged or printed in a traceback must not leak them.
        auth = "api_key=***" if self.api_key else ("operator_key=***" if self.operator_key else "no credentials")
        return f"MandateClient({self.base_url!r}, {auth})"

    def close(self) -> None:
        self._http.close()

    def with_api_key(self, api_key: str) -> "MandateClient":
        """A new client of the same service authenticating with ``api_key`` (e.g. a sandbox's)."""
        return MandateClient(
            self.base_url,
            api_key=api_key,
            timeout=self.timeout,
            max_retries=self.max_retries,
            backoff_base=self.backoff_base,
            backoff_cap=self.backoff_cap,
            transport=self._transport,
            sleep=self._sleep,
        )

    # --- organizations, keys, principals ---------------------------------

    def create_sandbox(self, email: str, *, timeout: Optional[float] = None) -> Sandbox:
        """Creates a sandbox organization (no authentication). Continue with :meth:`with_api_key`."""
        return Sandbox.from_wire(self.request("POST", "/v1/sandbox/organizations", json_body={"email": email}, auth="none", timeout=timeout))

    def create_api_key(self, name: str, permissions: Iterable[str], *, timeout: Optional[float] = None) -> ApiKey:
        """Creates a scoped API key of the caller's organization; the secret is in this answer only."""
        return ApiKey.from_wire(self.request("POST", "/v1/organization/api-keys", json_body={"name": name, "permissions": list(permissions)}, timeout=timeout))

    def create_principal(self, display_name: str, kind: str, external_ref: Optional[str] = None, *, timeout: Optional[float] = None) -> Principal:
        """Creates a principal: ``kind`` is ``person``, ``role``, ``org_unit`` or ``service``."""
        body: Dict[str, Any] = {"display_name": display_name, "kind": kind}
        if external_ref is not None:
            body["external_ref"] = external_ref
        return Principal.from_wire(self.request("POST", "/v1/principals", json_body=body, timeout=timeout))

    def get_principal(self, principal_id: str, *, timeout: Optional[float] = None) -> Principal:
        return Principal.from_wire(self.request("GET", f"/v1/principals/{_seg(principal_id)}", timeout=timeout))

    # --- agents -------------------------------------------------------------

    def register_agent(
        self,
        name: str,
        principal_id: str,
        key: AgentKey,
        *,
        owner: Optional[str] = None,
        business_unit: Optional[str] = None,
        environment: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> Agent:
        """Registers an agent acting for ``principal_id`` with ``key``'s public key.

        Only the public key is uploaded. Idempotent per key: registering the
        same key again in the same organization with the same name, principal
        and labels answers the same agent (state ``registered`` until
        :meth:`activate`); other ones raise ``ConflictError`` (``already_exists``).
        """
        body: Dict[str, Any] = {"name": name, "acting_for_principal_id": principal_id, "public_key": key.public_key}
        for field, value in (("owner", owner), ("business_unit", business_unit), ("environment", environment)):
            if value is not None:
                body[field] = value
        return Agent.from_wire(self.request("POST", "/v1/agents", json_body=body, timeout=timeout))

    def get_agent(self, agent: AgentRef, *, timeout: Optional[float] = None) -> Agent:
        return Agent.from_wire(self.request("GET", f"/v1/agents/{_seg(_agent_id(agent))}", timeout=timeout))

    def activate(self, agent: AgentRef, reason: Optional[str] = None, *, timeout: Optional[float] = None) -> Agent:
        """registered -> active."""
        return self._transition(agent, "activate", reason, timeout)

    def suspend(self, agent: AgentRef, reason: Optional[str] = None, *, timeout: Optional[float] = None) -> Agent:
        """active -> suspended: its Intents go to human review until reactivated."""
        return self._transition(agent, "suspend", reason, timeout)

    def reactivate(self, agent: AgentRef, reason: Optional[str] = None, *, timeout: Optional[float] = None) -> Agent:
        """suspended -> active."""
        return self._transition(agent, "reactivate", reason, timeout)

    def revoke(self, agent: AgentRef, reason: Optional[str] = None, *, timeout: Optional[float] = None) -> Agent:
        """-> revoked (terminal); for a compromised key, from any non-terminal state."""
        return self._transition(agent, "revoke", reason, timeout)

    def retire(self, agent: AgentRef, reason: Optional[str] = None, *, timeout: Optional[float] = None) -> Agent:
        """-> retired (terminal)."""
        return self._transition(agent, "retire", reason, timeout)

    def rotate_key(self, agent: AgentRef, new_key: AgentKey, *, timeout: Optional[float] = None) -> Agent:
        """Replaces the agent's key. The answer carries the new ``certificate_id``; the old one stops verifying at once."""
        return Agent.from_wire(self.request("POST", f"/v1/agents/{_seg(_agent_id(agent))}/rotate-key", json_body={"public_key": new_key.public_key}, timeout=timeout))

    def heartbeat(self, agent: AgentIdentity, *, timeout: Optional[float] = None) -> Heartbeat:
        """Sends an agent-signed liveness signal (accepted while the agent is active)."""
        body = _json_bytes({"agent_id": agent.agent_id, "sent_at": _now_iso(), "nonce": str(uuid.uuid4())})
        headers = _body_signature(agent, body)
        raw = self.request("POST", f"/v1/agents/{_seg(agent.agent_id)}/heartbeat", content=body, auth=lambda: headers, timeout=timeout)
        return Heartbeat.from_wire(raw)

    def _transition(self, agent: AgentRef, op: str, reason: Optional[str], timeout: Optional[float]) -> Agent:
        body = {} if reason is None else {"reason": reason}
        return Agent.from_wire(self.request("POST", f"/v1/agents/{_seg(_agent_id(agent))}/{op}", json_body=body, timeout=timeout))

    # --- intents and decisions ------------------------------------------

    def submit_intent(
        self,
        agent: AgentIdentity,
        action: str,
        *,
        amount: Union[int, float, None] = None,
        currency: Optional[str] = None,
        counterparty: Optional[str] = None,
        resource: Optional[str] = None,
        context: Optional[Mapping[str, Any]] = None,
        nonce: Optional[str] = None,
        requested_at: Optional[Union[datetime, str]] = None,
        timeout: Optional[float] = None,
    ) -> Decision:
        """Signs and submits an Intent; answers its Decision.

        ALLOW, DENY and HUMAN_REVIEW all return (a decision is data); an
        exception means evaluation did not complete. The body is serialised
        and signed once, so every retry sends the same bytes and the nonce
        (a fresh UUID unless given) makes the retry idempotent.
        """
        doc: Dict[str, Any] = {"agent_id": agent.agent_id, "action": action}
        for name, value in (("amount", amount), ("currency", currency), ("counterparty", counterparty), ("resource", resource)):
            if value is not None:
                doc[name] = value
        if context is not None:
            doc["context"] = dict(context)
        if requested_at is None:
            doc["requested_at"] = _now_iso()
        elif isinstance(requested_at, datetime):
            doc["requested_at"] = requested_at.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        else:
            doc["requested_at"] = requested_at
        doc["nonce"] = nonce or str(uuid.uuid4())
        body = _json_bytes(doc)
        headers = _body_signature(agent, body)
        return Decision.from_wire(self.request("POST", "/v1/intents", content=body, auth=lambda: headers, timeout=timeout))

    def get_decision(self, decision_id: str, *, agent: Optional[AgentIdentity] = None, timeout: Optional[float] = None) -> Decision:
        """Reads a decision with the client's credentials or, given ``agent``, as that agent (its own decisions only)."""
        return self._get_decision(decision_id, agent, timeout, None)

    def _get_decision(self, decision_id: str, agent: Optional[AgentIdentity], timeout: Optional[float], deadline: Optional[float]) -> Decision:
        path = f"/v1/decisions/{_seg(decision_id)}"
        if agent is None:
            return Decision.from_wire(self.request("GET", path, timeout=timeout, deadline=deadline))

        def signed() -> _Headers:  # a fresh timestamp for every attempt
            timestamp = _now_iso()
            return {
                "x-service-key-id": agent.certificate_id,
                "x-service-timestamp": timestamp,
                "x-service-signature": agent.key.sign(f"GET {path}\n{timestamp}"),
            }

        return Decision.from_wire(self.request("GET", path, auth=signed, timeout=timeout, deadline=deadline))

    def wait_for_resolution(
        self,
        decision_id: str,
        timeout: float = 60.0,
        interval: float = 1.0,
        *,
        agent: Optional[AgentIdentity] = None,
        stream: bool = True,
    ) -> Decision:
        """Waits until a decision is final and returns it.

        ALLOW and DENY return at once; a HUMAN_REVIEW returns once its status is ``RESOLVED``
        (read ``resolution``). With organization credentials (and ``stream`` true) it waits on
        the event stream for the decision's HumanReviewResolved, reading the decision whenever
        the stream (re)starts listening so that nothing recorded in between is missed; when the
        stream cannot be used (a key without EVENTS_READ, a service without the stream, a
        connection that keeps failing) it polls every ``interval`` seconds for the time left.
        Raises :class:`~mandate_client.errors.ResolutionTimeoutError` after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        if stream and (self.api_key or self.operator_key):
            found = self._wait_on_stream(decision_id, deadline, timeout, agent)
            if found is not None:
                return found
        while True:
            decision = self._read_by(decision_id, agent, deadline, timeout)
            if decision.is_final:
                return decision
            left = deadline - time.monotonic()
            if left <= 0:
                raise ResolutionTimeoutError(
                    f"Decision {decision_id} was still {decision.status or 'PENDING'} after {timeout} s.",
                    detail="resolution_timeout",
                )
            self._sleep(min(interval, left))

    def _read_by(self, decision_id: str, agent: Optional[AgentIdentity], deadline: float, timeout: float) -> Decision:
        """The decision, read before ``deadline`` (no attempt outlasts it, no retry starts after it); a read cut off by it is the wait's timeout."""
        try:
            return self._get_decision(decision_id, agent, None, deadline)
        except (TransportError, ServerError) as exc:
            if time.monotonic() < deadline:
                raise
            raise ResolutionTimeoutError(f"Decision {decision_id} could not be read within {timeout} s: {exc}", detail="resolution_timeout") from exc

    def _wait_on_stream(self, decision_id: str, deadline: float, timeout: float, agent: Optional[AgentIdentity]) -> Optional[Decision]:
        """The final decision, or None when the stream could not be used (the caller polls); raises at the deadline.

        The stream is read by a daemon thread that only reports (listening, the decision's
        event, a failure) through a queue, so the deadline holds to the millisecond here while
        a read blocks there; that thread ends at the stream's next message (a heartbeat within
        15 s) once told to stop.
        """
        reports: "queue.Queue[Tuple[str, Optional[BaseException]]]" = queue.Queue()
        stop = threading.Event()

        def pump() -> None:
            try:
                for event in self._events(["HumanReviewResolved"], None, lambda: reports.put(("listening", None)), 3, 45.0, stop):
                    if event.data.get("decision_id") == decision_id:
                        reports.put(("event", None))
            except BaseException as exc:  # reported, never lost in the thread
                reports.put(("failed", exc))

        threading.Thread(target=pump, name="mandate-wait-for-resolution", daemon=True).start()
        last: Optional[Decision] = None
        try:
            while True:
                left = deadline - time.monotonic()
                try:
                    kind, failure = reports.get(timeout=max(0.0, left)) if left > 0 else ("timeout", None)
                except queue.Empty:
                    kind, failure = "timeout", None
                if kind == "timeout":
                    status = last.status if last is not None and last.status else "PENDING"
                    raise ResolutionTimeoutError(f"Decision {decision_id} was still {status} after {timeout} s.", detail="resolution_timeout")
                if kind == "failed":
                    # Refused (403 without EVENTS_READ, 404 from a service without it) or kept failing: poll.
                    if isinstance(failure, (ApiError, TransportError)):
                        return None
                    assert failure is not None
                    raise failure
                last = self._read_by(decision_id, agent, deadline, timeout)
                if last.is_final:
                    return last
        finally:
            stop.set()

    def review_decision(self, decision_id: str, resolution: str, reason: str, *, timeout: Optional[float] = None) -> Decision:
        """Resolves a pending HUMAN_REVIEW (``approved`` or ``rejected``; REVIEWER). The outcome keeps reading HUMAN_REVIEW."""
        return Decision.from_wire(self.request("POST", f"/v1/decisions/{_seg(decision_id)}/review", json_body={"resolution": resolution, "reason": reason}, timeout=timeout))

    # --- capabilities -----------------------------------------------------

    def issue_capability(self, decision_id: str, audience: str, issued_by: str, ttl_seconds: Optional[int] = None, *, timeout: Optional[float] = None) -> CapabilityToken:
        """Issues the single Capability of an ALLOW decision."""
        return self._issue(f"/v1/decisions/{_seg(decision_id)}/capability-token", audience, issued_by, ttl_seconds, timeout)

    def issue_capability_from_review(self, decision_id: str, audience: str, issued_by: str, ttl_seconds: Optional[int] = None, *, timeout: Optional[float] = None) -> CapabilityToken:
        """Issues the single Capability of a HUMAN_REVIEW decision resolved ``approved``."""
        return self._issue(f"/v1/decisions/{_seg(decision_id)}/capability-token/from-review", audience, issued_by, ttl_seconds, timeout)

    def verify_capability(
        self,
        token: str,
        audience: str,
        action: str,
        resource: str = "",
        constraints: Optional[Mapping[str, str]] = None,
        environment: Optional[str] = None,
        *,
        timeout: Optional[float] = None,
    ) -> VerifiedCapability:
        """Verifies and consumes a Capability (CAPABILITY_VERIFY).

        A mismatch raises :class:`ConflictError` and leaves the token unconsumed;
        a replay raises :class:`ConflictError` with ``detail == "capability_consumed"``.
        """
        body: Dict[str, Any] = {"token": token, "audience": audience, "action": action, "resource": resource, "constraints": dict(constraints or {})}
        if environment is not None:
            body["environment"] = environment
        return VerifiedCapability.from_wire(self.request("POST", "/v1/capability-tokens/verify", json_body=body, timeout=timeout))

    def get_capability(self, capability_id: str, *, timeout: Optional[float] = None) -> Capability:
        """A Capability's state, bound fields and ``ttl_seconds``; never its token."""
        return Capability.from_wire(self.request("GET", f"/v1/capabilities/{_seg(capability_id)}", timeout=timeout))

    def _issue(self, path: str, audience: str, issued_by: str, ttl_seconds: Optional[int], timeout: Optional[float]) -> CapabilityToken:
        body: Dict[str, Any] = {"audience": audience, "issued_by": issued_by}
        if ttl_seconds is not None:
            body["ttl_seconds"] = ttl_seconds
        return CapabilityToken.from_wire(self.request("POST", path, json_body=body, timeout=timeout))

    # --- governance (what the platform UI does) ---------------------------

    def upload_governance_document(self, name: str, kind: str, format: str, content: str, *, timeout: Optional[float] = None) -> GovernanceDocument:
        """Uploads a ``delegation_of_authority``, ``approval_matrix`` or ``signing_schedule`` (csv, yaml or json).

        The document is parsed at once: one that does not parse raises ValidationError whose
        field errors carry the file line and column. ``name`` (the file name, say) is unique
        in the organization; a second upload under it raises ConflictError.
        """
        body = {"name": name, "kind": kind, "format": format, "content": content}
        return GovernanceDocument.from_wire(self.request("POST", "/v1/authority-graph/documents", json_body=body, timeout=timeout))

    def list_governance_documents(self, *, timeout: Optional[float] = None) -> List[GovernanceDocument]:
        """The uploaded governance documents, oldest first."""
        return [GovernanceDocument.from_wire(d) for d in self.request("GET", "/v1/authority-graph/documents", timeout=timeout).get("documents") or []]

    def delete_governance_document(self, document_id: str, *, timeout: Optional[float] = None) -> None:
        """Deletes a governance document; graph versions generated from it keep their graph."""
        self.request("DELETE", f"/v1/authority-graph/documents/{_seg(document_id)}", timeout=timeout)

    def generate_graph_version(self, document_ids: Optional[List[str]] = None, *, timeout: Optional[float] = None) -> GraphVersionRef:
        """Generates a draft Authority Graph version from the uploaded documents (all unless named)."""
        return GraphVersionRef.from_wire(self.request("POST", "/v1/authority-graph/versions:generate", json_body={"document_ids": list(document_ids or [])}, timeout=timeout))

    def create_graph_version(self, graph: Mapping[str, Any], *, timeout: Optional[float] = None) -> GraphVersionRef:
        """Authors a draft graph version directly: ``{roles, memberships, limits, delegations, approval_matrix}``."""
        return GraphVersionRef.from_wire(self.request("POST", "/v1/authority-graph/versions", json_body={"graph": dict(graph)}, timeout=timeout))

    def approve_graph_version(self, version: int, *, timeout: Optional[float] = None) -> GraphVersionRef:
        """draft -> approved, by a POLICY_APPROVER other than the version's author (four eyes)."""
        return GraphVersionRef.from_wire(self.request("POST", f"/v1/authority-graph/versions/{int(version)}/approve", json_body={}, timeout=timeout))

    def publish_graph_version(self, version: int, *, timeout: Optional[float] = None) -> GraphVersionRef:
        """Makes an approved graph version active (POLICY_APPROVER)."""
        return GraphVersionRef.from_wire(self.request("POST", f"/v1/authority-graph/versions/{int(version)}/publish", json_body={}, timeout=timeout))

    def list_graph_versions(self, *, timeout: Optional[float] = None) -> List[GraphVersion]:
        """Every graph version (draft, approved, active, superseded), newest first, without graphs."""
        return [GraphVersion.from_wire(v) for v in self.request("GET", "/v1/authority-graph/versions", timeout=timeout).get("versions") or []]

    def get_graph_version(self, version: int, *, timeout: Optional[float] = None) -> GraphVersion:
        """One graph version with its graph, whatever its state."""
        return GraphVersion.from_wire(self.request("GET", f"/v1/authority-graph/versions/{int(version)}", timeout=timeout))

    def create_policy(self, policy_key: str, rules: Mapping[str, Any], description: str = "", *, timeout: Optional[float] = None) -> PolicyVersionRef:
        """Creates a policy with its first draft version from a runtime policy document ``{actions, rules}``."""
        body = {"policy_key": policy_key, "description": description, "source": {"rules": dict(rules)}}
        return PolicyVersionRef.from_wire(self.request("POST", "/v1/policies", json_body=body, timeout=timeout))

    def submit_policy_version(self, policy_key: str, version: int, *, timeout: Optional[float] = None) -> PolicyVersionRef:
        """draft -> in_review (POLICY_AUTHOR)."""
        return self._policy_step(policy_key, version, "submit", timeout)

    def approve_policy_version(self, policy_key: str, version: int, *, timeout: Optional[float] = None) -> PolicyVersionRef:
        """in_review -> approved, by a POLICY_APPROVER other than the author."""
        return self._policy_step(policy_key, version, "approve", timeout)

    def publish_policy_version(self, policy_key: str, version: int, *, timeout: Optional[float] = None) -> PolicyVersionRef:
        """approved -> active (POLICY_APPROVER): compiles the organization's bundle."""
        return self._policy_step(policy_key, version, "publish", timeout)

    def _policy_step(self, policy_key: str, version: int, step: str, timeout: Optional[float] = None) -> PolicyVersionRef:
        return PolicyVersionRef.from_wire(self.request("POST", f"/v1/policies/{_seg(policy_key)}/versions/{int(version)}/{step}", json_body={}, timeout=timeout))

    def get_evidence(self, evidence_id: str, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """Reads a signed evidence record (EVIDENCE_READ)."""
        return self.request("GET", f"/v1/evidence/{_seg(evidence_id)}", timeout=timeout)  # type: ignore[no-any-return]

    # --- events and webhooks (early access, /v1alpha) -----------------------

    def watch_events(
        self,
        types: Optional[Iterable[str]] = None,
        after: Optional[str] = None,
        *,
        on_listening: Optional[Callable[[], None]] = None,
        max_reconnects: int = 20,
        idle_timeout: float = 45.0,
    ) -> Iterator[EventEnvelope]:
        """The organization's events as they are recorded (EVENTS_READ), as an iterator.

        Reads ``GET /v1alpha/events:watch`` (Server-Sent Events): oldest first after ``after``
        (an ``event_id``), or from now; then live. Heartbeats are not yielded. A dropped
        connection (network failure, a 5xx, the service shutting down, ``idle_timeout``
        seconds without a byte: three missed heartbeats) is resumed after the last event
        yielded, so every event is yielded once: no gap, no duplicate (within the retention
        window). Reconnections sleep a full-jitter backoff (``backoff_base * 2**n``, at most
        ``backoff_cap``); after ``max_reconnects`` failed connections in a row the last failure
        is raised (TransportError or ServerError). A 4xx is never retried: 403 without
        EVENTS_READ, 422 for an unknown type or a cursor unknown or past the retention window
        (``cursor_expired``: start again without ``after``), 429 past the organization's open
        streams. ``on_listening`` is called each time a connection listens (its first message
        arrived): until the first event there is no cursor, so a reconnection starts from now
        again and a caller re-reads its state there. Stop by leaving the loop (the connection
        is closed when the iterator is).
        """
        return self._events(types, after, on_listening, max_reconnects, idle_timeout, None)

    def _events(
        self,
        types: Optional[Iterable[str]],
        after: Optional[str],
        on_listening: Optional[Callable[[], None]],
        max_reconnects: int,
        idle_timeout: float,
        stop: Optional[threading.Event],
    ) -> Iterator[EventEnvelope]:
        cursor = after or ""
        names = ",".join(types or [])
        failures = 0
        while True:
            if stop is not None and stop.is_set():
                return
            params = {k: v for k, v in (("types", names), ("after", cursor)) if v}
            headers = {"accept": "text/event-stream", **self._org_headers()}
            listening = False
            failure: MandateError
            try:
                with self._http.stream("GET", "/v1alpha/events:watch", params=params, headers=headers, timeout=httpx.Timeout(self.timeout, read=idle_timeout)) as response:
                    if not response.is_success:
                        response.read()
                        error = error_from_response(response.status_code, _parse(response), response.headers.get("x-request-id"))
                        if response.status_code < 500:
                            raise error
                        failure = error
                    else:
                        parser = SseParser()
                        for line in response.iter_lines():
                            message = parser.line(line)
                            if message is None:
                                continue
                            if not listening:
                                listening, failures = True, 0
                                if on_listening is not None:
                                    on_listening()
                            if stop is not None and stop.is_set():
                                return
                            if message.comment is not None:
                                continue
                            envelope = EventEnvelope.from_wire(json.loads(message.data))
                            cursor = envelope.event_id
                            yield envelope
                        # The service ended the stream (it is shutting down): resume with the cursor.
                        failure = ServerError("The event stream ended; resuming.", status=503, detail="unavailable")
            except httpx.TimeoutException as exc:
                failure = TransportError(f"No event or heartbeat from {self.base_url} within {idle_timeout} s: {exc}", detail="timeout")
                failure.__cause__ = exc
            except httpx.TransportError as exc:
                failure = TransportError(f"Could not reach {self.base_url}: {exc}", detail="connection_failed")
                failure.__cause__ = exc
            if not listening:
                failures += 1
                if failures > max(0, max_reconnects):
                    raise failure
            self._sleep(random.uniform(0, min(self.backoff_cap, self.backoff_base * (2 ** max(0, failures - 1)))))

    def create_webhook(self, url: str, events: Optional[Iterable[str]] = None, description: str = "", *, timeout: Optional[float] = None) -> Webhook:
        """Subscribes ``url`` to ``events`` (all when empty) from now on (ORG_ADMIN); the answer's ``secret`` is shown only here."""
        body = {"url": url, "events": list(events or []), "description": description}
        return Webhook.from_wire(self.request("POST", "/v1alpha/webhooks", json_body=body, timeout=timeout))

    def list_webhooks(self, *, timeout: Optional[float] = None) -> List[Webhook]:
        """The organization's webhooks, never their secrets."""
        return [Webhook.from_wire(w) for w in (self.request("GET", "/v1alpha/webhooks", timeout=timeout) or {}).get("webhooks") or []]

    def get_webhook(self, webhook_id: str, *, timeout: Optional[float] = None) -> Webhook:
        return Webhook.from_wire(self.request("GET", f"/v1alpha/webhooks/{_seg(webhook_id)}", timeout=timeout))

    def delete_webhook(self, webhook_id: str, *, timeout: Optional[float] = None) -> None:
        """Removes a webhook; its pending deliveries are dropped."""
        self.request("DELETE", f"/v1alpha/webhooks/{_seg(webhook_id)}", timeout=timeout)

    def rotate_webhook_secret(self, webhook_id: str, *, timeout: Optional[float] = None) -> Webhook:
        """A new signing secret, in this answer only; the old one signs nothing from now on. Clears ``failing``."""
        return Webhook.from_wire(self.request("POST", f"/v1alpha/webhooks/{_seg(webhook_id)}:rotate-secret", json_body={}, timeout=timeout))

    def list_webhook_deliveries(self, webhook_id: str, page_size: Optional[int] = None, page_token: Optional[str] = None, *, timeout: Optional[float] = None) -> Tuple[List[WebhookDelivery], Optional[str]]:
        """Deliveries with their attempts, newest event first, and the next page's token (None on the last)."""
        params = {k: str(v) for k, v in (("page_size", page_size), ("page_token", page_token)) if v}
        page = self.request("GET", f"/v1alpha/webhooks/{_seg(webhook_id)}/deliveries", params=params, timeout=timeout) or {}
        return [WebhookDelivery.from_wire(d) for d in page.get("deliveries") or []], page.get("next_page_token") or None

    def redeliver_webhook_delivery(self, webhook_id: str, delivery_id: str, *, timeout: Optional[float] = None) -> WebhookDelivery:
        """Sends a delivery's event again now, with the same ``webhook-id``."""
        path = f"/v1alpha/webhooks/{_seg(webhook_id)}/deliveries/{_seg(delivery_id)}:redeliver"
        return WebhookDelivery.from_wire(self.request("POST", path, json_body={}, timeout=timeout))

    # --- transport ----------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        content: Optional[bytes] = None,
        params: Optional[Mapping[str, str]] = None,
        auth: Union[str, Callable[[], _Headers]] = "org",
        timeout: Optional[float] = None,
        deadline: Optional[float] = None,
    ) -> Any:
        """Any /v1 call with the client's retries and typed errors; answers the parsed JSON.

        ``auth`` is ``"org"`` (the client's key), ``"none"``, or a function
        returning agent signature headers (called once per attempt). ``timeout``
        (seconds per attempt) overrides the client's for this call. ``deadline``
        (a ``time.monotonic()`` instant) bounds the whole call: each attempt is cut
        to the time left, and no retry starts after it.
        """
        per_attempt = self.timeout if timeout is None else timeout
        body = content if content is not None else (None if json_body is None else _json_bytes(json_body))
        attempt = 0
        while True:
            headers: _Headers = {"accept": "application/json"}
            if body is not None:
                headers["content-type"] = "application/json"
            if auth == "org":
                headers.update(self._org_headers())
            elif callable(auth):
                headers.update(auth())
            failure: MandateError
            # The service's own Retry-After (sent with every 503) is the least wait before the next attempt.
            server_wait = 0.0
            this_attempt = per_attempt if deadline is None else max(0.001, min(per_attempt, deadline - time.monotonic()))
            try:
                response = self._http.request(method, path, content=body, params=params, headers=headers, timeout=this_attempt)
            except httpx.TimeoutException as exc:
                failure = TransportError(f"No answer from {self.base_url} within {this_attempt:.3g} s: {exc}", detail="timeout")
                failure.__cause__ = exc
            except httpx.TransportError as exc:
                failure = TransportError(f"Could not reach {self.base_url}: {exc}", detail="connection_failed")
                failure.__cause__ = exc
            except httpx.HTTPError as exc:
                # Any other failure of the exchange (an answer that cannot be decoded, …): typed and retried alike.
                failure = TransportError(f"Could not read the answer from {self.base_url}: {exc}", detail="connection_failed")
                failure.__cause__ = exc
            else:
                parsed = _parse(response)
                if response.is_success:
                    return parsed
                failure = error_from_response(response.status_code, parsed, response.headers.get("x-request-id"))
                if response.status_code < 500:
                    raise failure
                server_wait = _retry_after(response.headers.get("retry-after"))
            if attempt >= self.max_retries:
                logger.debug("%s %s failed (%s); %d retries spent, giving up", method, path, failure, attempt)
                raise failure
            delay = max(server_wait, random.uniform(0, min(self.backoff_cap, self.backoff_base * (2**attempt))))
            if deadline is not None and time.monotonic() + delay >= deadline:
                logger.debug("%s %s failed (%s); no time left for a retry", method, path, failure)
                raise failure
            logger.debug("%s %s failed (%s); retry %d of %d in %.3f s", method, path, failure, attempt + 1, self.max_retries, delay)
            self._sleep(delay)
            attempt += 1

    def _org_headers(self) -> _Headers:
        if self.api_key:
            return {"authorization": f"Bearer {self.api_key}"}
        if self.operator_key:
            headers = {"x-service-operator-key": self.operator_key}
            if self.organization_id:
                headers["x-service-organization-id"] = self.organization_id
            return headers
        return {}


def _retry_after(header: Optional[str]) -> float:
    """A Retry-After header's delay in seconds (a number of seconds, or an HTTP date), at most a minute; 0 without one."""
    if header is None:
        return 0.0
    text = header.strip()
    if text.isdigit():
        seconds = float(text)
    else:
        try:
            seconds = (parsedate_to_datetime(text) - datetime.now(timezone.utc)).total_seconds()
        except (TypeError, ValueError):
            return 0.0
    return min(seconds, 60.0) if seconds > 0 else 0.0


def _json_bytes(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def _body_signature(agent: AgentIdentity, body: bytes) -> _Headers:
    return {"x-service-key-id": agent.certificate_id, "x-service-signature": agent.key.sign(body)}


def _parse(response: httpx.Response) -> Any:
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        return response.text
