"""Shared fixtures of the bag tests: a loopback-only rclpy context with a spinning node, and a
small generated bag."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sam3_agent_ros.ros.dds import apply_loopback_env

SMALL_BAG_TOPICS = {"/chatter": "std_msgs/msg/String", "/camera/image": "sensor_msgs/msg/Image"}


@pytest.fixture(scope="module")
def ros_node():
    """An rclpy node in its own context, spun by a background thread; DDS on loopback."""
    apply_loopback_env()
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions

    from test.ros.helpers import Spinner

    context = rclpy.Context()
    rclpy.init(context=context, signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node("bag_test", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    spinner = Spinner(executor, "bag_test")  # tests destroy publishers while it spins
    yield node
    spinner.stop()
    executor.shutdown(timeout_sec=1.0)
    node.destroy_node()
    rclpy.try_shutdown(context=context)


def write_small_bag(path: Path, count: int = 10, period_ns: int = 50_000_000,
                    start_ns: int = 1_000_000_000_000) -> list[tuple[int, str, bytes]]:
    """A bag alternating /chatter (String "msg i") and /camera/image (4x2 mono8 of value i);
    returns its (timestamp, topic, cdr) in order."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    types = store.types
    written = []
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        connections = {topic: writer.add_connection(topic, msgtype, typestore=store)
                       for topic, msgtype in SMALL_BAG_TOPICS.items()}
        for index in range(count):
            stamp = start_ns + index * period_ns
            if index % 2 == 0:
                topic = "/chatter"
                data = store.serialize_cdr(types["std_msgs/msg/String"](data=f"msg {index}"),
                                           "std_msgs/msg/String")
            else:
                topic = "/camera/image"
                header = types["std_msgs/msg/Header"](
                    stamp=types["builtin_interfaces/msg/Time"](sec=stamp // 10**9,
                                                               nanosec=stamp % 10**9),
                    frame_id="cam")
                image = types["sensor_msgs/msg/Image"](
                    header=header, height=2, width=4, encoding="mono8", is_bigendian=0, step=4,
                    data=np.full(8, index, np.uint8))
                data = store.serialize_cdr(image, "sensor_msgs/msg/Image")
            writer.write(connections[topic], stamp, data)
            written.append((stamp, topic, bytes(data)))
    return written


@pytest.fixture
def small_bag(tmp_path):
    path = tmp_path / "small_bag"
    return path, write_small_bag(path)
