"""Events (early access) against a live service: watch_events over Server-Sent Events (resumed
across a connection cut by a real TCP proxy), wait_for_resolution on the stream and its fallback
to polling, webhook subscriptions with deliveries to a real local receiver verified by
verify_webhook, and verify_webhook's refusals.

Every wait is on a condition with a deadline (a watchdog); nothing waits on a fixed sleep.
"""

from __future__ import annotations

import base64
import json
import re
import socket
import threading
import time
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Dict, Iterator, List, Set, Tuple

import pytest
from standardwebhooks import Webhook as StandardWebhook

from conftest import ActiveAgent, CountingTransport, Org
from mandate_client import (
    EventEnvelope,
    MandateClient,
    MandateError,
    NotFoundError,
    PermissionDeniedError,
    TransportError,
    ValidationError,
    WebhookVerificationError,
    verify_webhook,
)

WATCHDOG = 30.0


def wait_until(what: str, predicate: Callable[[], object], timeout: float = WATCHDOG) -> None:
    """Polls ``predicate`` until it holds; fails naming ``what`` after ``timeout`` seconds (a watchdog, not a pacing)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout} s for {what}")
        time.sleep(0.02)


class Collector:
    """Reads ``events`` in a thread until ``limit`` events arrived or the iterator failed."""

    def __init__(self, events: Iterator[EventEnvelope], limit: int) -> None:
        self.got: List[EventEnvelope] = []
        self.error: BaseException | None = None
        self._events, self._limit = events, limit
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for event in self._events:
                self.got.append(event)
                if len(self.got) >= self._limit:
                    break
        except BaseException as exc:  # noqa: BLE001 - reported by join()
            self.error = exc

    def join(self) -> List[EventEnvelope]:
        self._thread.join(WATCHDOG)
        assert not self._thread.is_alive(), f"the stream did not deliver {self._limit} events; got {[e.event for e in self.got]}"
        if self.error is not None:
            raise self.error
        return self.got


class CuttableProxy:
    """A TCP proxy in front of the service whose open connections the test can cut (a real
    dropped connection, as the client sees one); records each connection's request line."""

    def __init__(self, target: Tuple[str, int]) -> None:
        self.target = target
        self.requests: List[str] = []
        self._sockets: Set[socket.socket] = set()
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._server.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            with self._lock:
                self._sockets.update((client, upstream))
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, record: bool) -> None:
        first = True
        try:
            while True:
                chunk = source.recv(65536)
                if not chunk:
                    break
                if record and first:
                    self.requests.append(chunk.split(b"\r\n", 1)[0].decode("latin-1"))
                first = False
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def cut(self) -> None:
        with self._lock:
            sockets, self._sockets = list(self._sockets), set()
        for s in sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self.cut()
        self._server.close()


def host_port(base_url: str) -> Tuple[str, int]:
    m = re.match(r"^https?://([^:/]+):(\d+)", base_url)
    assert m, base_url
    return m.group(1), int(m.group(2))


def test_watch_events_yields_every_event_once_across_a_cut_connection(base_url: str, org: Org, active: ActiveAgent) -> None:
    proxy = CuttableProxy(host_port(base_url))
    listening = {"direct": threading.Event(), "cut": threading.Event()}
    connections: List[int] = []
    try:
        with MandateClient(base_url, api_key=org.sandbox.api_key) as direct_client, MandateClient(
            proxy.url, api_key=org.sandbox.api_key, backoff_base=0.01, backoff_cap=0.1
        ) as cut_client:
            direct = Collector(direct_client.watch_events(on_listening=listening["direct"].set), 24)

            def on_cut_listening() -> None:
                connections.append(1)
                listening["cut"].set()

            cut = Collector(cut_client.watch_events(on_listening=on_cut_listening), 24)
            assert listening["direct"].wait(WATCHDOG) and listening["cut"].wait(WATCHDOG)

            for _ in range(4):
                org.client.submit_intent(active.identity, "reference_noop")
            wait_until("the cut stream's first events", lambda: len(cut.got) >= 6)
            cursor = cut.got[-1].event_id
            proxy.cut()
            for _ in range(4):
                org.client.submit_intent(active.identity, "reference_noop")
            # Four Intents, three events each (IntentReceived, DecisionCompleted, ReceiptIssued), twice.
            reference, resumed = direct.join(), cut.join()
    finally:
        proxy.close()
    assert [e.event for e in reference[:3]] == ["IntentReceived", "DecisionCompleted", "ReceiptIssued"]
    assert [e.event_id for e in resumed] == [e.event_id for e in reference]
    assert len({e.event_id for e in resumed}) == 24
    assert [e.raw for e in resumed] == [e.raw for e in reference]
    assert all(sorted(e.raw) == ["data", "event", "event_id", "occurred_at"] for e in reference)
    # It reconnected after the cut with the last event it had yielded as the cursor: `cursor` or one
    # after it (more of the first Intents' events may arrive between reading it and the cut).
    assert len(connections) >= 2
    assert proxy.requests[0] == "GET /v1alpha/events:watch HTTP/1.1"
    resumed_ids = [e.event_id for e in resumed]
    after = re.fullmatch(r"GET /v1alpha/events:watch\?after=(\S+) HTTP/1\.1", proxy.requests[1])
    assert after, proxy.requests
    assert after.group(1) in resumed_ids and resumed_ids.index(after.group(1)) >= resumed_ids.index(cursor)


