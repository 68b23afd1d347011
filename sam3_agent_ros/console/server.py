"""The console's web side (aiohttp): ``GET /`` the page, ``GET /ws`` one WebSocket per tab.

Every request passes ``access.request_problem`` first (the token, the Host, a socket's Origin).
A socket gets the whole state at once, then what changes: JSON text messages for the state,
binary messages for images (one tag byte, ``hub.IMAGE_SOURCES``, then the JPEG as the node sent
it; the tag alone: that image is no longer current). At most 20 state messages a second, each
strict JSON (``views.page_json``). A tab that reads slowly gets the newest of each, never a
backlog (``hub.Feed``). What a tab sends is checked (``commands.parse_command``) and handed to
the ROS side; when the tab closes its goals are cancelled. aiohttp is imported only here,
inside ``make_app``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import uuid
from typing import Any

from sam3_agent_ros.console.access import request_problem
from sam3_agent_ros.console.commands import CommandRefused, parse_command
from sam3_agent_ros.console.hub import IMAGE_SOURCES, Feed, Hub
from sam3_agent_ros.console.page import page_html
from sam3_agent_ros.console.views import page_json

LOG = logging.getLogger("sam3_agent_ros.console")
MAX_PAGES = 32  # open sockets at once
MIN_IMAGE_INTERVAL_S = 0.1  # a tab gets at most 10 images a second
MIN_STATE_INTERVAL_S = 0.05  # and at most 20 state messages (each the newest of every key)
MAX_MESSAGE_BYTES = 16_384


def make_app(hub: Hub, link: Any, token: str | None) -> Any:
    from aiohttp import WSMsgType, web

    @web.middleware
    async def guard(request: web.Request, handler: Any) -> web.StreamResponse:
        refusal = request_problem(token, request.query.get("token"), request.host,
                                  request.headers.get("Origin"), is_socket=request.path == "/ws")
        if refusal is not None:
            return web.Response(status=refusal.status, text=refusal.reason + "\n")
        response = await handler(request)
        response.headers["Cache-Control"] = "no-store"
        response.headers["Referrer-Policy"] = "no-referrer"  # the token is in the URL
        response.headers["X-Content-Type-Options"] = "nosniff"
        return response

    async def index(request: web.Request) -> web.Response:
        nonce = secrets.token_urlsafe(16)
        csp = (f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; "
               "img-src blob:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
               "form-action 'none'")
        return web.Response(text=page_html(nonce), content_type="text/html",
                            headers={"Content-Security-Policy": csp})

    async def socket(request: web.Request) -> web.StreamResponse:
        if hub.pages >= MAX_PAGES:
            return web.Response(status=503, text=f"at most {MAX_PAGES} open pages\n")
        ws = web.WebSocketResponse(heartbeat=10.0, max_msg_size=MAX_MESSAGE_BYTES)
        await ws.prepare(request)
        loop = asyncio.get_running_loop()
        changed = asyncio.Event()

        def wake() -> None:  # from the ROS thread too
            try:
                loop.call_soon_threadsafe(changed.set)
            except RuntimeError:  # the loop closed: the console is ending
                pass
        feed = Feed(wake)
        page = uuid.uuid4().hex
        hub.attach(feed)
        sender = asyncio.create_task(_send(ws, hub, feed, changed))
        try:
            async for message in ws:
                if message.type != WSMsgType.TEXT:
                    continue
                try:
                    command = parse_command(message.data, link.limits)
                except CommandRefused as exc:
                    await ws.send_str(json.dumps({"notice": {"text": f"refused: {exc}"}}))
                    continue
                if not link.submit(page, command):
                    await ws.send_str(json.dumps({"notice": {"text": "busy: try again"}}))
        finally:
            hub.detach(feed)
            link.submit(page, None)  # its goals are cancelled
            sender.cancel()
        return ws

    app = web.Application(middlewares=[guard], client_max_size=MAX_MESSAGE_BYTES)
    app.router.add_get("/", index)
    app.router.add_get("/ws", socket)
    return app


async def _send(ws: Any, hub: Hub, feed: Feed, changed: asyncio.Event) -> None:
    try:
        while not ws.closed:
            await changed.wait()
            changed.clear()
            state, images = hub.take(feed)
            if state:
                await ws.send_str(page_json({"state": state}))  # strict JSON, never Infinity
            for source, jpeg in images.items():  # an empty one: the page forgets its image
                await ws.send_bytes(bytes([IMAGE_SOURCES.index(source)]) + jpeg)
            await asyncio.sleep(MIN_IMAGE_INTERVAL_S if images else MIN_STATE_INTERVAL_S)
    except (ConnectionError, RuntimeError) as exc:  # the tab went away meanwhile
        LOG.debug("console: a page's socket closed: %s", exc)
