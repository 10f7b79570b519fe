"""What a user sees without reading the source: printed errors, reprs, logs, timeouts, defaults.

Errors and reprs are checked against the live service (MANDATE_BASE_URL); the retry log and
the per-call timeout against the local stub of test_retries.py, which can refuse to answer.
"""

from __future__ import annotations

import logging
from typing import Callable, List

import pytest

from mandate_client import MandateClient, TransportError, ValidationError
from test_retries import UNAVAILABLE, Stub, stub_factory  # noqa: F401 (fixture)

from conftest import Org


def test_an_uncaught_error_prints_status_detail_and_field_errors(base_url: str) -> None:
    with MandateClient(base_url) as anonymous:
        with pytest.raises(ValidationError) as err:
            anonymous.create_sandbox("not-an-email")
    text = str(err.value)
    assert text.startswith("422 validation_failed: ")
    assert "email: invalid_format (must be an email address)" in text
    assert f"(request_id {err.value.request_id})" in text
    assert err.value.request_id


def test_no_repr_shows_a_secret(org: Org) -> None:
    api_key = org.sandbox.api_key
    assert api_key and api_key not in repr(org.sandbox)
    assert org.sandbox.organization_id in repr(org.sandbox)
    assert api_key not in repr(org.client) and "api_key=***" in repr(org.client)
    scoped = org.client.create_api_key("reader", ["DECISION_READ"])
    assert scoped.api_key not in repr(scoped)
    with MandateClient(org.client.base_url, operator_key="op-secret", organization_id=org.sandbox.organization_id) as operator:
        assert "op-secret" not in repr(operator)


def test_retries_are_logged_at_debug_on_the_mandate_logger(stub_factory: Callable[..., Stub], caplog: pytest.LogCaptureFixture) -> None:
    decision = {"decision_id": "dec_1", "outcome": "DENY", "reason": "r", "evidence_id": "e", "evaluated_at": "2030-01-01T00:00:00.000Z"}
    stub = stub_factory(lambda n: (503, UNAVAILABLE) if n == 1 else (200, decision))
    sleeps: List[float] = []
    with caplog.at_level(logging.DEBUG, logger="mandate"):
        with MandateClient(stub.url, api_key="k", backoff_base=0.01, sleep=sleeps.append) as client:
            client.get_decision("dec_1")
    retries = [r for r in caplog.records if r.name == "mandate"]
    assert len(retries) == 1 and retries[0].levelno == logging.DEBUG
    assert "GET /v1/decisions/dec_1 failed (503 unavailable: Temporarily unavailable." in retries[0].getMessage()
    assert "retry 1 of 4" in retries[0].getMessage()


def test_a_per_call_timeout_overrides_the_clients(stub_factory: Callable[..., Stub]) -> None:
    stub = stub_factory(lambda n: None)  # never answers
    with MandateClient(stub.url, api_key="k", timeout=60.0, max_retries=0) as client:
        with pytest.raises(TransportError) as err:
            client.get_decision("dec_1", timeout=0.2)
    assert err.value.detail == "timeout"
    assert "within 0.2 s" in str(err.value)


def test_base_url_and_api_key_default_to_the_environment(org: Org, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MANDATE_BASE_URL", org.client.base_url + "/")
    monkeypatch.setenv("MANDATE_API_KEY", org.sandbox.api_key)
    with MandateClient() as client:
        assert client.base_url == org.client.base_url
        principal = client.create_principal("From the environment", "role")
        assert client.get_principal(principal.principal_id).display_name == "From the environment"
    monkeypatch.delenv("MANDATE_BASE_URL")
    with MandateClient(operator_key="op") as operator:
        assert operator.base_url == "http://127.0.0.1:8080"
        assert operator.api_key is None  # an explicit operator key is not overridden by MANDATE_API_KEY


def test_every_call_takes_a_timeout() -> None:
    import inspect

    # Streams bound themselves differently: watch_events by idle_timeout; wait_for_resolution's
    # timeout is its overall deadline.
    not_calls = {"close", "with_api_key", "watch_events"}
    missing = [
        name
        for name, f in inspect.getmembers(MandateClient, inspect.isfunction)
        if not name.startswith("_") and name not in not_calls and "timeout" not in inspect.signature(f).parameters
    ]
    assert missing == []
