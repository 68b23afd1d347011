"""What a forged ``/diagnostics`` flood costs the operator console (issue 34): a peer publishes
``--statuses`` statuses named under the node (``<node>: forged N``, ``--message-chars`` each) at
``--rate`` Hz; one open page (a WebSocket client in this process, with the page's Origin)
counts the bytes it receives. Reported per console: bytes/s to the page, its largest message,
and the console's RSS before the flood and at its end (psutil), over DDS on loopback. No node
is needed (the console keeps the statuses that carry the node's name).

``--before DIR`` runs the same flood against the console of another checkout first (e.g. an
export of the code before this change: ``git archive <commit> | tar -x -C DIR``) and prints the
two side by side.

    .venv/bin/python bench/console_flood.py [--window 8] [--statuses 5000] [--before DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
from common import ROOT, command_line, write_result

from sam3_agent_ros.ros.dds import loopback_env  # noqa: E402  (after common sets sys.path)

NODE = "/bench_flood/sam3_agent"


class Page:
    """An open page: a WebSocket client (with our page's Origin) counting bytes."""

    def __init__(self, url: str) -> None:
        base = url.split("?")[0].rstrip("/")
        query = url.split("?", 1)[1] if "?" in url else ""
        self.url = base + "/ws" + (f"?{query}" if query else "")
        self.origin = base
        self.bytes = 0
        self.largest = 0
        self.connected = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self._thread.start()

    async def _run(self) -> None:
        import aiohttp

        async with aiohttp.ClientSession() as session, session.ws_connect(
                self.url, origin=self.origin, max_msg_size=0) as ws:
            self.connected.set()
            while not self._stop.is_set():
                try:
                    message = await ws.receive(timeout=0.5)
                except asyncio.TimeoutError:
                    continue
                if message.type in (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY):
                    size = len(message.data)
                    self.bytes += size
                    self.largest = max(self.largest, size)
                else:
                    return

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)


def flood_message(statuses: int, chars: int):
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus

    msg = DiagnosticArray()
    msg.status = [DiagnosticStatus(level=DiagnosticStatus.ERROR, name=f"{NODE}: forged {i}",
                                   message="m" * chars) for i in range(statuses)]
    return msg


def run_one(checkout: Path, publisher, msg, args, temp: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=f"{checkout}:{checkout / 'demo'}")
    env.pop("_ROS_WHEELS_BOOTSTRAP_COMPLETE", None)
    console = subprocess.Popen(
        [sys.executable, "-m", "sam3_agent_ros.cli", "console", "--node", NODE, "--port", "0"],
        stdout=subprocess.PIPE, text=True, stderr=open(temp / "console.log", "ab"),  # noqa: SIM115
        env=env, cwd=checkout)
    try:
        url = console.stdout.readline().strip().split(" ", 1)[-1]
        page = Page(url)
        if not page.connected.wait(30):
            raise RuntimeError(f"the page did not connect to {url}")
        deadline = time.monotonic() + 30
        while publisher.get_subscription_count() < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)
        process = psutil.Process(console.pid)
        rss_before = process.memory_info().rss
        bytes_before, started = page.bytes, time.monotonic()
        period = 1.0 / args.rate
        while time.monotonic() - started < args.window:
            publisher.publish(msg)
            time.sleep(period)
        elapsed = time.monotonic() - started
        received = page.bytes - bytes_before
        rss_after = process.memory_info().rss
        page.close()
    finally:
        console.terminate()
        console.wait(15)
    return {"checkout": str(checkout), "bytes_per_s": round(received / elapsed),
            "largest_message_bytes": page.largest,
            "rss_before_mib": round(rss_before / 2**20, 1),
            "rss_after_mib": round(rss_after / 2**20, 1),
            "rss_growth_mib": round((rss_after - rss_before) / 2**20, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--window", type=float, default=8.0, help="seconds of flood")
    parser.add_argument("--statuses", type=int, default=5000)
    parser.add_argument("--message-chars", type=int, default=4000)
    parser.add_argument("--rate", type=float, default=2.0, help="flood messages per second")
    parser.add_argument("--before", type=Path, help="another checkout's console, run first")
    args = parser.parse_args(argv)
    os.environ.update(loopback_env())
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    rclpy.init()
    temp = Path(tempfile.mkdtemp(prefix="sam3_bench_flood_"))
    forger = rclpy.create_node("bench_flood_forger")
    publisher = forger.create_publisher(
        DiagnosticArray, "/diagnostics", QoSProfile(depth=10,
                                                    reliability=ReliabilityPolicy.RELIABLE))
    msg = flood_message(args.statuses, args.message_chars)
    runs = {}
    try:
        for name, checkout in (("before", args.before), ("after", ROOT)):
            if checkout is None:
                continue
            runs[name] = run_one(checkout.resolve(), publisher, msg, args, temp)
            r = runs[name]
            print(f"{name}: {r['bytes_per_s'] / 1e6:.3f} MB/s to the page, largest message "
                  f"{r['largest_message_bytes'] / 1e6:.3f} MB, console RSS "
                  f"{r['rss_before_mib']} -> {r['rss_after_mib']} MiB "
                  f"({r['rss_growth_mib']:+} MiB)", flush=True)
    finally:
        forger.destroy_node()
        rclpy.try_shutdown()
    write_result("console_flood", {"command": command_line(), "statuses": args.statuses,
                                   "message_chars": args.message_chars, "rate_hz": args.rate,
                                   "window_s": args.window, "runs": runs})
    return 0


if __name__ == "__main__":
    sys.exit(main())
