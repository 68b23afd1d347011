"""console/server.py with a recording stand-in for the ROS side (no ROS): the token, Host and
Origin rules on real HTTP and sockets, the page's headers, requests checked before they reach
ROS, and a closed tab's goals cancelled."""

from __future__ import annotations

import asyncio
import json

import pytest

from sam3_agent_ros.console.commands import Command, Limits
from sam3_agent_ros.console.hub import Hub

aiohttp = pytest.importorskip("aiohttp")
from aiohttp.test_utils import TestClient, TestServer  # noqa: E402

from sam3_agent_ros.console.server import make_app  # noqa: E402


class RecordingLink:
    limits = Limits()

    def __init__(self) -> None:
        self.submitted: list[tuple[str, Command | None]] = []

    def submit(self, page: str, command: Command | None) -> bool:
        self.submitted.append((page, command))
        return True


def origin_of(client: TestClient) -> str:
    """The Origin our own page's socket carries (the server's scheme, host and port)."""
    return f"http://{client.host}:{client.port}"


def serve(token: str | None, check) -> None:
    async def main() -> None:
        hub, link = Hub(), RecordingLink()
        hub.set("connection", {"state": "waiting", "message": "waiting for the node /n"})
        client = TestClient(TestServer(make_app(hub, link, token)))
        await client.start_server()
        try:
            await check(client, hub, link)
        finally:
            await client.close()
    asyncio.run(main())


def test_a_token_is_required_on_every_request_and_socket():
    async def check(client, hub, link):
        for path in ("/", "/ws", "/?token=wrong", "/nothing"):
            assert (await client.get(path)).status == 401
        page = await client.get("/?token=tok-123456")
        assert page.status == 200
        assert "script-src 'nonce-" in page.headers["Content-Security-Policy"]
        assert page.headers["Referrer-Policy"] == "no-referrer"
        ws = await client.ws_connect("/ws?token=tok-123456", origin=origin_of(client))
        state = json.loads((await ws.receive()).data)["state"]
        assert state["connection"]["message"] == "waiting for the node /n"
        await ws.close()
    serve("tok-123456", check)


def test_without_a_token_other_hosts_and_other_sites_are_refused():
    async def check(client, hub, link):
        assert (await client.get("/")).status == 200
        assert (await client.get("/", headers={"Host": "evil.example"})).status == 403
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await client.ws_connect("/ws", headers={"Origin": "http://evil.example"})
        assert refused.value.status == 403
    serve(None, check)


def test_a_socket_without_an_origin_is_refused():
    """Issue 34: a WebSocket with no Origin header (a script on this machine, not the page) was
    accepted, with a token or without one."""
    async def check(client, hub, link):
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await client.ws_connect("/ws?token=tok-123456")
        assert refused.value.status == 403
        ws = await client.ws_connect("/ws?token=tok-123456", origin=origin_of(client))
        await ws.close()
    serve("tok-123456", check)


def test_a_page_is_sent_strict_json_even_for_non_finite_numbers():
    """Issue 33: ``Infinity`` in a message made the page's JSON.parse throw (the answer never
    showed)."""
    async def check(client, hub, link):
        hub.set("result", {"masks": [{"position": {"x": float("inf"), "y": float("nan")}}]})
        ws = await client.ws_connect("/ws", origin=origin_of(client))
        text = (await ws.receive()).data
        state = json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} sent"))
        assert state["state"]["result"]["masks"][0]["position"] == {"x": None, "y": None}
        await ws.close()
    serve(None, check)


def test_requests_are_checked_and_a_closed_tab_cancels_its_goals():
    async def check(client, hub, link):
        ws = await client.ws_connect("/ws", origin=origin_of(client))
        await ws.receive()  # the state
        await ws.send_str(json.dumps({"type": "set_parameter", "name": "llm.base_url"}))
        notice = json.loads((await ws.receive()).data)["notice"]["text"]
        assert notice.startswith("refused: unknown request")
        await ws.send_str(json.dumps({"type": "ask", "query": "the cup", "follow": True}))
        for _ in range(50):
            if link.submitted:
                break
            await asyncio.sleep(0.02)
        page, command = link.submitted[0]
        assert command == Command("ask", "the cup", follow=True)
        await ws.close()
        for _ in range(50):
            if len(link.submitted) == 2:
                break
            await asyncio.sleep(0.02)
        assert link.submitted[1] == (page, None)  # the tab closed: its goals are cancelled
    serve(None, check)