def test_watch_events_filters_and_resumes_from_a_cursor(org: Org, active: ActiveAgent) -> None:
    listening = threading.Event()
    everything = Collector(org.client.watch_events(on_listening=listening.set), 6)
    assert listening.wait(WATCHDOG)
    review = org.client.submit_intent(active.identity, "open_account")
    allow = org.client.submit_intent(active.identity, "reference_noop")
    first = everything.join()[0]
    outcomes = Collector(org.client.watch_events(types=["DecisionCompleted", "HumanReviewRequested"], after=first.event_id), 2).join()
    assert [(e.event, e.data["decision_id"]) for e in outcomes] == [
        ("HumanReviewRequested", review.decision_id),
        ("DecisionCompleted", allow.decision_id),
    ]


def test_watch_events_never_retries_a_refusal(base_url: str, org: Org) -> None:
    reader_key = org.client.create_api_key("reader", ["DECISION_READ"]).api_key
    transport = CountingTransport()
    with MandateClient(base_url, api_key=reader_key, transport=transport, max_retries=6, backoff_base=0.01) as reader, MandateClient(
        base_url, api_key=org.sandbox.api_key, transport=transport, max_retries=6, backoff_base=0.01
    ) as admin:
        cases: List[Tuple[Iterator[EventEnvelope], type, int]] = [
            (reader.watch_events(), PermissionDeniedError, 403),
            (admin.watch_events(types=["NoSuchEvent"]), ValidationError, 422),
            (admin.watch_events(after="evt_0000000000000001_0_nope"), ValidationError, 422),
        ]
        for events, cls, status in cases:
            transport.calls.clear()
            with pytest.raises(cls) as err:
                next(events)
            assert err.value.status == status
            assert transport.calls == ["GET /v1alpha/events:watch"]


def test_watch_events_raises_transport_error_once_reconnections_are_spent() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    transport = CountingTransport()
    with MandateClient(f"http://127.0.0.1:{port}", api_key="k", transport=transport, backoff_base=0.001, backoff_cap=0.005) as client:
        with pytest.raises(TransportError) as err:
            next(client.watch_events(max_reconnects=2))
    assert (err.value.status, err.value.detail) == (0, "connection_failed")
    assert len(transport.calls) == 3


def test_wait_for_resolution_waits_on_the_stream_without_polling(base_url: str, org: Org, active: ActiveAgent) -> None:
    decision = org.client.submit_intent(active.identity, "wire_transfer", resource="account:DE89-3704")
    assert (decision.outcome, decision.status) == ("HUMAN_REVIEW", "PENDING")
    transport = CountingTransport()
    reads = lambda: [c for c in transport.calls if c.startswith("GET /v1/decisions/")]  # noqa: E731
    result: Dict[str, object] = {}
    with MandateClient(base_url, api_key=org.sandbox.api_key, transport=transport) as client:
        # An interval so short that polling would read many times while the review is pending.
        waiter = threading.Thread(target=lambda: result.update(final=client.wait_for_resolution(decision.decision_id, timeout=WATCHDOG, interval=0.001, agent=active.identity)))
        waiter.start()
        wait_until("the read when the stream listens", lambda: len(reads()) >= 1)
        reads_before_review = len(reads())
        org.client.review_decision(decision.decision_id, "rejected", "Not this quarter.")
        waiter.join(WATCHDOG)
    final = result["final"]
    assert getattr(final, "status") == "RESOLVED" and getattr(final, "resolution").resolution == "rejected"
    assert reads_before_review == 1
    assert len(reads()) == 2
    assert transport.calls[0] == "GET /v1alpha/events:watch"


