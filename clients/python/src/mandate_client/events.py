"""Events (early access): verifying webhook deliveries, and the stream's Server-Sent Events.

A webhook delivery is signed as the Standard Webhooks specification says; it is verified
with the ``standardwebhooks`` package (the reference implementation, which the service's
own signer is tested against), never with hand-written HMAC code.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Union

from standardwebhooks import Webhook as _StandardWebhook
from standardwebhooks import WebhookVerificationError as _LibraryVerificationError

from .errors import WebhookVerificationError

__all__ = ["EVENT_NAMES", "EventEnvelope", "WEBHOOK_TOLERANCE_SECONDS", "verify_webhook", "SseParser", "SseMessage"]

#: Every event name (docs/events.md).
EVENT_NAMES = (
    "IntentReceived",
    "DecisionCompleted",
    "HumanReviewRequested",
    "HumanReviewResolved",
    "ReceiptIssued",
    "PolicyPublished",
    "AuthorityGraphUpdated",
    "ExecutionReconciled",
    "AgentStateChanged",
    "WebhookFailing",
)

#: Seconds a delivery's ``webhook-timestamp`` may differ from now (the Standard Webhooks tolerance).
WEBHOOK_TOLERANCE_SECONDS = 5 * 60

_DIGITS = re.compile(r"^\d{1,15}$")


@dataclass(frozen=True)
class EventEnvelope:
    """The spec's envelope, on the stream and as a webhook body: exactly these four members."""

    #: The event name, e.g. ``DecisionCompleted``.
    event: str
    #: Unique, stable, sortable within an organization, and the stream's resume cursor.
    event_id: str
    #: ISO 8601 UTC with milliseconds.
    occurred_at: str
    #: The event's fields (docs/events.md): ids, versions, outcome, reason; never secrets.
    data: Dict[str, Any]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_wire(cls, raw: Dict[str, Any]) -> "EventEnvelope":
        data = raw.get("data")
        return cls(str(raw.get("event") or ""), str(raw.get("event_id") or ""), str(raw.get("occurred_at") or ""), data if isinstance(data, dict) else {}, raw)


def verify_webhook(body: Union[bytes, str], headers: Mapping[str, Any], secret: str) -> EventEnvelope:
    """Verifies one webhook delivery and returns its envelope.

    ``body`` exactly as received (the raw bytes, never re-serialised JSON), its ``headers``
    (any mapping; names in any case) and the webhook's ``whsec_...`` secret. Raises
    :class:`~mandate_client.errors.WebhookVerificationError` with ``detail``
    ``webhook_headers_missing`` (no webhook-id, webhook-timestamp or webhook-signature),
    ``webhook_timestamp_stale`` (more than 5 minutes from now either way: a replay or a skewed
    clock) or ``webhook_signature_invalid`` (no signature matches: a wrong secret, or a body or
    id that changed). Duplicates are the receiver's to drop, by ``webhook-id``.
    """
    h: Dict[str, str] = {}
    for key, value in headers.items():
        h[str(key).lower()] = " ".join(value) if isinstance(value, (list, tuple)) else str(value)
    msg_id, timestamp, signature = h.get("webhook-id"), h.get("webhook-timestamp"), h.get("webhook-signature")
    if not (msg_id and timestamp and signature):
        raise WebhookVerificationError("The webhook-id, webhook-timestamp and webhook-signature headers are all required.", detail="webhook_headers_missing")
    if not _DIGITS.match(timestamp) or abs(time.time() - int(timestamp)) > WEBHOOK_TOLERANCE_SECONDS:
        raise WebhookVerificationError(f"webhook-timestamp {timestamp} is not within {WEBHOOK_TOLERANCE_SECONDS} s of now.", detail="webhook_timestamp_stale")
    try:
        text = body.decode("utf-8") if isinstance(body, (bytes, bytearray)) else body
        parsed = _StandardWebhook(secret).verify(text, {"webhook-id": msg_id, "webhook-timestamp": timestamp, "webhook-signature": signature})
    except _LibraryVerificationError as exc:
        stale = "timestamp" in str(exc).lower()
        raise WebhookVerificationError(
            f"webhook-timestamp {timestamp} is not within {WEBHOOK_TOLERANCE_SECONDS} s of now." if stale else "No webhook-signature matches the body with this secret.",
            detail="webhook_timestamp_stale" if stale else "webhook_signature_invalid",
        ) from exc
    except Exception as exc:  # a malformed signature or secret, a body that is not UTF-8 or not JSON
        raise WebhookVerificationError(f"The delivery could not be verified: {exc}", detail="webhook_signature_invalid") from exc
    if not isinstance(parsed, dict) or not isinstance(parsed.get("event"), str) or not isinstance(parsed.get("event_id"), str):
        raise WebhookVerificationError("The signed body is not an event envelope.", detail="webhook_signature_invalid")
    return EventEnvelope.from_wire(parsed)


@dataclass(frozen=True)
class SseMessage:
    """One Server-Sent Events message: an event (``comment`` None) or a comment (the stream's heartbeat)."""

    event: str = ""
    data: str = ""
    id: Optional[str] = None
    comment: Optional[str] = None


class SseParser:
    """The ``text/event-stream`` rules this API uses, fed line by line (line ends already removed)."""

    def __init__(self) -> None:
        self._id: Optional[str] = None
        self._event = ""
        self._data: List[str] = []

    def feed(self, lines: Iterable[str]) -> Iterator[SseMessage]:
        for line in lines:
            message = self.line(line)
            if message is not None:
                yield message

    def line(self, line: str) -> Optional[SseMessage]:
        if line == "":
            if not self._data and not self._event:
                return None
            message = SseMessage(self._event or "message", "\n".join(self._data), self._id)
            self._event, self._data = "", []
            return message
        if line.startswith(":"):
            return SseMessage(comment=line[1:].lstrip())
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        return None
