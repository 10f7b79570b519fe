#!/usr/bin/env python3
"""Creates clients/python/.venv with the client (editable) and its test and gRPC extras.

Safe to run concurrently (a file lock) and cheap to run again: it reinstalls
only when pyproject.toml or the Python version changed since the last
successful install. Prints the venv's python executable on the last line.

Usage: python3 clients/python/scripts/ensure_venv.py
"""

from __future__ import annotations

import fcntl
import hashlib
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv"
STAMP = VENV / ".mandate-installed"
EXTRAS = "test,grpc"


def wanted() -> str:
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes())
    digest.update(f"{sys.version}|{EXTRAS}".encode())
    return digest.hexdigest()


def main() -> int:
    python = VENV / "bin" / "python"
    with open(ROOT / ".venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if python.exists() and STAMP.exists() and STAMP.read_text() == wanted():
            print(python)
            return 0
        started = time.monotonic()
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        pip = [str(python), "-m", "pip", "--disable-pip-version-check", "install", "--quiet"]
        subprocess.run([*pip, "-e", f"{ROOT}[{EXTRAS}]"], check=True)
        STAMP.write_text(wanted())
        print(f"installed {VENV} in {time.monotonic() - started:.1f} s", file=sys.stderr)
        print(python)
    return 0


if __name__ == "__main__":
    sys.exit(main())