def test_wait_for_resolution_falls_back_to_polling_without_events_read(base_url: str, org: Org, active: ActiveAgent) -> None:
    decision = org.client.submit_intent(active.identity, "open_account")
    reader_key = org.client.create_api_key("reader", ["DECISION_READ"]).api_key
    transport = CountingTransport()
    result: Dict[str, object] = {}
    with MandateClient(base_url, api_key=reader_key, transport=transport) as reader:
        waiter = threading.Thread(target=lambda: result.update(final=reader.wait_for_resolution(decision.decision_id, timeout=WATCHDOG, interval=0.02)))
        waiter.start()
        wait_until("two polls", lambda: len([c for c in transport.calls if c.startswith("GET /v1/decisions/")]) >= 2)
        org.client.review_decision(decision.decision_id, "approved", "ok")
        waiter.join(WATCHDOG)
    assert getattr(result["final"], "status") == "RESOLVED"
    assert transport.calls[0] == "GET /v1alpha/events:watch"
    assert transport.calls.count("GET /v1alpha/events:watch") == 1


class Receiver:
    """A real local HTTP receiver: records every POST (body bytes and headers) and answers 204."""

    def __init__(self) -> None:
        self.received: List[Tuple[bytes, Dict[str, str]]] = []
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                received.append((body, {k.lower(): v for k, v in self.headers.items()}))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/hooks"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def test_webhook_subscription_deliveries_verified_listed_redelivered_rotated_deleted(org: Org, active: ActiveAgent) -> None:
    client = org.client
    receiver = Receiver()
    try:
        hook = client.create_webhook(receiver.url, ["DecisionCompleted"], "python client")
        assert (hook.url, hook.events, hook.description, hook.state) == (receiver.url, ["DecisionCompleted"], "python client", "active")
        assert hook.secret and hook.secret.startswith("whsec_")
        assert [(w.webhook_id, w.secret) for w in client.list_webhooks()] == [(hook.webhook_id, None)]
        assert client.get_webhook(hook.webhook_id).secret is None

        decision = client.submit_intent(active.identity, "reference_noop")
        wait_until("the delivery", lambda: len(receiver.received) >= 1)
        body, headers = receiver.received[0]
        envelope = verify_webhook(body, headers, hook.secret)
        assert (envelope.event, envelope.data["decision_id"], envelope.data["outcome"]) == ("DecisionCompleted", decision.decision_id, "ALLOW")
        assert verify_webhook(body.decode(), headers, hook.secret) == envelope

        wait_until("the delivery recorded", lambda: [d.state for d in client.list_webhook_deliveries(hook.webhook_id)[0]] == ["delivered"])
        deliveries, next_token = client.list_webhook_deliveries(hook.webhook_id)
        assert next_token is None
        assert (deliveries[0].delivery_id, deliveries[0].event_id, deliveries[0].attempts[0].status) == (headers["webhook-id"], envelope.event_id, 204)
        client.redeliver_webhook_delivery(hook.webhook_id, deliveries[0].delivery_id)
        wait_until("the redelivery", lambda: len(receiver.received) >= 2)
        assert receiver.received[1][1]["webhook-id"] == headers["webhook-id"]

        rotated = client.rotate_webhook_secret(hook.webhook_id)
        assert rotated.secret and rotated.secret != hook.secret
        now = datetime.now(timezone.utc)
        signed = {"webhook-id": "msg_1", "webhook-timestamp": str(int(now.timestamp())), "webhook-signature": StandardWebhook(rotated.secret).sign("msg_1", now, body.decode())}
        assert verify_webhook(body, signed, rotated.secret).event_id == envelope.event_id
        with pytest.raises(WebhookVerificationError):
            verify_webhook(body, signed, hook.secret)

        client.delete_webhook(hook.webhook_id)
        with pytest.raises(NotFoundError):
            client.get_webhook(hook.webhook_id)
        with pytest.raises(ValidationError):
            client.create_webhook("ftp://example.com/x")
    finally:
        receiver.close()


