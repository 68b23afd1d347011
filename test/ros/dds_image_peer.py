"""A publisher or a subscriber of 640x480 rgb8 images, run as its own process by test_dds.py.

    python dds_image_peer.py publish COUNT        # waits for a subscriber, sends COUNT frames
    python dds_image_peer.py subscribe COUNT      # prints one JSON line: what it received

Both use best-effort QoS, like camera drivers. Frame k is filled with the value k so the
subscriber can check contents and order. Not collected by pytest (no test_ prefix).
"""

import json
import sys
import time

import numpy as np
import rclpy
from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image

WIDTH, HEIGHT = 640, 480
TOPIC = "dds_test_image"
PUBLISH_PERIOD_S = 0.1
MATCH_TIMEOUT_S = 20.0


def image_qos(depth: int) -> QoSProfile:
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST, depth=depth, reliability=ReliabilityPolicy.BEST_EFFORT
    )


def publish(count: int) -> None:
    node = Node("dds_test_publisher")
    publisher = node.create_publisher(Image, TOPIC, image_qos(1))
    deadline = time.monotonic() + MATCH_TIMEOUT_S
    while publisher.get_subscription_count() < 1:
        if time.monotonic() > deadline:
            sys.exit("publisher: no subscriber matched")
        time.sleep(0.05)
    time.sleep(0.5)  # let the subscriber side finish matching too
    for k in range(count):
        msg = Image(height=HEIGHT, width=WIDTH, encoding="rgb8", step=WIDTH * 3)
        msg.header.frame_id = f"frame-{k}"
        msg.data = np.full((HEIGHT, WIDTH, 3), k % 256, np.uint8).tobytes()
        publisher.publish(msg)
        time.sleep(PUBLISH_PERIOD_S)
    node.destroy_node()


def subscribe(count: int) -> None:
    node = Node("dds_test_subscriber")
    received: list[int] = []
    bad: list[str] = []

    def on_image(msg: Image) -> None:
        k = int(msg.header.frame_id.split("-")[1])
        pixels = np.frombuffer(msg.data, np.uint8)
        if (msg.width, msg.height) != (WIDTH, HEIGHT) or pixels.size != WIDTH * HEIGHT * 3:
            bad.append(f"frame {k}: {msg.width}x{msg.height}, {pixels.size} bytes")
        elif not np.all(pixels == k % 256):
            bad.append(f"frame {k}: wrong pixel values")
        received.append(k)

    node.create_subscription(Image, TOPIC, on_image, image_qos(count))
    print("ready", flush=True)
    # Count plus a margin of frame periods, then give up: the test reports what arrived.
    deadline = time.monotonic() + MATCH_TIMEOUT_S + count * PUBLISH_PERIOD_S + 5.0
    while len(received) < count and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.1)
    print(json.dumps({"received": received, "bad": bad}), flush=True)
    node.destroy_node()


def main() -> None:
    role, count = sys.argv[1], int(sys.argv[2])
    rclpy.init()
    try:
        {"publish": publish, "subscribe": subscribe}[role](count)
    finally:
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()
