"""Retries, observed against a tiny local HTTP server (the client is what is under test).

5xx, timeouts and refused connections are retried with capped, jittered
backoff; no 4xx ever is; a retried Intent resends the very same signed bytes.
"""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Type, Union

import pytest

from mandate_client import (
    AgentIdentity,
    AgentKey,
    MandateClient,
    MandateError,
    RateLimitedError,
    ResolutionTimeoutError,
    ServerError,
    TransportError,
    ValidationError,
)
from mandate_client.client import MAX_RETRIES_LIMIT

# (status, JSON body) or (status, JSON body, extra headers); None never answers.
Answer = Optional[Union[Tuple[int, Dict[str, Any]], Tuple[int, Dict[str, Any], Dict[str, str]]]]
UNAVAILABLE = {"detail": "unavailable", "message": "Temporarily unavailable.", "request_id": "stub"}


class Stub:
    """A local HTTP server whose n-th answer (from 1) is ``answer(n)``; None never answers."""

    def __init__(self, answer: Callable[[int], Answer]) -> None:
        self.seen: List[Dict[str, Any]] = []
        self._release = threading.Event()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                stub.seen.append({"method": self.command, "path": self.path, "body": body, "headers": dict(self.headers)})
                result = answer(len(stub.seen))
                if result is None:
                    stub._release.wait(5)
                    return
                status, payload = result[0], result[1]
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.send_header("x-request-id", f"stub-{len(stub.seen)}")
                for name, value in (result[2] if len(result) > 2 else {}).items():  # type: ignore[misc]
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            do_GET = _handle
            do_POST = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def stub_factory() -> Iterator[Callable[[Callable[[int], Answer]], Stub]]:
    stubs: List[Stub] = []

    def make(answer: Callable[[int], Answer]) -> Stub:
        stubs.append(Stub(answer))
        return stubs[-1]

    yield make
    for s in stubs:
        s.close()


def test_503_twice_then_200_is_retried_with_the_same_signed_bytes(stub_factory: Callable[..., Stub]) -> None:
    decision = {"decision_id": "dec_1", "outcome": "ALLOW", "reason": "starter_reference_action", "evidence_id": "evd_1", "evaluated_at": "2030-01-01T00:00:00.000Z"}
    stub = stub_factory(lambda n: (503, UNAVAILABLE) if n <= 2 else (200, decision))
    sleeps: List[float] = []
    with MandateClient(stub.url, max_retries=4, backoff_base=0.01, backoff_cap=0.05, sleep=sleeps.append) as client:
        agent = AgentIdentity("agt_1", "crt_1", AgentKey.generate())
        result = client.submit_intent(agent, "reference_noop", amount=5)
    assert (result.decision_id, result.outcome) == ("dec_1", "ALLOW")
    assert len(stub.seen) == 3
    assert len({s["body"] for s in stub.seen}) == 1
    assert len({s["headers"]["x-service-signature"] for s in stub.seen}) == 1
    first = stub.seen[0]
    assert first["path"] == "/v1/intents"
    assert first["headers"]["x-service-key-id"] == "crt_1"
    assert "authorization" not in {k.lower() for k in first["headers"]}
    assert json.loads(first["body"])["amount"] == 5
    # Full jitter within the capped exponential bound: retry n sleeps in [0, min(cap, base * 2**n)].
    assert len(sleeps) == 2
    assert 0 <= sleeps[0] <= 0.01 and 0 <= sleeps[1] <= 0.02


def test_gives_up_after_max_retries_with_a_server_error(stub_factory: Callable[..., Stub]) -> None:
    stub = stub_factory(lambda n: (503, UNAVAILABLE))
    sleeps: List[float] = []
    with MandateClient(stub.url, api_key="k", max_retries=3, backoff_base=1.0, backoff_cap=2.5, sleep=sleeps.append) as client:
        with pytest.raises(ServerError) as err:
            client.get_decision("dec_1")
    assert (err.value.status, err.value.detail, err.value.request_id) == (503, "unavailable", "stub")
    assert len(stub.seen) == 4
    assert stub.seen[0]["headers"].get("authorization") == "Bearer k"
    assert len(sleeps) == 3
    assert all(0 <= s <= bound for s, bound in zip(sleeps, [1.0, 2.0, 2.5]))  # capped at backoff_cap


