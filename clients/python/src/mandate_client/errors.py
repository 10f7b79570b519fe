"""Typed failures of the client.

Every HTTP failure carries the service's error body (``detail``, ``message``,
``request_id``, ``errors``) and its ``status``; a failure with no answer
(connection refused or reset, DNS, timeout) is a :class:`TransportError` with
``status == 0``. A decision (ALLOW, DENY, HUMAN_REVIEW) is never an error.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Type

__all__ = [
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
    "error_from_response",
]


class MandateError(Exception):
    """Base class of every failure the client raises: catch it to catch them all."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 0,
        detail: str = "",
        request_id: Optional[str] = None,
        errors: Optional[List[Dict[str, Any]]] = None,
    ) -> None:
        super().__init__(message)
        #: Human-readable explanation (never parse it).
        self.message = message
        #: HTTP status, or 0 when no answer arrived.
        self.status = status
        #: Stable snake_case code, e.g. ``signature_invalid``, ``capability_consumed``.
        self.detail = detail
        #: The service's request id, for its logs; None when no answer arrived.
        self.request_id = request_id
        #: Field errors of a 422: ``[{"field", "code", "message"}]``.
        self.errors: List[Dict[str, Any]] = list(errors or [])

    def __str__(self) -> str:
        # What an uncaught error prints: enough to act on without a debugger (status, code,
        # message, every field error), e.g. "422 validation_failed: The request is invalid.
        # [email: invalid_format (must be an email address)] (request_id req_...)".
        head = f"{self.status} {self.detail}: {self.message}" if self.status else (f"{self.detail}: {self.message}" if self.detail else self.message)
        fields = "; ".join(
            f"{e.get('field', '?')}: {e.get('code', '?')}" + (f" ({e['message']})" if e.get("message") else "")
            for e in self.errors
            if isinstance(e, dict)
        )
        if fields:
            head += f" [{fields}]"
        if self.request_id:
            head += f" (request_id {self.request_id})"
        return head

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status}, detail={self.detail!r}, request_id={self.request_id!r}, message={self.message!r}, errors={self.errors!r})"


class ApiError(MandateError):
    """The service answered with an error status; base of the per-status classes."""


class AuthenticationError(ApiError):
    """401: missing or unknown credentials, or a signature that does not verify."""


class PermissionDeniedError(ApiError):
    """403: the credential lacks a permission, the agent is not active, or the organization is suspended (``organization_suspended``)."""


class NotFoundError(ApiError):
    """404: no such resource in the caller's organization."""


class ConflictError(ApiError):
    """409: nonce reused, capability consumed or mismatched, invalid transition..."""


class GoneError(ApiError):
    """410: the capability expired unconsumed."""


class PayloadTooLargeError(ApiError):
    """413: the body is larger than the service accepts."""


class ValidationError(ApiError):
    """422: the request failed validation; ``errors`` lists the fields."""


class RateLimitedError(ApiError):
    """429: rate-limited (sandbox creation). Never retried automatically."""


class ServerError(ApiError):
    """5xx: the service could not complete the request (raised once retries are spent)."""


class TransportError(MandateError):
    """No answer: connection failure or timeout (raised once retries are spent)."""


class ResolutionTimeoutError(MandateError, TimeoutError):
    """``wait_for_resolution`` gave up while the review was still pending."""


class WebhookVerificationError(MandateError):
    """``verify_webhook`` refused a delivery (``status == 0``); answer it with a 4xx and drop it.

    ``detail`` is ``webhook_headers_missing``, ``webhook_timestamp_stale`` or ``webhook_signature_invalid``.
    """


_BY_STATUS: Dict[int, Type[ApiError]] = {
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    410: GoneError,
    413: PayloadTooLargeError,
    422: ValidationError,
    429: RateLimitedError,
}


def error_from_response(status: int, body: Any, request_id_header: Optional[str]) -> ApiError:
    """The typed error of an error answer with ``status`` and its (parsed, if JSON) body."""
    b: Mapping[str, Any] = body if isinstance(body, dict) else {}
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else ApiError)
    message = b.get("message")
    if not isinstance(message, str):
        message = body[:500] if isinstance(body, str) and body else f"HTTP {status}"
    detail = b.get("detail")
    request_id = b.get("request_id")
    errors = b.get("errors")
    return cls(
        message,
        status=status,
        detail=detail if isinstance(detail, str) else f"http_{status}",
        request_id=request_id if isinstance(request_id, str) else request_id_header,
        errors=errors if isinstance(errors, list) else [],
    )
