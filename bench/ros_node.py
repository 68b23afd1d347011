"""The ROS node's own costs, over real rclpy with DDS on loopback (offline backends).

1. Query round trip: publish a query on ``query`` -> its result received on ``~/result``
   (a camera publishes 640x480 rgb8 at 15 Hz meanwhile).
2. CPU of the node process (% of one core, psutil) while it receives 640x480 rgb8 at 30 Hz and
   no query runs, next to a bare rclpy subscriber of the same topic (same QoS, a callback that
   only keeps the message) measured in the same run; plus the idle node without images.

    .venv/bin/python bench/ros_node.py [--queries 30] [--seconds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
from common import ROOT, write_result

from sam3_agent_demo.domains import apply_reserved_loopback_env

apply_reserved_loopback_env()  # before rclpy creates any participant

from sam3_agent_demo.scene import render_scene  # noqa: E402
from sam3_agent_ros.ros.conversions import rgb8_image  # noqa: E402
from test.ros.helpers import Camera, Harness, NodeProcess  # noqa: E402

NS = "/bench"
BARE_SUBSCRIBER = """
import sys, rclpy
from rclpy.qos import qos_profile_sensor_data, QoSProfile, ReliabilityPolicy, HistoryPolicy
from sensor_msgs.msg import Image
rclpy.init()
node = rclpy.create_node("bare_subscriber")
received = []
qos = QoSProfile(reliability=ReliabilityPolicy.BEST_EFFORT, history=HistoryPolicy.KEEP_LAST,
                 depth=1)
latest = [None]
def on_image(msg):
    latest[0] = msg
    received.append(1)
node.create_subscription(Image, sys.argv[1], on_image, qos)
try:
    rclpy.spin(node)
except BaseException:
    pass
print(len(received), flush=True)
"""


def cpu_percent(process: psutil.Process, seconds: float) -> float:
    before = process.cpu_times()
    time.sleep(seconds)
    after = process.cpu_times()
    used = (after.user - before.user) + (after.system - before.system)
    return 100.0 * used / seconds


def round_trips(harness: Harness, count: int) -> tuple[list[float], list[float]]:
    """Round trips (ms) and the agent's own ``timings.total_s`` (ms) of ``count`` queries."""
    times, agent = [], []
    for index in range(count):
        query_id = f"rt-{index}"
        sent = time.monotonic()
        harness.send_query(NS, {"id": query_id, "query": "the leftmost blue object"})
        result = harness.wait_result(NS, query_id, timeout=30)
        received = [r.at for r in harness._topics[f"{NS}/sam3_agent/result"].items
                    if json.loads(r.msg.data)["query_id"] == query_id][0]
        times.append((received - sent) * 1000.0)
        agent.append(result["timings"]["total_s"] * 1000.0)
    return times, agent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_ros_node_"))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    node = NodeProcess(NS, {}, tmp, env)
    harness = Harness("bench_ros_node")
    bare = None
    try:
        harness.listen(f"{NS}/sam3_agent/result")
        harness.wait_state(node.name, "active", timeout=60)
        harness.wait_subscribed(f"{NS}/query")
        process = psutil.Process(node.process.pid)
        frame = rgb8_image(render_scene().rgb)

        idle = cpu_percent(process, args.seconds)
        with Camera(harness, f"{NS}/image", frame, rate_hz=15.0):
            time.sleep(0.5)
            harness.send_query(NS, {"id": "warm-up", "query": "the leftmost blue object"})
            harness.wait_result(NS, "warm-up", timeout=30)
            times, agent_ms = round_trips(harness, args.queries)

        bare = subprocess.Popen([sys.executable, "-c", BARE_SUBSCRIBER, f"{NS}/image"],
                                stdout=subprocess.PIPE, text=True, env=env)
        bare_process = psutil.Process(bare.pid)
        image_pub = harness.publisher(f"{NS}/image", type(frame))
        harness.wait_for(lambda: image_pub.get_subscription_count() >= 2, 30, "2 subscribers")
        with Camera(harness, f"{NS}/image", frame, rate_hz=30.0) as camera:
            time.sleep(1.0)
            results = {}

            def measure(name, proc):
                results[name] = cpu_percent(proc, args.seconds)

            threads = [threading.Thread(target=measure, args=("node", process)),
                       threading.Thread(target=measure, args=("bare", bare_process))]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            published = len(camera.stamps)
        bare.send_signal(2)
        bare_received = int((bare.communicate(timeout=10)[0] or "0").strip().splitlines()[-1])
    finally:
        if bare is not None and bare.poll() is None:
            bare.kill()
        node.stop()
        harness.close()

    data = {
        "round_trip_ms": {"median": statistics.median(times),
                          "p90": statistics.quantiles(times, n=10)[-1],
                          "min": min(times), "max": max(times), "queries": len(times),
                          "agent_total_median": statistics.median(agent_ms)},
        "cpu_percent_of_one_core": {
            "node_idle_no_images": round(idle, 1),
            "node_640x480_rgb8_30hz": round(results["node"], 1),
            "bare_rclpy_subscriber_640x480_rgb8_30hz": round(results["bare"], 1),
            "seconds": args.seconds},
        "frames": {"published_30hz_phase": published, "bare_subscriber_received": bare_received},
    }
    path = write_result("ros_node", data)
    print(json.dumps(data, indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
