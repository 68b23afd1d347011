"""CPU of the node (``sam3_agent_node``, offline backends) while following, frames at 30 Hz.

For each resolution (640x480, 1920x1080) and each ``follow.mode`` (``flow``, ``redetect``; one
node process per mode, image_qos sensor_data), this process publishes frames of the moving
tabletop (``moving_scene``, frames 0..40 back and forth: the followed object stays in view) at
30 Hz and measures, over a window after 1 s of warm-up, side by side in the same node:
  - ``frames only``: % of one core receiving the frames, nothing followed;
  - ``following``: % of one core after ``{"query": "the leftmost blue object", "follow": true}``
    succeeded, with a subscriber on ``~/follow/status`` and ``~/follow/mask`` (so the mask is
    rendered and published), no depth;
plus the follow updates per second the node published (the rest of the 30 frames were dropped
by the newest-only slot, by design) and the median ``latency_ms`` of the statuses (frame
received -> update computed).

    .venv/bin/python bench/follow_node.py [--window 6]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from pathlib import Path

import psutil
from common import ROOT, command_line, median, process_cpu_s, wait_for, write_result

from sam3_agent_demo.domains import reserved_loopback_env  # noqa: E402  (after common sets sys.path)

RATE_HZ = 30.0
RESOLUTIONS = {"480p": (640, 480), "1080p": (1920, 1080)}
MODES = ("flow", "redetect")
QUERY = "the leftmost blue object"
SWEEP = list(range(0, 41)) + list(range(39, 0, -1))


def render_frames(width: int, height: int) -> list:
    """Image messages of the sweep's frames at one resolution (rendered before timing)."""
    from sensor_msgs.msg import Image

    from sam3_agent_demo.moving_scene import MovingSequence, intrinsics_for

    moving = MovingSequence(intrinsics=intrinsics_for(width, height))
    frames = {}
    for index in sorted(set(SWEEP)):
        msg = Image(height=height, width=width, encoding="rgb8", step=width * 3)
        msg.header.frame_id = "camera"
        msg.data = moving.frame(index).rgb.tobytes()
        frames[index] = msg
    return [frames[i] for i in SWEEP]


class Camera:
    """Publishes the frames at RATE_HZ in a background thread, with real-time stamps."""

    def __init__(self, publisher, frames):
        self.publisher, self.frames = publisher, frames
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        period, start = 1.0 / RATE_HZ, time.monotonic()
        while not self._stop.is_set():
            due = start + self.sent * period
            delay = due - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)
            msg = self.frames[self.sent % len(self.frames)]
            now = time.time()
            msg.header.stamp.sec, msg.header.stamp.nanosec = int(now), int(now % 1 * 1e9)
            self.publisher.publish(msg)
            self.sent += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def cpu_percent(process: psutil.Process, window: float) -> tuple[float, float]:
    before, started = process_cpu_s(process), time.monotonic()
    time.sleep(window)
    elapsed = time.monotonic() - started
    return 100.0 * (process_cpu_s(process) - before) / elapsed, elapsed


def measure_mode(mode: str, frames_by_resolution: dict, window: float, temp: Path,
                 child_env: dict) -> dict:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import Image
    from std_msgs.msg import String

    from sam3_agent_ros.ros.qos import IMAGE_QOS
    from test.ros.helpers import RELIABLE, NodeProcess

    namespace = f"/bench_follow_{mode}"
    node_process = NodeProcess(namespace, {"image_qos": "sensor_data",
                                           "follow": {"mode": mode}}, temp, env=child_env)
    node = rclpy.create_node(f"bench_follow_{mode}")
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    statuses: list[dict] = []
    results: list[dict] = []
    node.create_subscription(String, f"{namespace}/sam3_agent/follow/status",
                             lambda m: statuses.append(json.loads(m.data)), RELIABLE)
    node.create_subscription(Image, f"{namespace}/sam3_agent/follow/mask", lambda m: None,
                             RELIABLE)
    node.create_subscription(String, f"{namespace}/sam3_agent/result",
                             lambda m: results.append(json.loads(m.data)), RELIABLE)
    image_pub = node.create_publisher(Image, f"{namespace}/image", IMAGE_QOS["sensor_data"])
    query_pub = node.create_publisher(String, f"{namespace}/query", RELIABLE)
    out = {}
    try:
        wait_for(lambda: image_pub.get_subscription_count() >= 1
                 and query_pub.get_subscription_count() >= 1, 60.0,
                 f"the node to subscribe (see {node_process.log_file})")
        process = psutil.Process(node_process.process.pid)
        for resolution, frames in frames_by_resolution.items():
            camera = Camera(image_pub, frames)
            try:
                time.sleep(1.0)
                idle, _ = cpu_percent(process, window)
                query_id = f"{mode}-{resolution}"
                query_pub.publish(String(data=json.dumps(
                    {"id": query_id, "query": QUERY, "follow": True})))
                wait_for(lambda q=query_id: any(r["query_id"] == q for r in results), 30.0,
                         f"the result of {query_id}")
                time.sleep(1.0)
                first = len(statuses)
                following, elapsed = cpu_percent(process, window)
                mine = [s for s in statuses[first:] if s["query_id"] == query_id]
                tracking = [s for s in mine if s["state"] == "tracking"]
                query_pub.publish(String(data='{"stop_follow": true}'))
                out[resolution] = {
                    "frames_only_cpu_percent": round(idle, 1),
                    "following_cpu_percent": round(following, 1),
                    "updates_per_s": round(len(mine) / elapsed, 1),
                    "tracking_share": round(len(tracking) / max(1, len(mine)), 3),
                    "latency_ms_median": round(median([s["latency_ms"] for s in mine]), 2)
                    if mine else None,
                    "result": next(r["status"] for r in results if r["query_id"] == query_id),
                }
                print(f"{mode} {resolution}: frames only {idle:.1f} %, following "
                      f"{following:.1f} % of a core, {out[resolution]['updates_per_s']} "
                      f"updates/s, latency median {out[resolution]['latency_ms_median']} ms",
                      flush=True)
            finally:
                camera.stop()
                time.sleep(0.5)
    finally:
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()
        node_process.stop()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--window", type=float, default=6.0, help="measured seconds per phase")
    args = parser.parse_args(argv)
    os.environ.update(reserved_loopback_env())
    import rclpy

    rclpy.init()
    temp = Path(tempfile.mkdtemp(prefix="sam3_bench_follow_"))
    child_env = dict(os.environ)
    child_env.pop("_ROS_WHEELS_BOOTSTRAP_COMPLETE", None)
    child_env["PYTHONPATH"] = str(ROOT)
    try:
        frames = {name: render_frames(*size) for name, size in RESOLUTIONS.items()}
        modes = {mode: measure_mode(mode, frames, args.window, temp, child_env)
                 for mode in MODES}
    finally:
        rclpy.try_shutdown()
    write_result("follow_node", {"command": command_line(), "rate_hz": RATE_HZ,
                                 "window_s": args.window, "modes": modes})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
