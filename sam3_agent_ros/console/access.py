"""Who may use the console (pure): loopback by default; any other host needs a token.

- ``resolve_token(host, token)``: the token in force (a generated one for a host outside the
  loopback range when none was given), or None.
- ``request_problem(...)``: why an HTTP request or a socket is refused (401 without the right
  token; 403 for a Host header that is not ours, which stops DNS rebinding, and for a socket
  opened from another site's page or with no ``Origin`` at all, which stops cross-site
  WebSocket hijacking and scripts that forge no browser's header), or None.
- ``reachable_host(host, ...)``: the address another machine can type for a console bound to
  every address (``0.0.0.0`` / ``::``): the one of the interface that routes off this machine.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
import secrets
import socket
from collections.abc import Callable
from dataclasses import dataclass

TOKEN_PATTERN = re.compile(r"[A-Za-z0-9._~-]{8,256}")
LOOPBACK_NAMES = ("localhost",)


class UsageError(ValueError):
    """A bad command-line value (exit status 2), with a message that says what to give."""


def is_loopback(host: str) -> bool:
    """``127.0.0.0/8``, ``::1`` and ``localhost`` are loopback; anything else is not."""
    host = host.strip().strip("[]").lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def resolve_token(host: str, token: str | None) -> str | None:
    """The token in force: the given one (checked), a generated one for a host outside the
    loopback range, else None (loopback without ``--token``)."""
    if token is not None:
        if not TOKEN_PATTERN.fullmatch(token):
            raise UsageError("--token: 8 to 256 characters of A-Z a-z 0-9 . _ ~ -")
        return token
    return None if is_loopback(host) else secrets.token_urlsafe(24)


@dataclass(frozen=True)
class Refusal:
    status: int  # 401 or 403
    reason: str


def request_problem(token: str | None, given: str | None, host_header: str | None,
                    origin: str | None = None, is_socket: bool = False) -> Refusal | None:
    """Why a request is refused, or None. ``given``: the ``token`` query parameter;
    ``host_header``: the request's Host; ``origin``: a socket's Origin header; ``is_socket``:
    the request opens the WebSocket (the one that changes state): it must come from our own
    page, so a missing Origin, ``null`` or another site's is refused whatever the token."""
    if token is not None and not (given and hmac.compare_digest(given.encode(), token.encode())):
        return Refusal(401, "a token is required: open the URL the console printed")
    name = _host_name(host_header or "")
    if token is None and not is_loopback(name):
        # Loopback without a token: only pages that name this machine (no rebinding).
        return Refusal(403, "this console answers only to localhost / 127.0.0.1")
    if not is_socket:
        return None
    if origin is None or not origin.strip():
        return Refusal(403, "a socket without an Origin header is refused (open the page)")
    if origin == "null":
        return Refusal(403, "a socket from a page without an origin is refused")
    if not host_header or origin.lower() not in (f"http://{host_header}".lower(),
                                                 f"https://{host_header}".lower()):
        return Refusal(403, "a socket from another site's page is refused")
    return None


def _host_name(host_header: str) -> str:
    """``127.0.0.1:8090`` -> ``127.0.0.1``; ``[::1]:8090`` -> ``::1``."""
    if host_header.startswith("["):
        return host_header[1:].split("]", 1)[0]
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


def console_url(host: str, port: int, token: str | None) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/" + (f"?token={token}" if token else "")


WILDCARD_HOSTS = ("0.0.0.0", "::", "")
# Any address off this machine: connecting a UDP socket sends nothing, it only asks the
# kernel's routing table which local address would be used.
ROUTE_PROBES: dict[int, str] = {socket.AF_INET: "192.0.2.1",  # TEST-NETs
                               socket.AF_INET6: "2001:db8::1"}


def routed_address(family: int) -> str | None:
    """The local address of the interface that routes off this machine, or None."""
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.connect((ROUTE_PROBES[family], 9))
            address = probe.getsockname()[0]
    except (OSError, KeyError):
        return None
    return None if is_loopback(address) else address


def reachable_host(host: str,
                   route: Callable[[int], str | None] = routed_address) -> str:
    """The host to print in the URL: the bound one, except for a wildcard bind (every address),
    where it is the address other machines reach this one at (the routed interface's; the
    loopback address when this machine has no route off it)."""
    if host.strip().strip("[]") not in WILDCARD_HOSTS:
        return host
    ipv6 = ":" in host
    found = route(socket.AF_INET6 if ipv6 else socket.AF_INET)
    return found or ("::1" if ipv6 else "127.0.0.1")
