"""console/access.py: loopback by default, a token for any other host, and what is refused."""

from __future__ import annotations

import pytest

from sam3_agent_ros.console.access import (
    UsageError,
    console_url,
    is_loopback,
    reachable_host,
    request_problem,
    resolve_token,
)


@pytest.mark.parametrize("host, loopback", [
    ("127.0.0.1", True), ("127.3.2.1", True), ("::1", True), ("[::1]", True),
    ("localhost", True), ("0.0.0.0", False), ("192.168.1.20", False), ("::", False),
    ("robot.local", False)])
def test_loopback(host, loopback):
    assert is_loopback(host) is loopback


def test_a_host_outside_loopback_gets_a_generated_token_and_loopback_none():
    assert resolve_token("127.0.0.1", None) is None
    generated = resolve_token("0.0.0.0", None)
    assert generated and len(generated) >= 24 and generated != resolve_token("0.0.0.0", None)
    assert resolve_token("0.0.0.0", "given-token") == "given-token"
    for bad in ("short", "has space inside", "x" * 300, "quote'token"):
        with pytest.raises(UsageError):
            resolve_token("127.0.0.1", bad)


def test_with_a_token_everything_without_it_is_refused():
    token = "the-right-token"
    assert request_problem(token, None, "10.0.0.5:8090").status == 401
    assert request_problem(token, "wrong-token", "10.0.0.5:8090").status == 401
    assert request_problem(token, token, "10.0.0.5:8090") is None
    assert request_problem(token, token, "10.0.0.5:8090", "http://10.0.0.5:8090",
                           is_socket=True) is None


def test_without_a_token_only_pages_naming_this_machine_and_our_origin_pass():
    assert request_problem(None, None, "127.0.0.1:8090") is None
    assert request_problem(None, None, "localhost:8090", "http://localhost:8090",
                           is_socket=True) is None
    # DNS rebinding: evil.example resolving to 127.0.0.1
    assert request_problem(None, None, "evil.example:8090").status == 403
    # another site's page opening our socket (cross-site WebSocket hijacking)
    assert request_problem(None, None, "127.0.0.1:8090", "http://evil.example",
                           is_socket=True).status == 403
    assert request_problem(None, None, "127.0.0.1:8090", "null", is_socket=True).status == 403


def test_a_socket_without_an_origin_header_is_refused_token_or_not():
    """Issue 34: a WebSocket with no Origin (a script, not our page) was accepted although
    docs/security.md says it is refused."""
    for token, given in ((None, None), ("the-right-token", "the-right-token")):
        for origin in (None, "", "  "):
            refusal = request_problem(token, given, "127.0.0.1:8090", origin, is_socket=True)
            assert refusal is not None and refusal.status == 403, (token, origin)
            assert "Origin" in refusal.reason
    # a plain page request carries no Origin and is fine
    assert request_problem(None, None, "127.0.0.1:8090", None) is None


def test_a_wildcard_bind_prints_the_address_other_machines_reach():
    """Issue 33: ``--host 0.0.0.0`` printed http://0.0.0.0:8090/, which no other machine can
    open: the host printed is the routed interface's address."""
    assert reachable_host("0.0.0.0", lambda family: "192.168.1.20") == "192.168.1.20"
    assert reachable_host("::", lambda family: "fd00::5") == "fd00::5"
    assert reachable_host("0.0.0.0", lambda family: None) == "127.0.0.1"  # no route off here
    assert reachable_host("192.168.1.7", lambda family: "10.0.0.1") == "192.168.1.7"
    assert reachable_host("127.0.0.1") == "127.0.0.1"
    found = reachable_host("0.0.0.0")  # this machine, for real: never the wildcard
    assert found != "0.0.0.0" and found


def test_the_printed_url():
    assert console_url("127.0.0.1", 8090, None) == "http://127.0.0.1:8090/"
    assert console_url("0.0.0.0", 80, "tok-12345") == "http://0.0.0.0:80/?token=tok-12345"
    assert console_url("::1", 8090, None) == "http://[::1]:8090/"
