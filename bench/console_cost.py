"""The operator console's cost (``sam3-agent console``) beside the node's, over rclpy (DDS on
loopback): a 1920x1080 rgb8 camera at 30 Hz into a node with the offline backends, measured in
turns over equal windows:
  - ``without``: the node alone (no console);
  - ``with``: the node, plus a console with one open page (a WebSocket client in this process
    that reads everything the page gets: the state and the live preview).
CPU of the node process and of the console process from /proc (user + system time of the
process and its children, via psutil) over each window, in % of one core; the turns alternate
``--rounds`` times (a shared machine's load then falls on both alike). Reported: each figure's
median, the console's % against the bound (10 % of a core), the node's ratio with / without the
console (its own costs unchanged: ~1.0), and the previews the page received per second.

    .venv/bin/python bench/console_cost.py [--window 6] [--rounds 2]
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
from common import (
    RESOLUTIONS,
    ROOT,
    command_line,
    median,
    process_cpu_s,
    wait_for,
    write_result,
)
from node_costs import make_image_msg, publish_for

from sam3_agent_ros.ros.dds import loopback_env  # noqa: E402  (after common sets sys.path)

NAMESPACE = "/bench_console"
IMAGE_TOPIC = f"{NAMESPACE}/image"
BOUND_PERCENT = 10.0


class Page:
    """An open page: a WebSocket client in a thread of its own, counting what arrives."""

    def __init__(self, url: str) -> None:
        self.url = url.split("?")[0].rstrip("/") + "/ws"
        self.origin = url.split("?")[0].rstrip("/")  # the page's own (no Origin: refused)
        self.images = 0
        self.states = 0
        self.connected = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self._thread.start()

    async def _run(self) -> None:
        import aiohttp

        async with aiohttp.ClientSession() as session, session.ws_connect(self.url,
                                                                       origin=self.origin) as ws:
            self.connected.set()
            while not self._stop.is_set():
                try:
                    message = await ws.receive(timeout=0.5)
                except asyncio.TimeoutError:
                    continue
                if message.type == aiohttp.WSMsgType.BINARY:
                    self.images += 1
                elif message.type == aiohttp.WSMsgType.TEXT:
                    self.states += 1
                else:
                    return

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)


def measure(processes: dict, publisher, msg, window: float) -> dict:
    publish_for(publisher, msg, 1.0)  # warm-up
    before = {name: process_cpu_s(p) for name, p in processes.items()}
    started = time.monotonic()
    publish_for(publisher, msg, window)
    elapsed = time.monotonic() - started
    return {name: 100.0 * (process_cpu_s(p) - before[name]) / elapsed
            for name, p in processes.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--window", type=float, default=6.0, help="measured seconds per turn")
    parser.add_argument("--rounds", type=int, default=2, help="turns of each kind")
    args = parser.parse_args(argv)
    os.environ.update(loopback_env())  # before rclpy.init: this process publishes the frames
    import rclpy
    from sensor_msgs.msg import Image

    from sam3_agent_ros.ros.qos import IMAGE_QOS
    from test.ros.helpers import NodeProcess

    rclpy.init()
    temp = Path(tempfile.mkdtemp(prefix="sam3_bench_console_"))
    child_env = dict(os.environ, PYTHONPATH=str(ROOT))
    child_env.pop("_ROS_WHEELS_BOOTSTRAP_COMPLETE", None)
    node = NodeProcess(NAMESPACE, {"image_qos": "sensor_data"}, temp, env=child_env)
    camera = rclpy.create_node("bench_console_camera")
    publisher = camera.create_publisher(Image, IMAGE_TOPIC, IMAGE_QOS["sensor_data"])
    msg = make_image_msg(*RESOLUTIONS["1080p"])
    turns: dict[str, list[dict]] = {"without": [], "with": []}
    pages_per_s: list[float] = []
    try:
        wait_for(lambda: publisher.get_subscription_count() >= 1, 60.0,
                 f"the node to subscribe (see {node.log_file})")
        time.sleep(1.0)
        node_ps = psutil.Process(node.process.pid)
        for _ in range(args.rounds):
            turns["without"].append(measure({"node": node_ps}, publisher, msg, args.window))
            console = subprocess.Popen(
                [sys.executable, "-m", "sam3_agent_ros.cli", "console", "--node",
                 f"{NAMESPACE}/sam3_agent", "--port", "0"], stdout=subprocess.PIPE, text=True,
                stderr=open(temp / "console.log", "ab"), env=child_env, cwd=ROOT)  # noqa: SIM115
            try:
                url = console.stdout.readline().strip().split(" ", 1)[-1]
                page = Page(url)
                page.connected.wait(30)
                wait_for(lambda: publisher.get_subscription_count() >= 2, 60.0,
                         "the console's preview subscription")
                images_before = page.images
                figures = measure({"node": node_ps, "console": psutil.Process(console.pid)},
                                  publisher, msg, args.window)
                pages_per_s.append((page.images - images_before) / (args.window + 1.0))
                turns["with"].append(figures)
                page.close()
            finally:
                console.terminate()
                console.wait(15)
            print(f"round: node alone {turns['without'][-1]['node']:.1f} %, with the console "
                  f"{figures['node']:.1f} %, console {figures['console']:.1f} % of a core, "
                  f"{pages_per_s[-1]:.1f} images/s to the page", flush=True)
    finally:
        node.stop()
        camera.destroy_node()
        rclpy.try_shutdown()
    node_without = median([t["node"] for t in turns["without"]])
    node_with = median([t["node"] for t in turns["with"]])
    console_percent = median([t["console"] for t in turns["with"]])
    data = {"command": command_line(), "resolution": "1920x1080", "rate_hz": 30.0,
            "window_s": args.window, "rounds": args.rounds, "bound_percent": BOUND_PERCENT,
            "console_cpu_percent": round(console_percent, 2),
            "node_cpu_percent_without": round(node_without, 2),
            "node_cpu_percent_with": round(node_with, 2),
            "node_ratio": round(node_with / node_without, 3) if node_without else None,
            "console_to_bound": round(console_percent / BOUND_PERCENT, 3),
            "page_images_per_s": round(median(pages_per_s), 2), "turns": turns}
    write_result("console_cost", data)
    print(f"console: {console_percent:.1f} % of a core (bound {BOUND_PERCENT:g} %: "
          f"x{data['console_to_bound']}); node {node_without:.1f} % alone, {node_with:.1f} % "
          f"with the console and an open page (x{data['node_ratio']}); the page got "
          f"{data['page_images_per_s']} previews/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
