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
