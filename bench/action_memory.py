"""Memory held by finished ``~/segment`` results: a 1080p goal flood, the node's RSS before, at
its peak, and after ``action.result_timeout_s``.

A finished goal's result keeps its mask and labels images (1920x1080 mono8 each: 4 MiB) in the
action server for late clients. The node (offline backends, ``query_policy: queue`` so every
goal runs and succeeds, a camera publishing 1080p JPEG at 2 Hz) receives ``--goals`` goals as
fast as it accepts them (8 requests in flight) from this process, which keeps only each goal's
status. The node's resident set (``/proc/<pid>/status``: VmRSS sampled every 100 ms, RssAnon =
the heap, RssShmem = Fast DDS's shared-memory segment) is printed after a warm-up goal
(baseline), at its highest (peak), when the last result is back, and ``--after`` seconds later.

What stays after the timeout besides: the answer store (``refine.keep_answers`` 8 answers for
refinements, each its frame and bit-packed masks; goals answered on one camera frame share one
kept copy of it; before issue 25 each goal's own decoded copy was kept, 6.2 MB each: +70 MiB).

Two nodes, one after the other: ``bounded`` with the defaults (``action.result_timeout_s`` 10,
``action.max_results_with_images`` 16), and ``unbounded``: 900 s (rclpy's default before Kilted;
the server set none before issue 17) with every result keeping its images.

    python bench/action_memory.py [--goals 150] [--after 13]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path

import cv2
from common import ROOT, bench_frame, command_line, write_result

from sam3_agent_ros.ros.dds import apply_loopback_env

apply_loopback_env()  # before rclpy creates any participant

from action_msgs.msg import GoalStatus  # noqa: E402
from rclpy.action import ActionClient  # noqa: E402
from sensor_msgs.msg import CompressedImage  # noqa: E402

from sam3_agent_ros.action import Segment  # noqa: E402
from test.ros.helpers import Camera, Harness, NodeProcess  # noqa: E402

NS = "/bench_action_memory"
QUERY = "the leftmost blue object"
WIDTH, HEIGHT = 1920, 1080


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field}")


class RssSampler:
    """The highest VmRSS of ``pid`` seen every 100 ms while running."""

    def __init__(self, pid: int):
        self.pid, self.peak = pid, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_mib(self.pid))
            self._stop.wait(0.1)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join(5)
        return self.peak


class Flood:
    """``count`` goals, as fast as the server accepts them; keeps each goal's final status only
    (not its images). At most ``IN_FLIGHT`` goal requests wait for their response at a time:
    the goal service keeps the last 10 requests (rclpy's default service QoS), so a burst of 150
    loses most of them before the server sees them."""

    IN_FLIGHT = 8

    def __init__(self, client: ActionClient, count: int, prefix: str):
        self.statuses: list[int] = []
        self.rejected = self.responses = 0
        self._changed = threading.Condition()
        self.count = count
        self._client, self._prefix = client, prefix
        self._next = 0
        for _ in range(min(self.IN_FLIGHT, count)):
            self._send_next()

    def _send_next(self) -> None:
        with self._changed:
            index, self._next = self._next, self._next + 1
        if index < self.count:
            goal = Segment.Goal(query=QUERY, query_id=f"{self._prefix}-{index}")
            self._client.send_goal_async(goal).add_done_callback(self._on_response)

    def _on_response(self, future) -> None:
        handle = future.result()
        self.responses += 1
        self._send_next()
        if not handle.accepted:
            with self._changed:
                self.rejected += 1
                self._changed.notify_all()
            return
        handle.get_result_async().add_done_callback(self._on_result)

    def _on_result(self, future) -> None:
        status = future.result().status  # the result message itself is dropped here
        with self._changed:
            self.statuses.append(status)
            self._changed.notify_all()

    def wait(self, timeout_s: float) -> None:
        with self._changed:
            done = self._changed.wait_for(
                lambda: len(self.statuses) + self.rejected >= self.count, timeout_s)
        if not done:
            raise RuntimeError(f"only {len(self.statuses)} of {self.count} results came back "
                               f"({self.responses} goal responses, {self.rejected} rejected)")


def memory(pid: int) -> dict:
    """VmRSS and its anonymous (heap) and shared-memory (Fast DDS segments) parts, MiB."""
    return {"rss": round(rss_mib(pid)), "anon": round(rss_mib(pid, "RssAnon")),
            "shmem": round(rss_mib(pid, "RssShmem"))}


CONFIGS = {
    "bounded": {},  # the defaults
    "unbounded": {"result_timeout_s": 900, "max_results_with_images": 100_000},
}


def one_run(name: str, goals: int, after_s: float, harness: Harness) -> dict:
    namespace = f"{NS}_{name}"
    params = {"image_transport": "compressed", "image_qos": "reliable", "max_frame_age_s": 0.0,
              "query_policy": "queue", "queue_size": goals + 10}
    if CONFIGS[name]:  # (an empty mapping is not valid in a ROS params file)
        params["action"] = CONFIGS[name]
    tmp = Path(tempfile.mkdtemp(prefix="bench_action_memory_"))
    node = NodeProcess(namespace, params, tmp, dict(os.environ, PYTHONPATH=str(ROOT)))
    frame = CompressedImage(format="jpeg")
    frame.data = cv2.imencode(".jpg", cv2.cvtColor(bench_frame(WIDTH, HEIGHT),
                                                   cv2.COLOR_RGB2BGR))[1].tobytes()
    client = harness.action_client(Segment, f"{namespace}/sam3_agent/segment")
    try:
        harness.wait_state(node.name, "active", timeout=60)
        if not client.wait_for_server(timeout_sec=30):
            raise RuntimeError("no action server")
        pid = node.process.pid
        with Camera(harness, f"{namespace}/image/compressed", frame, rate_hz=2.0):
            Flood(client, 1, "warm-up").wait(60)
            time.sleep(2.0)
            baseline = memory(pid)
            sampler = RssSampler(pid)
            started = time.monotonic()
            flood = Flood(client, goals, "flood")
            flood.wait(600)
            answered_s = time.monotonic() - started
            at_last = memory(pid)
        time.sleep(after_s)
        after = memory(pid)
        peak = round(max(sampler.stop(), at_last["rss"], after["rss"]))
    finally:
        client.destroy()
        node.stop()
    return {"config": name, "action": CONFIGS[name], "goals": goals,
            "succeeded": flood.statuses.count(GoalStatus.STATUS_SUCCEEDED),
            "rejected": flood.rejected, "answered_s": round(answered_s, 1),
            "after_s": after_s, "baseline_mib": baseline, "peak_rss_mib": peak,
            "at_last_result_mib": at_last, "after_mib": after}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--goals", type=int, default=150)
    parser.add_argument("--configs", default="bounded,unbounded",
                        help=f"which of {', '.join(CONFIGS)} to run, one node each")
    parser.add_argument("--after", type=float, default=13.0,
                        help="seconds after the last result to read the RSS again")
    args = parser.parse_args()
    images_mib = 2 * WIDTH * HEIGHT / 2**20
    print(f"{args.goals} goals at {WIDTH}x{HEIGHT}; each result holds mask + labels = "
          f"{images_mib:.1f} MiB ({args.goals * images_mib:.0f} MiB for all)")
    harness = Harness("bench_action_memory")
    runs = []
    try:
        for name in args.configs.split(","):
            run = one_run(name, args.goals, args.after, harness)
            runs.append(run)
            base, last, after = run["baseline_mib"], run["at_last_result_mib"], run["after_mib"]
            print(f"{name:>9} {CONFIGS[name] or '(defaults)'}: {run['succeeded']}/{args.goals} "
                  f"succeeded in {run['answered_s']} s. Node RSS MiB: baseline {base['rss']}, "
                  f"peak {run['peak_rss_mib']}, at the last result {last['rss']}, "
                  f"{args.after:g} s later {after['rss']} ({after['rss'] - base['rss']:+d}); of "
                  f"which heap {base['anon']} -> {last['anon']} -> {after['anon']} ("
                  f"{after['anon'] - base['anon']:+d}), Fast DDS shared memory {base['shmem']} -> "
                  f"{after['shmem']}")
    finally:
        harness.close()
    path = write_result("action_memory", {"command": command_line(), "width": WIDTH,
                                          "height": HEIGHT, "result_images_mib": images_mib,
                                          "runs": runs})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
