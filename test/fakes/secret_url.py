"""The credentials-in-URL attack of issue 17 item 8, shared by the tests of every place a URL shows.

``attack_url(host_port)`` is ``http://user:<PASSWORD>@<host_port>/v1?api-key=<KEY>``; after the
fix neither ``PASSWORD`` nor ``KEY`` may appear in any error, log, result, trace or eval file.
"""

from __future__ import annotations

import socket
from pathlib import Path

USER = "operator7"
PASSWORD = "pass-hunter2"
KEY = "K-9f3a7c1e"
SECRETS = (USER, PASSWORD, KEY)
ATTACK_URL_TEXT = f"http://{USER}:{PASSWORD}@llm.example:8000/v1?api-key={KEY}"


def attack_url(host_port: str) -> str:
    """The attack URL on ``host_port``."""
    return f"http://{USER}:{PASSWORD}@{host_port}/v1?api-key={KEY}"


def redacted_url(host_port: str) -> str:
    """How ``attack_url(host_port)`` is shown."""
    return f"http://***@{host_port}/v1?api-key=***"


def closed_port() -> str:
    """``127.0.0.1:<port>`` where nothing listens (connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


def leaks(text: str) -> list[str]:
    """The secrets of the attack URL found in ``text`` (empty when none)."""
    return [secret for secret in SECRETS if secret in text]


def leaks_in_files(folder: Path) -> dict[str, list[str]]:
    """``{relative path: secrets found}`` over every file under ``folder`` (binary ones too)."""
    found = {}
    for path in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
        text = path.read_bytes().decode("utf-8", errors="replace")
        secrets = leaks(text)
        if secrets:
            found[str(path.relative_to(folder))] = secrets
    return found
