"""Record: raw subscriptions into a new rosbag2 bag that reads back (round trip, mcap and
sqlite3), topics that appear later, best-effort publishers, the CLI stopped by SIGTERM, a
recording that captured nothing (exit 1 with the reason), and usage errors."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from rosbags.rosbag2 import Reader
from rosbags.typesys import Stores, get_typestore

from sam3_agent_ros.bags.record import BagRecorder, RecordError, read_bag_counts

pytestmark = pytest.mark.ros
STORE = get_typestore(Stores.ROS2_KILTED)
REPO_ROOT = Path(__file__).resolve().parents[2]


def _wait(predicate, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def _qos(reliable: bool = True):
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    return QoSProfile(depth=20, reliability=ReliabilityPolicy.RELIABLE if reliable
                      else ReliabilityPolicy.BEST_EFFORT)


BAG_FILE_SUFFIX = {"mcap": ".mcap", "sqlite3": ".db3"}


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_round_trip_with_a_topic_that_appears_later(ros_node, tmp_path, storage):
    from geometry_msgs.msg import PointStamped
    from sensor_msgs.msg import Image
    from std_msgs.msg import String

    text_pub = ros_node.create_publisher(String, "/rec/text", _qos())
    image_pub = ros_node.create_publisher(Image, "/rec/image", _qos(reliable=False))
    publishers = [text_pub, image_pub]
    assert _wait(lambda: "/rec/image" in dict(ros_node.get_topic_names_and_types()))
    out = tmp_path / "out_bag"
    recorder = BagRecorder(ros_node, out, ["/rec/text", "rec/image", "/rec/late"],
                           storage=storage)
    try:
        assert _wait(lambda: text_pub.get_subscription_count() > 0
                     and image_pub.get_subscription_count() > 0)
        for index in range(5):
            text_pub.publish(String(data=f"hello {index}"))
        image = Image(height=2, width=3, encoding="mono8", step=3)
        image.header.frame_id = "cam"
        image.data = bytes(range(6))
        for _ in range(3):
            image_pub.publish(image)
            time.sleep(0.02)  # best effort, depth 20: no loss expected, but be gentle
        late_pub = ros_node.create_publisher(PointStamped, "/rec/late", _qos())
        publishers.append(late_pub)
        assert _wait(lambda: late_pub.get_subscription_count() > 0)
        point = PointStamped()
        point.point.x = 1.5
        late_pub.publish(point)
        assert _wait(lambda: recorder.counts == {"/rec/text": 5, "/rec/image": 3,
                                                 "/rec/late": 1})
    finally:
        recorder.close()
        for publisher in publishers:
            ros_node.destroy_publisher(publisher)
    assert recorder.write_error is None and recorder.nothing_recorded() is None
    assert (out / "metadata.yaml").is_file()
    assert (out / f"out_bag{BAG_FILE_SUFFIX[storage]}").is_file()
    with Reader(out) as reader:
        types = {c.topic: c.msgtype for c in reader.connections}
        messages = [(c.topic, STORE.deserialize_cdr(d, c.msgtype)) for c, _, d in reader.messages()]
    assert types == {"/rec/text": "std_msgs/msg/String", "/rec/image": "sensor_msgs/msg/Image",
                     "/rec/late": "geometry_msgs/msg/PointStamped"}
    assert [m.data for t, m in messages if t == "/rec/text"] == [f"hello {i}" for i in range(5)]
    images = [m for t, m in messages if t == "/rec/image"]
    assert all(np.array_equal(m.data, np.arange(6, dtype=np.uint8)) for m in images)
    assert images[0].header.frame_id == "cam"
    assert [m.point.x for t, m in messages if t == "/rec/late"] == [1.5]
    assert read_bag_counts(out) == {"/rec/text": 5, "/rec/image": 3, "/rec/late": 1}
    recorder.close()  # idempotent


def test_usage_errors(ros_node, tmp_path):
    (tmp_path / "exists").mkdir()
    with pytest.raises(RecordError, match="exists already"):
        BagRecorder(ros_node, tmp_path / "exists", ["/a"])
    with pytest.raises(RecordError, match="no topics"):
        BagRecorder(ros_node, tmp_path / "b", [])
    with pytest.raises(RecordError, match="unknown storage"):
        BagRecorder(ros_node, tmp_path / "c", ["/a"], storage="rosbag1")


def test_nothing_recorded_says_why_per_topic(ros_node, tmp_path):
    from std_msgs.msg import String

    publisher = ros_node.create_publisher(String, "/rec/silent", _qos())
    try:
        with BagRecorder(ros_node, tmp_path / "empty", ["/rec/silent", "/rec/absent"]) as rec:
            assert _wait(lambda: publisher.get_subscription_count() > 0)
    finally:
        ros_node.destroy_publisher(publisher)
    reason = rec.nothing_recorded()
    assert reason.startswith("nothing was recorded")
    assert "/rec/silent: subscribed, no message arrived" in reason
    assert "/rec/absent: never published" in reason
    assert read_bag_counts(tmp_path / "empty") == {"/rec/silent": 0}


def _cli_env() -> dict[str, str]:
    env = dict(os.environ)  # the loopback environment of this session (ros_node applied it)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    env.pop("_ROS_WHEELS_BOOTSTRAP_COMPLETE", None)
    return env


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_cli_record_until_sigterm(ros_node, tmp_path, storage):
    from std_msgs.msg import String

    out = tmp_path / "cli_bag"
    publisher = ros_node.create_publisher(String, "/cli/chatter", _qos())
    process = subprocess.Popen(
        [sys.executable, "-m", "sam3_agent_ros.cli", "record", str(out), "--topics",
         "/cli/chatter", "--loopback", "--storage", storage], env=_cli_env(),
        stderr=subprocess.PIPE, text=True)
    try:
        assert _wait(lambda: publisher.get_subscription_count() > 0, timeout_s=30.0)
        for index in range(10):
            publisher.publish(String(data=str(index)))
        time.sleep(0.5)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
        ros_node.destroy_publisher(publisher)
    assert process.returncode == 0, stderr
    assert "/cli/chatter: 10" in stderr and "skipped" not in stderr
    assert read_bag_counts(out) == {"/cli/chatter": 10}
    assert (out / f"cli_bag{BAG_FILE_SUFFIX[storage]}").is_file()


def test_cli_record_that_captured_nothing_fails_with_the_reason(tmp_path):
    out = tmp_path / "empty_bag"
    process = subprocess.run(
        [sys.executable, "-m", "sam3_agent_ros.cli", "record", str(out), "--topics",
         "/cli/nobody_publishes_this", "--duration", "1", "--loopback"], env=_cli_env(),
        capture_output=True, text=True, timeout=60)
    assert process.returncode == 1, process.stderr
    assert "nothing was recorded: /cli/nobody_publishes_this: never published" in process.stderr


def test_cli_record_refuses_an_existing_output(tmp_path):
    from sam3_agent_ros.cli import main

    (tmp_path / "there").mkdir()
    assert main(["record", str(tmp_path / "there"), "--duration", "1"]) == 2


def test_the_packages_own_messages_are_recorded_and_read_back(ros_node, tmp_path):
    """~/concepts/detections is a sam3_agent_ros/msg/ConceptDetections: rosbags' store does not
    know it; the recorder describes it (and ConceptDetection) from the package's msg files."""
    from rosbags.typesys import get_types_from_msg

    from sam3_agent_ros.msg import ConceptDetection, ConceptDetections

    publisher = ros_node.create_publisher(ConceptDetections, "/rec/detections", _qos())
    out = tmp_path / "own_types"
    try:
        with BagRecorder(ros_node, out, ["/rec/detections"]) as recorder:
            assert _wait(lambda: publisher.get_subscription_count() > 0)
            message = ConceptDetections(detections=[ConceptDetection(concept="cup", id=7)])
            message.header.frame_id = "cam"
            publisher.publish(message)
            assert _wait(lambda: recorder.counts["/rec/detections"] == 1)
    finally:
        ros_node.destroy_publisher(publisher)
    assert recorder.skipped == {} and recorder.write_error is None
    store = get_typestore(Stores.ROS2_KILTED)
    with Reader(out) as reader:
        (connection,) = reader.connections
        assert connection.msgtype == "sam3_agent_ros/msg/ConceptDetections"
        for name, text in _definitions(connection.msgdef.data, connection.msgtype):
            store.register(get_types_from_msg(text, name))
        (read,) = [store.deserialize_cdr(d, c.msgtype) for c, _, d in reader.messages()]
    assert read.header.frame_id == "cam"
    assert [(d.concept, d.id) for d in read.detections] == [("cup", 7)]


