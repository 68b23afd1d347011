"""ros/tf_listener.py over real rclpy (DDS on loopback, by test/conftest.py): a static camera mount
on /tf_static (transient local) and a moving base on /tf, looked up at a past stamp, against
hand-computed numbers; a listener that joins late still gets the static mount."""

from __future__ import annotations

import math
import threading
import time

import numpy as np
import pytest
import rclpy
from geometry_msgs.msg import TransformStamped
from rclpy.executors import MultiThreadedExecutor
from tf2_msgs.msg import TFMessage

from sam3_agent_ros.ros.tf_listener import TF_QOS, TF_STATIC_QOS, OwnTfSource, create_tf_source
from test.ros.helpers import Spinner

S = 1_000_000_000


def stamped(parent: str, child: str, stamp_ns: int, xyz, yaw_deg: float = 0.0,
            rotation=None) -> TransformStamped:
    item = TransformStamped(child_frame_id=child)
    item.header.frame_id = parent
    item.header.stamp.sec, item.header.stamp.nanosec = divmod(stamp_ns, S)
    item.transform.translation.x, item.transform.translation.y, item.transform.translation.z = xyz
    half = math.radians(yaw_deg) / 2
    q = rotation or (0.0, 0.0, math.sin(half), math.cos(half))
    r = item.transform.rotation
    r.x, r.y, r.z, r.w = q
    return item


# The camera mount: base_link -> camera_link 0.2 m ahead, 0.3 m up, turned 90 deg left;
# camera_link -> camera_color_optical_frame: the optical convention (z forward, x right, y down),
# quaternion (-0.5, 0.5, -0.5, 0.5).
MOUNT = [stamped("base_link", "camera_link", 0, (0.2, 0.0, 0.3), 90.0),
         stamped("camera_link", "camera_color_optical_frame", 0, (0.0, 0.0, 0.0),
                 rotation=(-0.5, 0.5, -0.5, 0.5))]


class Graph:
    """A node with its own context and executor spinning in a thread."""

    def __init__(self, name: str):
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node(name, context=self.context)
        self.executor = MultiThreadedExecutor(num_threads=2, context=self.context)
        self.executor.add_node(self.node)
        self.spinner = Spinner(self.executor, name)

    def close(self) -> None:
        self.spinner.stop()
        self.executor.shutdown(timeout_sec=2.0)
        self.node.destroy_node()
        rclpy.shutdown(context=self.context)


@pytest.fixture
def publisher():
    graph = Graph("tf_test_publisher")
    static = graph.node.create_publisher(TFMessage, "/tf_static", TF_STATIC_QOS)
    dynamic = graph.node.create_publisher(TFMessage, "/tf", TF_QOS)
    static.publish(TFMessage(transforms=MOUNT))  # before any listener exists
    yield graph, dynamic
    graph.close()


@pytest.fixture
def listener():
    graph = Graph("tf_test_listener")
    source = create_tf_source(graph.node)
    yield graph, source
    source.close()
    graph.close()


