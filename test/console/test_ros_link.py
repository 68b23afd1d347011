"""console/ros_link.py over a real ROS graph (DDS on loopback), against a stand-in node: the
preview finds the node's own (remapped) colour topic on its graph, concepts switched off by
anyone clear the detections, and the console's node serves nothing of its own (its SROS2
enclave names only the node's interfaces)."""

from __future__ import annotations

import threading
import time

import pytest

from sam3_agent_ros.console.hub import Feed, Hub
from sam3_agent_ros.console.ros_link import RosLink

rclpy = pytest.importorskip("rclpy")

NS = "/ros_link_test"
NODE = f"{NS}/sam3_agent"
CAMERA = f"{NS}/camera/color/image_raw"


def wait_until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout:g} s for {what}")
        time.sleep(0.1)


@pytest.fixture
def stand_in(ros_env):
    """A node named like the real one, subscribed as the real one is with depth on and its
    camera remapped, with the concepts parameter."""
    from rcl_interfaces.msg import ParameterDescriptor
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import Image

    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("sam3_agent", namespace=NS, context=context)
    node.create_subscription(Image, CAMERA, lambda msg: None, 1)
    node.create_subscription(Image, f"{NS}/camera/aligned_depth_to_color/image_raw",
                             lambda msg: None, 1)
    node.declare_parameter("concepts.prompts", ["cup"], ParameterDescriptor())
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            executor.spin_once(timeout_sec=0.1)
    spinner = threading.Thread(target=spin, daemon=True)
    spinner.start()
    try:
        yield node
    finally:
        stop.set()
        spinner.join(5)
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=context)


def test_the_preview_follows_the_nodes_graph_and_concepts_off_clear_detections(stand_in):
    hub = Hub()
    link = RosLink(hub, NODE)  # no --image-topic
    link.start()
    try:
        hub.attach(Feed(lambda: None))  # a page is open: the preview is wanted
        wait_until(lambda: link.image_topic == CAMERA, 20, f"the preview on {CAMERA} "
                   f"(on {link.image_topic!r}; camera: {hub.get('camera')})")
        assert hub.get("camera")["topic"] == CAMERA
        # the console's node serves nothing of its own
        names = dict(stand_in.get_node_names_and_namespaces())
        console = [n for n in names if n.startswith("sam3_agent_console_")]
        assert len(console) == 1
        assert stand_in.get_service_names_and_types_by_node(console[0], "/") == []
        # concepts switched off by another client: the console hears /parameter_events
        link.panels.detections({"frame_id": "cam", "detections": [{"concept": "cup", "id": 1}]})
        from rclpy.parameter import Parameter

        stand_in.set_parameters([Parameter("concepts.prompts", Parameter.Type.STRING_ARRAY, [])])
        wait_until(lambda: (hub.get("detections") or {}).get("state") == "off", 20,
                   f"the detections cleared (shown: {hub.get('detections')})")
    finally:
        link.stop()