def _definitions(msgdef: str, msgtype: str) -> list[tuple[str, str]]:
    """The (type, text) sections of a bag's concatenated message definition."""
    sections, name = [], msgtype
    for part in msgdef.split("=" * 80 + "\n"):
        if part.startswith("MSG: "):
            header, _, part = part.partition("\n")
            name = header[5:].strip()
            name = name if "/msg/" in name else name.replace("/", "/msg/")
        sections.append((name, part))
    return sections


def test_the_default_topics_are_every_output_of_the_node():
    from sam3_agent_ros.bags.record import NODE_OUTPUT_TOPICS

    for topic in ("/sam3_agent/result", "/sam3_agent/concepts/detections",
                  "/sam3_agent/concepts/labels", "/sam3_agent/follow/status",
                  "/sam3_agent/follow/mask", "/sam3_agent/markers"):
        assert topic in NODE_OUTPUT_TOPICS


def test_cli_record_of_a_topic_it_cannot_record_exits_1_with_the_reason(ros_node, tmp_path):
    """Two types on one topic cannot go into one bag connection: an error, not a silent skip,
    although the other topic was recorded. The second type appears while it records."""
    import rclpy
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from rclpy.signals import SignalHandlerOptions
    from sensor_msgs.msg import Image
    from std_msgs.msg import String

    latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    publishers = [ros_node.create_publisher(String, "/cli/fine", latched),
                  ros_node.create_publisher(String, "/cli/mixed", _qos())]
    publishers[0].publish(String(data="kept"))
    process = subprocess.Popen(
        [sys.executable, "-m", "sam3_agent_ros.cli", "record", str(tmp_path / "bag"),
         "--topics", "/cli/fine", "/cli/mixed", "--duration", "8", "--loopback"],
        env=_cli_env(), stderr=subprocess.PIPE, text=True)
    context = rclpy.Context()
    try:
        assert _wait(lambda: publishers[1].get_subscription_count() > 0, timeout_s=30.0)
        # The other type from a participant of its own (DDS refuses two types in one).
        rclpy.init(context=context, signal_handler_options=SignalHandlerOptions.NO)
        other = rclpy.create_node("bag_test_other_type", context=context)
        other.create_publisher(Image, "/cli/mixed", _qos())
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
        for publisher in publishers:
            ros_node.destroy_publisher(publisher)
        rclpy.try_shutdown(context=context)
    assert process.returncode == 1, stderr
    assert "cannot record /cli/mixed: published with several types" in stderr
    assert read_bag_counts(tmp_path / "bag") == {"/cli/fine": 1, "/cli/mixed": 0}


def test_cli_record_refuses_an_output_it_cannot_create(tmp_path, capsys):
    """Checked before ROS starts: exit 2 with one line naming the path and the OS error."""
    from sam3_agent_ros.cli import main

    (tmp_path / "file").write_text("x")
    assert main(["record", str(tmp_path / "file" / "bag"), "--duration", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(tmp_path / "file") in err[0]
    assert "not a directory" in err[0].lower()
