"""A bare rclpy subscriber process for bench/node_costs.py (the DDS receive-cost baseline).

    python bench/ros_peer.py [--multi] IMAGE_TOPIC [OUTPUT_TOPIC ...]

Subscribes to ``IMAGE_TOPIC`` (sensor_msgs/Image) with the node's camera QoS (best effort, keep
last 1) and a callback that only keeps a reference, like the node's; and to each OUTPUT_TOPIC
(sensor_msgs/Image, or sensor_msgs/CompressedImage for a name ending in ``/compressed``;
reliable, keep last 10, the node's output QoS). Prints ``ready``, then on
SIGINT/SIGTERM one JSON line: frames received per width, output messages received per topic.
``--multi`` spins a ``MultiThreadedExecutor`` of 4 threads (as the node does) instead of a
``SingleThreadedExecutor``.
Expects the loopback DDS environment from its parent.
"""

from __future__ import annotations

import json
import signal
import sys

import rclpy
from rclpy.executors import (
    ExternalShutdownException,
    MultiThreadedExecutor,
    SingleThreadedExecutor,
)
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CompressedImage, Image

CAMERA_QOS = QoSProfile(reliability=ReliabilityPolicy.BEST_EFFORT, history=HistoryPolicy.KEEP_LAST,
                        depth=1, durability=DurabilityPolicy.VOLATILE)
OUTPUT_QOS = QoSProfile(reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST,
                        depth=10, durability=DurabilityPolicy.VOLATILE)


def main(argv: list[str]) -> int:
    multi = "--multi" in argv
    argv = [a for a in argv if a != "--multi"]
    image_topic, output_topics = argv[0], argv[1:]
    frames: dict[str, int] = {}
    outputs: dict[str, int] = dict.fromkeys(output_topics, 0)
    latest: list[Image] = []

    def on_frame(msg: Image) -> None:
        latest[:] = [msg]  # keep a reference only, as the node does
        frames[str(msg.width)] = frames.get(str(msg.width), 0) + 1

    def on_output(topic: str):
        def count(msg: Image | CompressedImage) -> None:
            outputs[topic] += 1
        return count

    rclpy.init()
    node = rclpy.create_node("bench_bare_subscriber")
    node.create_subscription(Image, image_topic, on_frame, CAMERA_QOS)
    for topic in output_topics:
        msg_type = CompressedImage if topic.endswith("/compressed") else Image
        node.create_subscription(msg_type, topic, on_output(topic), OUTPUT_QOS)
    executor = MultiThreadedExecutor(num_threads=4) if multi else SingleThreadedExecutor()
    executor.add_node(node)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    signal.signal(signal.SIGINT, lambda *_: stop.append(True))
    print("ready", flush=True)
    try:
        while not stop:
            executor.spin_once(timeout_sec=0.1)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    print(json.dumps({"frames": frames, "outputs": outputs}), flush=True)
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
