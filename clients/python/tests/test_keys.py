"""Agent keys: generated locally, PKCS#8 PEM files readable by their owner only."""

from __future__ import annotations

import base64
import os
import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from mandate_client import AgentKey, bound_constraints, js_number


def test_save_load_round_trip_with_owner_only_permissions(tmp_path: Path) -> None:
    key = AgentKey.generate()
    path = tmp_path / "agent.pem"
    key.save(path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert path.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    with pytest.raises(FileExistsError):
        key.save(path)
    loaded = AgentKey.load(path)
    assert loaded.public_key == key.public_key
    assert loaded.sign(b"x") == key.sign(b"x")  # Ed25519 is deterministic

    os.chmod(path, 0o644)
    AgentKey.generate().save(path, overwrite=True)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_load_or_create_is_stable(tmp_path: Path) -> None:
    path = tmp_path / "k.pem"
    assert AgentKey.load_or_create(path).public_key == AgentKey.load_or_create(path).public_key


def test_wire_forms() -> None:
    key = AgentKey.generate()
    prefix, encoding, b64 = key.public_key.split(":")
    assert (prefix, encoding) == ("ed25519", "base64")
    raw = base64.b64decode(b64, validate=True)
    assert len(raw) == 32
    signature = base64.b64decode(key.sign("GET /v1/decisions/d\n2030-01-01T00:00:00.000Z"), validate=True)
    assert len(signature) == 64
    Ed25519PublicKey.from_public_bytes(raw).verify(signature, "GET /v1/decisions/d\n2030-01-01T00:00:00.000Z".encode())
    pem = key.to_pem()
    assert isinstance(serialization.load_pem_private_key(pem, password=None).public_key(), Ed25519PublicKey)


def test_bound_constraints_write_amounts_as_javascript_does() -> None:
    assert bound_constraints(amount=5.0, currency="USD") == {"amount": "5", "currency": "USD"}
    assert bound_constraints(amount=12.5, counterparty="ACME") == {"amount": "12.5", "counterparty": "ACME"}
    assert [js_number(v) for v in (5, 0.1, 1e-7, 0.00001, 1e21, 1e16, 123456789.125)] == [
        "5", "0.1", "1e-7", "0.00001", "1e+21", "10000000000000000", "123456789.125",
    ]


def test_load_or_create_started_many_times_at_once_gives_every_caller_the_same_key(tmp_path: Path) -> None:
    for round_ in range(10):
        path = tmp_path / f"race-{round_}.pem"
        with ThreadPoolExecutor(max_workers=16) as pool:
            keys = list(pool.map(lambda _: AgentKey.load_or_create(path), range(16)))
        assert len({k.public_key for k in keys}) == 1, f"round {round_}"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    # Nothing is left beside the key files.
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_an_overwritten_key_file_is_owner_only_whatever_mode_the_old_one_had(tmp_path: Path) -> None:
    path = tmp_path / "wide.pem"
    path.write_text("old")
    path.chmod(0o644)
    key = AgentKey.generate()
    key.save(path, overwrite=True)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert AgentKey.load(path).public_key == key.public_key
