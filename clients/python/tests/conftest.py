"""Fixtures of the client suite: a live server (MANDATE_BASE_URL) and request counting."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from typing import Iterator, List

import httpx
import pytest

from mandate_client import Agent, AgentIdentity, AgentKey, MandateClient, Principal, Sandbox


class CountingTransport(httpx.HTTPTransport):
    """An httpx transport that records every request it sends as "METHOD /path"."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: List[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.calls.append(f"{request.method} {request.url.path}")
        return super().handle_request(request)


@pytest.fixture(scope="session")
def base_url() -> str:
    url = os.environ.get("MANDATE_BASE_URL")
    if not url:
        pytest.skip("MANDATE_BASE_URL is not set: these tests need a live Mandate service")
    return url


def unique_email(prefix: str = "py") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}@example.com"


@dataclass
class Org:
    client: MandateClient
    sandbox: Sandbox
    principal: Principal
    transport: CountingTransport


@dataclass
class ActiveAgent:
    agent: Agent
    key: AgentKey
    identity: AgentIdentity


@pytest.fixture
def org(base_url: str) -> Iterator[Org]:
    """A fresh sandbox organization, a client with its key (counting requests) and a principal."""
    transport = CountingTransport()
    with MandateClient(base_url, transport=transport, backoff_base=0.01) as anonymous:
        sandbox = anonymous.create_sandbox(unique_email())
        with anonymous.with_api_key(sandbox.api_key) as client:
            principal = client.create_principal("Accounts Payable", "role")
            yield Org(client, sandbox, principal, transport)


@pytest.fixture
def active(org: Org) -> ActiveAgent:
    key = AgentKey.generate()
    agent = org.client.register_agent("py-agent", org.principal.principal_id, key)
    org.client.activate(agent)
    return ActiveAgent(agent, key, agent.identity(key))
