"""How a node with ``target_frame`` set answers while a peer floods ``/tf`` (issue 34).

One node process (offline backends, ``target_frame: base_link``: the node's own TF listener runs)
is fed the example tabletop at 15 Hz. Measured: the lifecycle ``get_state`` round trip idle;
then right after ONE ``/tf`` message of ``--frames`` frames with rising stamps (each a new
child of ``world``), the slowest and the median of the ``get_state`` calls made in the
``--watch-s`` seconds after it; then one topic query's time to its result, idle and right
after five such messages. Before the fix the listener rescanned every frame per rising stamp
(10,000 frames: get_state after 9-13 s, a query 17 s after five messages).

    python bench/tf_flood.py [--frames 10000] [--watch-s 6]

Run it from another checkout (``PYTHONPATH=OTHER:OTHER/demo python OTHER/bench/tf_flood.py``,
after copying this file there) for the figures before and after side by side.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from common import ROOT, bench_frame, command_line, median, write_result

from sam3_agent_demo.domains import reserved_loopback_env  # noqa: E402  (after common sets sys.path)

QUERY = "the leftmost blue object"
WAIT_S = 120.0  # generous: the code before the fix takes tens of seconds


def flood_message(frames: int, first_stamp_ns: int, tag: int):
    from geometry_msgs.msg import TransformStamped
    from tf2_msgs.msg import TFMessage

    items = []
    for k in range(frames):
        item = TransformStamped(child_frame_id=f"flood{tag}_{k}")
        item.header.frame_id = "world"
        item.header.stamp.sec, item.header.stamp.nanosec = divmod(first_stamp_ns + k * 1000,
                                                                   1_000_000_000)
        item.transform.rotation.w = 1.0
        items.append(item)
    return TFMessage(transforms=items)


def get_state_s(harness, name: str) -> float:
    started = time.perf_counter()
    harness.lifecycle_state(name, timeout=WAIT_S)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--frames", type=int, default=10_000, help="frames in one /tf message")
    parser.add_argument("--watch-s", type=float, default=6.0,
                        help="seconds of get_state calls after the message")
    args = parser.parse_args(argv)
    os.environ.update(reserved_loopback_env())  # before rclpy: this process is the test side

    from tf2_msgs.msg import TFMessage

    from sam3_agent_ros.ros.conversions import rgb8_image
    from sam3_agent_ros.ros.tf_listener import TF_QOS
    from test.ros.helpers import Camera, Harness, NodeProcess

    tmp = Path(tempfile.mkdtemp(prefix="sam3_bench_tf_flood_"))
    namespace = "/tfflood"
    node = NodeProcess(namespace, {"target_frame": "base_link"}, tmp)
    harness = Harness("tf_flood_bench")
    figures: dict = {"frames": args.frames, "source": str(ROOT)}
    try:
        harness.listen(f"{namespace}/sam3_agent/result")
        harness.wait_state(node.name, "active", timeout=WAIT_S)
        tf = harness.node.create_publisher(TFMessage, "/tf", TF_QOS)
        deadline = time.monotonic() + 30.0
        while harness.node.count_subscribers("/tf") < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        idle = [get_state_s(harness, node.name) for _ in range(5)]
        figures["idle_get_state_s"] = round(median(idle), 4)
        with Camera(harness, f"{namespace}/image", rgb8_image(bench_frame(640, 480))):
            started = time.perf_counter()
            harness.send_query(namespace, {"id": "idle", "query": QUERY})
            harness.wait_result(namespace, "idle", WAIT_S)
            figures["query_idle_s"] = round(time.perf_counter() - started, 3)
            now_ns = harness.node.get_clock().now().nanoseconds
            message = flood_message(args.frames, now_ns - 2_000_000_000, 0)
            tf.publish(message)
            sent = time.perf_counter()
            calls = []
            while time.perf_counter() - sent < args.watch_s or not calls:
                calls.append(get_state_s(harness, node.name))
            figures["after_one_message"] = {
                "first_get_state_s": round(calls[0], 3), "max_get_state_s": round(max(calls), 3),
                "median_get_state_s": round(median(calls), 4), "calls": len(calls)}
            for tag in range(1, 6):
                tf.publish(flood_message(args.frames, now_ns - 1_000_000_000 + tag * 10**8, tag))
            started = time.perf_counter()
            harness.send_query(namespace, {"id": "after-flood", "query": QUERY})
            result = harness.wait_result(namespace, "after-flood", WAIT_S)
            figures["query_after_five_messages_s"] = round(time.perf_counter() - started, 3)
            figures["query_status"] = result["status"]
    finally:
        node.stop()
        harness.close()
    one = figures["after_one_message"]
    print(f"source {figures['source']}: get_state idle {figures['idle_get_state_s'] * 1e3:.1f} "
          f"ms; after one /tf message of {args.frames} frames: first {one['first_get_state_s']:.3f}"
          f" s, max {one['max_get_state_s']:.3f} s, median {one['median_get_state_s'] * 1e3:.1f} "
          f"ms over {one['calls']} calls; a query idle {figures['query_idle_s']:.2f} s, after five "
          f"such messages {figures['query_after_five_messages_s']:.2f} s "
          f"({figures['query_status']})")
    write_result("tf_flood", {"command": command_line(), **figures})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
