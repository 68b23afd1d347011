"""How many listener starts get every static transform when the static publishers start first.

Per run: ``--publishers`` static publishers (separate nodes, as robot_state_publisher, a camera
driver, a calibration node and a mount each are) each latch one transform on ``/tf_static``
(transient local, depth 1: tf2's static broadcaster); then a listener starts the node's way
(``ros.tf_listener.create_tf_source`` on a fresh node, spun at once) and waits ``--wait-s`` for
every one of them. Counted: runs in which it got all of them (the camera mount among them).
With ``/tf_static`` read keep-last 1 (the code before issue 34) samples that reach the reader
before it takes them overwrite each other: 2 of 12 node starts never got the camera mount.

    python bench/tf_static_starts.py [--runs 12] [--publishers 4]

Run it from another checkout (``PYTHONPATH=OTHER:OTHER/demo python OTHER/bench/...``, after
copying this file there) for the code before side by side.
"""

from __future__ import annotations

import argparse
import os
import time

from common import ROOT, command_line, write_result

from sam3_agent_demo.domains import reserved_loopback_env  # noqa: E402  (after common sets sys.path)


def one_run(run: int, publishers: int, wait_s: float) -> int:
    """How many of the ``publishers`` static transforms a freshly started listener got."""
    import rclpy
    from geometry_msgs.msg import TransformStamped
    from rclpy.executors import MultiThreadedExecutor
    from tf2_msgs.msg import TFMessage

    from sam3_agent_ros.ros.tf_listener import TF_STATIC_QOS, create_tf_source
    from test.ros.helpers import Spinner

    sending = rclpy.Context()
    rclpy.init(context=sending)
    nodes = []
    for k in range(publishers):
        node = rclpy.create_node(f"static_{run}_{k}", context=sending)
        writer = node.create_publisher(TFMessage, "/tf_static", TF_STATIC_QOS.__class__(
            reliability=TF_STATIC_QOS.reliability, durability=TF_STATIC_QOS.durability,
            history=TF_STATIC_QOS.history, depth=1))
        item = TransformStamped(child_frame_id=f"run{run}_mount{k}")
        item.header.frame_id = "base_link"
        item.transform.translation.x = float(k)
        item.transform.rotation.w = 1.0
        writer.publish(TFMessage(transforms=[item]))
        nodes.append(node)
    time.sleep(0.5)  # the publishers are up before the node starts
    listening = rclpy.Context()
    rclpy.init(context=listening)
    node = rclpy.create_node(f"listener_{run}", context=listening)
    source = create_tf_source(node, prefer_tf2=False)
    executor = MultiThreadedExecutor(num_threads=2, context=listening)
    executor.add_node(node)
    spinner = Spinner(executor, f"listener_{run}")
    try:
        deadline = time.monotonic() + wait_s
        got = 0
        while time.monotonic() < deadline:
            got = sum(source.lookup("base_link", f"run{run}_mount{k}", 0, 0.0).ok
                      for k in range(publishers))
            if got == publishers:
                break
            time.sleep(0.05)
        return got
    finally:
        source.close()
        spinner.stop()
        executor.shutdown(timeout_sec=2.0)
        node.destroy_node()
        rclpy.shutdown(context=listening)
        for publisher in nodes:
            publisher.destroy_node()
        rclpy.shutdown(context=sending)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--publishers", type=int, default=4)
    parser.add_argument("--wait-s", type=float, default=5.0)
    args = parser.parse_args(argv)
    os.environ.update(reserved_loopback_env())  # before rclpy
    counts = [one_run(run, args.publishers, args.wait_s) for run in range(args.runs)]
    complete = sum(c == args.publishers for c in counts)
    print(f"source {ROOT}: {complete}/{args.runs} listener starts got all {args.publishers} "
          f"static transforms (per run: {counts})")
    write_result("tf_static_starts", {"command": command_line(), "source": str(ROOT),
                                      "runs": args.runs, "publishers": args.publishers,
                                      "complete": complete, "per_run": counts})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