@pytest.mark.parametrize(
    "status,cls,detail",
    [(422, ValidationError, "validation_failed"), (429, RateLimitedError, "rate_limited")],
)
def test_no_4xx_is_ever_retried(stub_factory: Callable[..., Stub], status: int, cls: Type[MandateError], detail: str) -> None:
    stub = stub_factory(lambda n: (status, {"detail": detail, "message": "no", "request_id": "r", "errors": []}))
    with MandateClient(stub.url, max_retries=5, backoff_base=0.001) as client:
        with pytest.raises(cls) as err:
            client.create_sandbox("a@example.com")
    assert err.value.detail == detail
    assert len(stub.seen) == 1


def test_timeouts_are_retried_then_raise_transport_error(stub_factory: Callable[..., Stub]) -> None:
    flaky = stub_factory(lambda n: None if n == 1 else (200, {"agent_id": "agt_1", "state": "active"}))
    with MandateClient(flaky.url, api_key="k", timeout=0.3, max_retries=2, backoff_base=0.001) as client:
        assert client.get_agent("agt_1").state == "active"
    assert len(flaky.seen) == 2

    silent = stub_factory(lambda n: None)
    with MandateClient(silent.url, timeout=0.2, max_retries=1, backoff_base=0.001) as client:
        with pytest.raises(TransportError) as err:
            client.get_agent("agt_1")
    assert (err.value.status, err.value.detail) == (0, "timeout")
    assert len(silent.seen) == 2


def test_refused_connections_are_retried_then_raise_transport_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sleeps: List[float] = []
    with MandateClient(f"http://127.0.0.1:{port}", max_retries=3, backoff_base=0.001, sleep=sleeps.append) as client:
        with pytest.raises(TransportError) as err:
            client.get_agent("agt_1")
    assert err.value.detail == "connection_failed"
    assert len(sleeps) == 3  # four attempts


def test_max_retries_is_capped() -> None:
    with MandateClient("http://127.0.0.1:9", max_retries=1000) as client:
        assert client.max_retries == MAX_RETRIES_LIMIT == 10
    with MandateClient("http://127.0.0.1:9", max_retries=-3) as client:
        assert client.max_retries == 0


def test_a_503s_retry_after_is_the_least_wait_before_the_retry(stub_factory: Callable[..., Stub]) -> None:
    stub = stub_factory(lambda n: (503, UNAVAILABLE, {"retry-after": "5"}) if n == 1 else (200, {"agent_id": "agt_1"}))
    sleeps: List[float] = []
    with MandateClient(stub.url, api_key="k", max_retries=2, backoff_base=0.001, backoff_cap=0.005, sleep=sleeps.append) as client:
        client.get_agent("agt_1")
    assert len(stub.seen) == 2
    assert sleeps[0] >= 5


def test_an_answer_that_cannot_be_decoded_is_a_retried_transport_error(stub_factory: Callable[..., Stub]) -> None:
    # Declared gzip, sent plain: httpx cannot decode it.
    stub = stub_factory(lambda n: (502, UNAVAILABLE, {"content-encoding": "gzip"}))
    sleeps: List[float] = []
    with MandateClient(stub.url, api_key="k", max_retries=1, backoff_base=0.001, sleep=sleeps.append) as client:
        with pytest.raises(TransportError) as caught:
            client.get_agent("agt_1")
    assert caught.value.detail == "connection_failed"
    assert "Could not read the answer" in str(caught.value)
    assert len(stub.seen) == 2


PENDING = {"decision_id": "dec_1", "outcome": "HUMAN_REVIEW", "reason": "requires_approval", "evidence_id": "evd_1", "evaluated_at": "2026-11-27T00:00:00.000Z", "status": "PENDING"}


def test_wait_for_resolution_gives_up_at_its_timeout_even_while_a_read_hangs(stub_factory: Callable[..., Stub]) -> None:
    # PENDING once, then no answer at all: the read is cut at the wait's deadline, never retried past it.
    stub = stub_factory(lambda n: (200, PENDING) if n == 1 else None)
    with MandateClient(stub.url, api_key="k", timeout=30.0, max_retries=3, backoff_base=0.001, sleep=lambda _: None) as client:
        with pytest.raises(ResolutionTimeoutError) as caught:
            client.wait_for_resolution("dec_1", timeout=1.0, interval=0.01, stream=False)
    assert caught.value.detail == "resolution_timeout"
    assert isinstance(caught.value.__cause__, TransportError)
    # The PENDING read, and the one the deadline cut: no retry after it.
    assert len(stub.seen) == 2
