"""An agent's Ed25519 key, generated locally: only the public key leaves the machine.

Keys are saved as standard PKCS#8 PEM files with 0600 permissions (the same
files the TypeScript client writes and OpenSSL reads), so one private key means
one agent identity whichever client registers it.
"""

from __future__ import annotations

import base64
import os
import tempfile
from typing import Union

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

__all__ = ["AgentKey"]

PathLike = Union[str, "os.PathLike[str]"]


class AgentKey:
    """An Ed25519 key pair held by an agent; sign with it, upload only :attr:`public_key`."""

    def __init__(self, private_key: Ed25519PrivateKey) -> None:
        self._private_key = private_key
        self.public_key_bytes: bytes = private_key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )

    @classmethod
    def generate(cls) -> "AgentKey":
        """A fresh key from the operating system's CSPRNG."""
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def from_seed(cls, seed: bytes) -> "AgentKey":
        """The key whose 32-byte private seed is ``seed``."""
        return cls(Ed25519PrivateKey.from_private_bytes(seed))

    @classmethod
    def from_pem(cls, pem: bytes) -> "AgentKey":
        key = serialization.load_pem_private_key(pem, password=None)
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError("the PEM data does not hold an Ed25519 private key")
        return cls(key)

    @classmethod
    def load(cls, path: PathLike) -> "AgentKey":
        """Reads a key saved by :meth:`save` (or by ``openssl genpkey -algorithm ed25519``)."""
        with open(path, "rb") as f:
            return cls.from_pem(f.read())

    @classmethod
    def load_or_create(cls, path: PathLike) -> "AgentKey":
        """Loads the key at ``path``, or generates and saves one there.

        The same file always means the same agent: registering with it again is
        idempotent.
        """
        try:
            return cls.load(path)
        except FileNotFoundError:
            pass
        key = cls.generate()
        try:
            key.save(path)
        except FileExistsError:  # another process created it first: use theirs
            return cls.load(path)
        return key

    @property
    def public_key(self) -> str:
        """The public key in the wire form ``ed25519:base64:<standard base64 of 32 bytes>``."""
        return "ed25519:base64:" + base64.b64encode(self.public_key_bytes).decode("ascii")

    def to_pem(self) -> bytes:
        """The private key as PKCS#8 PEM. Treat it as a secret."""
        return self._private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    def save(self, path: PathLike, *, overwrite: bool = False) -> None:
        """Writes the private key to a file readable by its owner only (0600).

        Refuses to replace an existing file unless ``overwrite`` is true. The key is
        written whole to a new file beside ``path`` first, then put in place at once
        (a hard link refuses an existing file, a rename replaces it), so no reader,
        another process running ``load_or_create`` included, sees a half-written key.
        """
        target = os.fspath(path)
        fd, temp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(target)), prefix=f".{os.path.basename(target)}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:  # mkstemp creates it 0600
                f.write(self.to_pem())
                f.flush()
                os.fsync(f.fileno())
            if overwrite:
                os.replace(temp, target)
            else:
                os.link(temp, target)
        finally:
            if os.path.lexists(temp):
                os.unlink(temp)

    def sign(self, message: Union[bytes, str]) -> str:
        """Standard base64 of the 64-byte Ed25519 signature over ``message`` (a str is signed as UTF-8)."""
        data = message.encode("utf-8") if isinstance(message, str) else message
        return base64.b64encode(self._private_key.sign(data)).decode("ascii")

    def __repr__(self) -> str:
        return f"AgentKey({self.public_key})"
