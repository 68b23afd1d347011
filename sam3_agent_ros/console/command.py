"""``sam3-agent console [--node NAME] [--host HOST] [--port PORT] [--token TOKEN]``
(interface §10): the operator console of a running node, in the browser.

It binds the port first (a port in use: one line, exit 2), starts the ROS side, prints one stdout
line ``console: http://HOST:PORT/`` (with ``?token=...`` when a token is in force; HOST is the
address other machines reach this one at when it serves on every address) and serves
until Ctrl-C / SIGTERM. DDS is left as the user set it up (``--loopback`` keeps it on this
machine, as for ``sam3-agent ask``).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import socket
import sys
from typing import Any

from sam3_agent_ros.console.access import UsageError, console_url, reachable_host, resolve_token

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
LOG = logging.getLogger("sam3_agent_ros.console")


def register(subparsers: Any) -> None:
    console = subparsers.add_parser(
        "console", help="the operator console of a running node, in the browser",
        description="Serve an operator console for a running sam3_agent_node: the camera and "
                    "the answers' overlays, ask / correct / follow, the agent's phases and "
                    "reasoning as they stream, standing concepts and the node's health "
                    "(docs/console.md). Exit status: 0 after Ctrl-C, 2 on bad usage or a port "
                    "in use.")
    console.add_argument("--node", default="/sam3_agent",
                         help="the node's fully qualified name (default /sam3_agent)")
    console.add_argument("--host", default="127.0.0.1",
                         help="address to serve on (default 127.0.0.1; any other needs a token: "
                              "one is generated when --token is not given)")
    console.add_argument("--port", type=int, default=8090, help="port (default 8090; 0: any)")
    console.add_argument("--token", help="required in every request (?token=...)")
    console.add_argument("--image-topic",
                         help="the camera topic of the live preview (default: the one the node "
                              "subscribes, found on the ROS graph, remappings included)")
    console.add_argument("--loopback", action="store_true",
                         help="keep DDS on this machine (127.0.0.1 only)")
    console.set_defaults(handler=cmd_console)


def node_name(text: str) -> str:
    name = "/" + text.strip().strip("/")
    parts = name[1:].split("/")
    if name == "/" or not all(p and (p[0].isalpha() or p[0] == "_") and
                              all(c.isalnum() or c == "_" for c in p) for p in parts):
        raise UsageError(f"--node: not a ROS node name: {text[:80]!r}")
    return name


def bind(host: str, port: int) -> socket.socket:
    if not 0 <= port <= 65535:
        raise UsageError(f"--port: {port} is not a port (0-65535)")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise UsageError(f"--host: cannot resolve {host[:80]!r} ({exc.strerror})") from exc
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot serve on {host}:{port}: {exc.strerror} (another console? "
                         "choose --port)") from exc
    sock.listen(64)
    sock.setblocking(False)
    return sock


def cmd_console(args: argparse.Namespace) -> int:
    try:
        name = node_name(args.node)
        token = resolve_token(args.host, args.token)
        sock = bind(args.host, args.port)
    except UsageError as exc:
        print(f"sam3-agent console: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        import aiohttp  # noqa: F401 (fail early, clearly)
    except ImportError:
        print("sam3-agent console: aiohttp is not installed (make setup)", file=sys.stderr)
        return EXIT_FAILED
    if args.loopback:
        from sam3_agent_ros.ros.dds import apply_loopback_env

        apply_loopback_env()
    from sam3_agent_ros.console.hub import Hub
    from sam3_agent_ros.console.ros_link import RosLink

    hub = Hub()
    link = RosLink(hub, name, args.image_topic)  # None: the topic the node subscribes
    try:
        link.start()
    except RuntimeError as exc:
        print(f"sam3-agent console: {exc}", file=sys.stderr)
        sock.close()
        return EXIT_FAILED
    try:
        asyncio.run(_serve(hub, link, token, sock, args.host))
    except KeyboardInterrupt:
        pass
    finally:
        link.stop()
        sock.close()
    return EXIT_OK


async def _serve(hub: Any, link: Any, token: str | None, sock: socket.socket, host: str) -> None:
    from aiohttp import web

    from sam3_agent_ros.console.server import make_app

    runner = web.AppRunner(make_app(hub, link, token), access_log=None, handle_signals=False)
    await runner.setup()
    await web.SockSite(runner, sock, shutdown_timeout=1.0).start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    port = sock.getsockname()[1]
    shown = reachable_host(host)  # 0.0.0.0 / ::: the address another machine can open
    print(f"console: {console_url(shown, port, token)}", flush=True)
    if shown != host:
        LOG.info("console: serving on every address of this machine (%s); the URL above "
                 "names the one other machines reach it at", host)
    LOG.info("console of %s: open the URL above in a browser; Ctrl-C ends it", link.node_name)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