def publish_until(dynamic, items, predicate, timeout: float = 30.0) -> None:
    """Re-publish ``items`` on /tf until ``predicate()`` (discovery is asynchronous)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "the listener never received /tf"
        dynamic.publish(TFMessage(transforms=items))
        time.sleep(0.1)


def test_a_late_listener_gets_the_static_mount_and_interpolates_the_moving_base(publisher,
                                                                              listener):
    _, dynamic = publisher
    _, source = listener
    # The static mount was published before the listener existed: transient local brings it.
    found = source.lookup("base_link", "camera_color_optical_frame", 5 * S, timeout_s=30.0)
    assert found.ok, found.reason
    # odom -> base_link: x 1 m at 10 s, 3 m at 12 s, turning 0 -> 90 deg.
    moving = [stamped("odom", "base_link", 10 * S, (1.0, 0.0, 0.0), 0.0),
              stamped("odom", "base_link", 12 * S, (3.0, 0.0, 0.0), 90.0)]
    publish_until(dynamic, moving, lambda: source.lookup("odom", "base_link", 12 * S, 0.0).ok)

    # A point 1 m in front of the optical frame (its z axis) at 11 s, the past midpoint.
    # optical (0, 0, 1) -> camera_link (1, 0, 0) (x forward) -> base_link: turned 90 deg,
    # (0, 1, 0) + (0.2, 0, 0.3) = (0.2, 1, 0.3) -> odom at 11 s: base at (2, 0, 0) turned
    # 45 deg: (2 + 0.2 c - s, 0.2 s + c, 0.3) with c = s = cos 45.
    found = source.lookup("odom", "camera_color_optical_frame", 11 * S, timeout_s=1.0)
    assert found.ok, found.reason
    c = math.cos(math.radians(45))
    np.testing.assert_allclose(found.transform.apply_points([[0.0, 0.0, 1.0]]),
                               [[2.0 + 0.2 * c - c, 0.2 * c + c, 0.3]], atol=1e-6)
    # The latest transform (12 s) would put it elsewhere: the stamp matters.
    latest = source.lookup("odom", "camera_color_optical_frame", 12 * S, 0.0)
    assert np.linalg.norm(latest.transform.translation - found.transform.translation) > 0.5


def test_a_lookup_waits_for_a_transform_about_to_arrive(publisher, listener):
    _, dynamic = publisher
    _, source = listener
    first = [stamped("odom", "base_link", 20 * S, (0.0, 0.0, 0.0))]
    publish_until(dynamic, first, lambda: source.lookup("odom", "base_link", 20 * S, 0.0).ok)
    later = [stamped("odom", "base_link", 21 * S, (1.0, 0.0, 0.0))]
    timer = threading.Timer(0.3, lambda: dynamic.publish(TFMessage(transforms=later)))
    timer.start()
    try:
        found = source.lookup("odom", "base_link", int(20.5 * S), timeout_s=20.0)
    finally:
        timer.cancel()
    assert found.ok, found.reason
    np.testing.assert_allclose(found.transform.translation, [0.5, 0.0, 0.0], atol=1e-9)


def test_what_is_missing_is_said_after_the_timeout(publisher, listener):
    _, source = listener
    assert source.lookup("base_link", "camera_color_optical_frame", 0, 30.0).ok
    missing = source.lookup("map", "camera_color_optical_frame", 1 * S, timeout_s=0.2)
    assert not missing.ok and missing.transform is None
    assert "frame 'map' is unknown" in missing.reason
    assert "'base_link', 'camera_color_optical_frame', 'camera_link'" in missing.reason
    assert "(waited 0.2 s)" in missing.reason


def test_malformed_transforms_from_a_peer_are_counted_not_raised():
    graph = Graph("tf_test_malformed")
    try:
        source = OwnTfSource(graph.node)
        bad = stamped("a", "b", 0, (0.0, 0.0, 0.0), rotation=(0.0, 0.0, 0.0, 0.0))
        good = stamped("/a", "/c", 0, (1.0, 0.0, 0.0))
        source._on_tf(TFMessage(transforms=[bad, good]), static=True)
        assert source.refused == 1
        assert source.frames() == ["a", "c"]  # leading slashes dropped, as tf2 does
        source.close()
    finally:
        graph.close()


def test_every_static_publisher_started_first_reaches_a_late_listener():
    # Four static publishers (as robot_state_publisher, a camera driver, a calibration node and
    # a mount each run one) all published before the listener exists, and their samples sit in
    # the listener's reader before it takes any: with keep-last 1 only one survived (2 of 12 node
    # starts never got the camera mount). tf2 reads /tf_static keep-last 100.
    publishers = Graph("tf_test_static_publishers")
    mounts = [stamped("base_link", f"mount_{k}", 0, (float(k), 0.0, 0.0)) for k in range(4)]
    writers = []
    listening = Graph.__new__(Graph)
    try:
        for k, mount in enumerate(mounts):
            node = rclpy.create_node(f"tf_test_static_{k}", context=publishers.context)
            writer = node.create_publisher(TFMessage, "/tf_static", TF_STATIC_QOS)
            writer.publish(TFMessage(transforms=[mount]))
            writers.append((node, writer))
        # The listener's node, not spun until every sample can have reached its reader.
        listening.context = rclpy.Context()
        rclpy.init(context=listening.context)
        listening.node = rclpy.create_node("tf_test_static_listener", context=listening.context)
        source = OwnTfSource(listening.node)
        deadline = time.monotonic() + 20.0
        while listening.node.count_publishers("/tf_static") < 4:
            assert time.monotonic() < deadline, "the static publishers were never discovered"
            time.sleep(0.05)
        time.sleep(1.0)  # transient local: the writers' samples arrive in the reader's queue
        listening.executor = MultiThreadedExecutor(num_threads=2, context=listening.context)
        listening.executor.add_node(listening.node)
        listening.spinner = Spinner(listening.executor, "tf_test_static_listener")
        for k in range(4):
            found = source.lookup("base_link", f"mount_{k}", 0, timeout_s=5.0)
            assert found.ok, found.reason
            np.testing.assert_allclose(found.transform.translation, [float(k), 0.0, 0.0])
        source.close()
    finally:
        if hasattr(listening, "spinner"):
            listening.close()
        elif hasattr(listening, "node"):
            listening.node.destroy_node()
            rclpy.shutdown(context=listening.context)
        for node, _ in writers:
            node.destroy_node()
        publishers.close()


def test_one_message_of_10000_frames_leaves_the_listener_responsive():
    # One /tf message with 10,000 frames and rising stamps made the listener rescan every frame
    # per transform: get_state answered after 9-13 s. Now its cost is what it changes.
    graph = Graph("tf_test_flood")
    try:
        source = OwnTfSource(graph.node)
        items = [stamped("world", f"f{k}", 1 * S + k * 1000, (0.0, 0.0, 0.0))
                 for k in range(10_000)]
        message = TFMessage(transforms=items)
        started = time.perf_counter()
        source._on_tf(message, static=False)
        elapsed = time.perf_counter() - started
        print(f"\n/tf message of 10,000 frames, rising stamps: {elapsed * 1e3:.0f} ms")
        assert elapsed < 4.0
        assert source.stats().frames == 10_000
        source.close()
    finally:
        graph.close()


def test_far_future_and_malformed_samples_are_refused_with_a_rate_limited_warning():
    graph = Graph("tf_test_future")
    try:
        source = OwnTfSource(graph.node)
        warnings: list[str] = []
        source._log._logger = type("L", (), {"warning": lambda self, m: warnings.append(m)})()
        now = graph.node.get_clock().now().nanoseconds
        moving = [stamped("odom", "base_link", now - S // 10 + k * S // 100, (0.01 * k, 0, 0))
                  for k in range(10)]
        source._on_tf(TFMessage(transforms=moving), static=False)
        future = stamped("odom", "base_link", now + 3600 * S, (9.0, 9.0, 9.0))
        for _ in range(5):
            source._on_tf(TFMessage(transforms=[future]), static=False)
        assert source.stats().refused["future"] == 5
        assert len(warnings) == 1  # one line per kind per 10 s, naming the link
        assert "'odom' -> 'base_link'" in warnings[0] and "ahead of the node's clock" in \
            warnings[0]
        # The link still answers at a real stamp: the future sample did not blank it.
        found = source.lookup("odom", "base_link", now - S // 10 + 5 * S // 100, 0.0)
        assert found.ok, found.reason
        np.testing.assert_allclose(found.transform.translation, [0.05, 0.0, 0.0], atol=1e-9)
        source.close()
    finally:
        graph.close()
