"""Memory held by the answers kept for refinement: ten answers on frames just under the pixel cap,
the node's RSS before, at its peak, and after idling, with ``refine.max_kept_mib`` and without.

The node keeps the last ``refine.keep_answers`` (8) answers for refinement, each with its frame
(3 bytes a pixel: 120 MB just under the 40 M ``max_image_pixels`` cap) and its selected masks
(bit-packed). Two nodes, one after the other (offline backends, compressed frames):
``bounded`` with the defaults (``refine.max_kept_mib`` 256) and ``unbounded`` with the largest
byte budget (1 TiB: only the count bounds the store, as before the byte bound existed). This
process sends each node a small warm-up query (the baseline is read 2 s after it), then, one at
a time, ``--answers`` queries each on its own near-cap JPEG frame (7680x5200, a new stamp each),
waiting for each result on ``~/result`` (topic queries: the action would keep result images of
its own). The node's VmRSS is sampled every 100 ms (peak), read at the last result and again
``--idle`` seconds later. Then two refinements show what the store still holds: of the newest
answer and of the eighth newest (kept only without the byte bound).

    python bench/answer_memory.py [--answers 10] [--idle 15]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import cv2
from action_memory import RssSampler, memory
from common import ROOT, bench_frame, command_line, write_result

from sam3_agent_ros.ros.dds import apply_loopback_env

apply_loopback_env()  # before rclpy creates any participant

from sensor_msgs.msg import CompressedImage  # noqa: E402

from sam3_agent_ros.config import PARAMETERS_BY_NAME  # noqa: E402
from test.ros.helpers import Harness, NodeProcess  # noqa: E402

NS = "/bench_answer_memory"
QUERY = "the leftmost blue object"
WIDTH, HEIGHT = 7680, 5200  # 39.9 M pixels: just under max_image_pixels (40 M)
NO_BOUND_MIB = int(PARAMETERS_BY_NAME["refine.max_kept_mib"].max)
CONFIGS = {"bounded": {}, "unbounded": {"max_kept_mib": NO_BOUND_MIB}}


def jpeg(width: int, height: int) -> bytes:
    """The bench scene at ``width`` x ``height`` (made at 1920 wide and scaled up: the noise
    of ``bench_frame`` at 40 M pixels takes seconds)."""
    small = bench_frame(1920, round(1920 * height / width))
    big = cv2.resize(small, (width, height), interpolation=cv2.INTER_LINEAR)
    return cv2.imencode(".jpg", cv2.cvtColor(big, cv2.COLOR_RGB2BGR))[1].tobytes()


class Frames:
    """Publishes one JPEG frame per ``send``, each with a new stamp (sec = serial)."""

    def __init__(self, harness: Harness, namespace: str):
        self.publisher = harness.publisher(f"{namespace}/image/compressed", CompressedImage)
        self.serial = 0

    def send(self, data: bytes) -> int:
        self.serial += 1
        message = CompressedImage(format="jpeg")
        message.header.frame_id = "camera"
        message.header.stamp.sec = self.serial
        message.data = data
        self.publisher.publish(message)
        return self.serial


def ask(harness: Harness, namespace: str, query_id: str, timeout: float,
        refines: str | None = None) -> dict:
    query = {"id": query_id, "query": QUERY, **({"refines": refines} if refines else {})}
    harness.send_query(namespace, query)
    return harness.wait_result(namespace, query_id, timeout)


def one_run(name: str, answers: int, idle_s: float, harness: Harness, big: bytes,
            small: bytes) -> dict:
    namespace = f"{NS}_{name}"
    params = {"image_transport": "compressed", "image_qos": "reliable", "max_frame_age_s": 0.0}
    if CONFIGS[name]:  # (an empty mapping is not valid in a ROS params file)
        params["refine"] = CONFIGS[name]
    tmp = Path(tempfile.mkdtemp(prefix="bench_answer_memory_"))
    node = NodeProcess(namespace, params, tmp, dict(os.environ, PYTHONPATH=str(ROOT)))
    harness.listen(f"{namespace}/sam3_agent/result")
    try:
        harness.wait_state(node.name, "active", timeout=60)
        pid = node.process.pid
        frames = Frames(harness, namespace)
        harness.wait_subscribed(f"{namespace}/image/compressed", CompressedImage)
        frames.send(small)
        time.sleep(1.0)
        ask(harness, namespace, "warm-up", 60)
        time.sleep(2.0)
        baseline = memory(pid)
        sampler = RssSampler(pid)
        started, own_frame, statuses = time.monotonic(), 0, []
        for index in range(answers):
            stamp = frames.send(big)
            time.sleep(1.0)  # (delivered in milliseconds on loopback; the query uses the latest)
            result = ask(harness, namespace, f"n{index}", 120)
            statuses.append(result["status"])
            own_frame += result["stamp"]["sec"] == stamp
        answered_s = time.monotonic() - started
        at_last = memory(pid)
        time.sleep(idle_s)
        after = memory(pid)
        peak = round(max(sampler.stop(), at_last["rss"], after["rss"]))
        refined = {}
        for back in (8, 1):  # the eighth newest answer (first: a refinement is kept too), newest
            target = f"n{answers - back}"
            result = ask(harness, namespace, f"refine-{target}", 120, refines=target)
            refined[target] = {"status": result["status"], "error": result["error"]}
    finally:
        node.stop()
    return {"config": name, "refine": CONFIGS[name], "answers": answers,
            "succeeded": statuses.count("succeeded"), "on_own_frame": own_frame,
            "answered_s": round(answered_s, 1), "idle_s": idle_s, "baseline_mib": baseline,
            "peak_rss_mib": peak, "at_last_result_mib": at_last, "after_mib": after,
            "refinements": refined}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=10)
    parser.add_argument("--configs", default="bounded,unbounded",
                        help=f"which of {', '.join(CONFIGS)} to run, one node each")
    parser.add_argument("--idle", type=float, default=15.0,
                        help="seconds after the last result to read the RSS again")
    args = parser.parse_args()
    frame_mib = WIDTH * HEIGHT * 3 / 2**20
    big, small = jpeg(WIDTH, HEIGHT), jpeg(640, 480)
    print(f"{args.answers} answers on {WIDTH}x{HEIGHT} frames (JPEG {len(big) / 2**20:.1f} MiB; "
          f"decoded {frame_mib:.0f} MiB each)")
    harness = Harness("bench_answer_memory")
    runs = []
    try:
        for name in args.configs.split(","):
            run = one_run(name, args.answers, args.idle, harness, big, small)
            runs.append(run)
            base, last, after = run["baseline_mib"], run["at_last_result_mib"], run["after_mib"]
            print(f"{name:>9} {CONFIGS[name] or '(defaults)'}: {run['succeeded']}/{args.answers} "
                  f"succeeded ({run['on_own_frame']} on their own frame) in "
                  f"{run['answered_s']} s. Node RSS MiB: baseline {base['rss']}, peak "
                  f"{run['peak_rss_mib']} (+{run['peak_rss_mib'] - base['rss']}), at the last "
                  f"result {last['rss']}, {args.idle:g} s later {after['rss']} "
                  f"(+{after['rss'] - base['rss']}). Refinements: "
                  + json.dumps(run["refinements"]))
    finally:
        harness.close()
    by_name = {run["config"]: run for run in runs}
    if {"bounded", "unbounded"} <= by_name.keys():
        def grown(run: dict, key: str) -> float:
            value = run[key] if key == "peak_rss_mib" else run[key]["rss"]
            return max(1, value - run["baseline_mib"]["rss"])

        for key, what in (("peak_rss_mib", "peak"), ("after_mib", "after idle")):
            print(f"{what}: bounded / unbounded growth = "
                  f"{grown(by_name['bounded'], key) / grown(by_name['unbounded'], key):.2f}")
    path = write_result("answer_memory", {
        "command": command_line(), "width": WIDTH, "height": HEIGHT, "frame_mib": frame_mib,
        "max_kept_mib": PARAMETERS_BY_NAME["refine.max_kept_mib"].default, "runs": runs})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