def test_verify_webhook_refusals_each_with_its_detail() -> None:
    secret = "whsec_" + base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()
    other = "whsec_" + base64.b64encode(b"another secret of 32 bytes......").decode()
    body = json.dumps({"event": "DecisionCompleted", "event_id": "evt_1", "occurred_at": "2026-11-26T21:00:00.000Z", "data": {"decision_id": "dec_1"}})

    def headers_at(seconds: int, payload: str = body, key: str = secret) -> Dict[str, str]:
        at = datetime.fromtimestamp(seconds, tz=timezone.utc)
        return {"webhook-id": "msg_1", "webhook-timestamp": str(seconds), "webhook-signature": StandardWebhook(key).sign("msg_1", at, payload)}

    def refused(body_: str, headers: Dict[str, str]) -> str:
        with pytest.raises(WebhookVerificationError) as err:
            verify_webhook(body_, headers, secret)
        assert isinstance(err.value, MandateError) and err.value.status == 0
        return err.value.detail

    now = int(time.time())
    assert verify_webhook(body, headers_at(now), secret).raw == json.loads(body)
    assert refused(body.replace("dec_1", "dec_2"), headers_at(now)) == "webhook_signature_invalid"
    assert refused(body, headers_at(now, key=other)) == "webhook_signature_invalid"
    assert refused(body, {**headers_at(now), "webhook-id": "msg_2"}) == "webhook_signature_invalid"
    assert refused(body, {**headers_at(now), "webhook-signature": "garbage"}) == "webhook_signature_invalid"
    # Well past the 300 s tolerance either way, from the clock read at each call: 301 from a `now`
    # read earlier goes stale by itself when a second boundary passes between the two.
    assert refused(body, headers_at(int(time.time()) - 310)) == "webhook_timestamp_stale"
    assert refused(body, headers_at(int(time.time()) + 310)) == "webhook_timestamp_stale"
    assert refused(body, {**headers_at(now), "webhook-timestamp": "soon"}) == "webhook_timestamp_stale"
    unsigned = {k: v for k, v in headers_at(now).items() if k != "webhook-signature"}
    assert refused(body, unsigned) == "webhook_headers_missing"
    # Header names in any case.
    assert verify_webhook(body, {k.upper(): v for k, v in headers_at(now).items()}, secret).event_id == "evt_1"


def test_watch_events_resumes_after_an_ended_stream_a_503_and_a_silent_connection() -> None:
    """Against a stub SSE server: each kind of drop is resumed from the last event yielded."""

    def envelope(n: int) -> Dict[str, object]:
        return {"event": "AgentStateChanged", "event_id": f"evt_{n}", "occurred_at": "2026-11-26T21:00:00.000Z", "data": {"n": n}}

    def frame(n: int) -> bytes:
        return f"id: evt_{n}\nevent: AgentStateChanged\ndata: {json.dumps(envelope(n))}\n\n".encode()

    paths: List[str] = []
    release = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # the body ends when the connection closes

        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            paths.append(self.path)
            n = len(paths)
            if n == 2:
                body = json.dumps({"detail": "unavailable", "message": "Temporarily unavailable.", "request_id": "stub"}).encode()
                self.send_response(503)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            if n == 1:  # CRLF line ends, then the server ends the stream
                self.wfile.write(b": heartbeat\r\n\r\n" + frame(1) + frame(2))
            elif n == 3:  # then silent: the read timeout drops it
                self.wfile.write(b": heartbeat\n\n" + frame(3))
                self.wfile.flush()
                release.wait(WATCHDOG)
            else:
                self.wfile.write(b": heartbeat\n\n" + frame(4))
                self.wfile.flush()
                release.wait(WATCHDOG)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with MandateClient(f"http://127.0.0.1:{server.server_address[1]}", api_key="k", backoff_base=0.001, backoff_cap=0.005) as client:
            got = []
            for event in client.watch_events(types=["AgentStateChanged"], idle_timeout=0.3):
                got.append(event)
                if len(got) == 4:
                    break
    finally:
        release.set()
        server.shutdown()
        server.server_close()
    assert [e.raw for e in got] == [envelope(n) for n in (1, 2, 3, 4)]
    assert paths == [
        "/v1alpha/events:watch?types=AgentStateChanged",
        "/v1alpha/events:watch?types=AgentStateChanged&after=evt_2",
        "/v1alpha/events:watch?types=AgentStateChanged&after=evt_2",
        "/v1alpha/events:watch?types=AgentStateChanged&after=evt_3",
    ]


def test_an_error_of_on_listening_is_raised_as_is(org: Org) -> None:
    mine = RuntimeError("the caller's own failure")

    def fail() -> None:
        raise mine

    with pytest.raises(RuntimeError) as err:
        next(org.client.watch_events(on_listening=fail))
    assert err.value is mine
