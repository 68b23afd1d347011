"""Replay: raw CDR passthrough, order and timing, rate, topic selection, remap, start offset,
loop, and clear errors for missing/corrupt bags."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from sam3_agent_ros.bags import commands
from sam3_agent_ros.bags.replay import (
    BagError,
    BagSource,
    message_class,
    parse_remaps,
    replay_bag,
    resolve_bag_path,
    wall_offset_s,
)
from test.bags.conftest import write_small_bag

pytestmark = pytest.mark.ros


class Capture:
    """Raw subscriptions on some topics; keeps (topic, bytes) in arrival order."""

    def __init__(self, node, topics: dict[str, str]):
        from rclpy.qos import QoSProfile, ReliabilityPolicy

        self.received: list[tuple[str, bytes]] = []
        self.lock = threading.Lock()
        qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        self.subs = [node.create_subscription(message_class(t), topic,
                                              lambda d, tp=topic: self._add(tp, d), qos, raw=True)
                     for topic, t in topics.items()]
        self.node = node

    def _add(self, topic, data):
        with self.lock:
            self.received.append((topic, bytes(data)))

    def wait_for(self, count: int, timeout_s: float = 10.0) -> list[tuple[str, bytes]]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and len(self.received) < count:
            time.sleep(0.02)
        time.sleep(0.1)  # anything extra would arrive now
        with self.lock:
            return list(self.received)

    def close(self):
        for sub in self.subs:
            self.node.destroy_subscription(sub)


TYPES = {"/chatter": "std_msgs/msg/String", "/camera/image": "sensor_msgs/msg/Image"}


def _replay(path, node, outputs, **kwargs):
    """Replay with a capture on ``outputs`` (topic -> type); returns (stats, received, times)."""
    capture = Capture(node, outputs)
    times = []
    try:
        stats = replay_bag(path, node, wait_for_topics=list(outputs), wait_timeout_s=10.0,
                           on_publish=lambda m, t, w: times.append((m.timestamp_ns, w)), **kwargs)
        received = capture.wait_for(stats.total)
    finally:
        capture.close()
    return stats, received, [(stamp, wall - stats.schedule_origin) for stamp, wall in times]


def test_replays_raw_bytes_in_bag_order_not_before_their_time(ros_node, small_bag):
    path, written = small_bag
    stats, received, times = _replay(path, ros_node, TYPES)
    assert received == [(topic, data) for _, topic, data in written]
    assert stats.published == {"/chatter": 5, "/camera/image": 5}
    start_ns = written[0][0]
    for stamp, wall in times:  # never early (lateness is the benchmark's business)
        assert wall >= (stamp - start_ns) / 1e9
    assert [w for _, w in times] == sorted(w for _, w in times)


def test_rate_scales_the_schedule(ros_node, small_bag):
    path, written = small_bag
    _, received, times = _replay(path, ros_node, TYPES, rate=4.0)
    assert len(received) == len(written)
    start_ns = written[0][0]
    for stamp, wall in times:
        assert wall >= (stamp - start_ns) / 4e9
    assert wall_offset_s(start_ns + 2_000_000_000, start_ns, 4.0) == pytest.approx(0.5)
    assert wall_offset_s(start_ns - 5, start_ns, 1.0) == 0.0


def test_rate_really_speeds_up(ros_node, tmp_path):
    """Two messages 100 s apart at rate 1000 are 0.1 s apart; played at 1x they would not both
    be published before the 30 s watchdog (a 300x margin, not a speed threshold)."""
    path = tmp_path / "sparse"
    write_small_bag(path, count=2, period_ns=100_000_000_000)
    stop = threading.Event()
    watchdog = threading.Timer(30.0, stop.set)
    watchdog.start()
    try:
        stats = replay_bag(path, ros_node, rate=1000.0, stop=stop)
    finally:
        watchdog.cancel()
    assert not stats.interrupted and stats.total == 2


def test_topic_selection_plays_only_those_topics(ros_node, small_bag):
    path, written = small_bag
    stats, received, _ = _replay(path, ros_node, TYPES, topics=["chatter", "/missing"])
    assert [t for t, _ in received] == ["/chatter"] * 5
    assert stats.published == {"/chatter": 5}
    assert "/missing" in stats.skipped_topics


def test_remap_publishes_on_the_new_topic(ros_node, small_bag):
    path, written = small_bag
    outputs = {"/renamed": "std_msgs/msg/String", "/camera/image": "sensor_msgs/msg/Image"}
    stats, received, _ = _replay(path, ros_node, outputs, remaps={"/chatter": "renamed"})
    assert [t for t, _ in received].count("/renamed") == 5
    assert stats.published == {"/renamed": 5, "/camera/image": 5}


def test_start_offset_skips_the_beginning(ros_node, small_bag):
    path, written = small_bag
    offset_s = 0.2  # messages every 50 ms: the first four are skipped
    stats, received, times = _replay(path, ros_node, TYPES, start_offset_s=offset_s)
    expected = [(t, d) for stamp, t, d in written if stamp >= written[0][0] + 200_000_000]
    assert received == expected and len(expected) == 6
    assert times[0][0] == written[4][0]


def test_loop_plays_again_until_stopped(ros_node, small_bag):
    path, written = small_bag
    stop = threading.Event()
    published = []

    def on_publish(message, topic, wall):
        published.append(message.timestamp_ns)
        if len(published) == 25:
            stop.set()

    stats = replay_bag(path, ros_node, rate=10.0, loop=True, stop=stop, on_publish=on_publish)
    assert stats.loops >= 2 and stats.interrupted
    assert published[:10] == published[10:20] == [s for s, _, _ in written]


def test_bag_source_and_helpers(small_bag):
    path, written = small_bag
    with BagSource(path / "small_bag.mcap", topics=["/camera/image"]) as source:
        assert source.path == path
        assert source.topic_types == {"/camera/image": "sensor_msgs/msg/Image"}
        assert [m.timestamp_ns for m in source.messages()] == [s for s, t, _ in written
                                                               if t == "/camera/image"]
    assert parse_remaps(["a:=/b", "/c:=d"]) == {"/a": "/b", "/c": "/d"}
    for bad in ("a", ":=b", "a:="):
        with pytest.raises(ValueError, match="expected OLD:=NEW"):
            parse_remaps([bad])
    assert message_class("std_msgs/msg/String").__name__ == "String"
    with pytest.raises(ImportError):
        message_class("no_such_pkg/msg/Thing")
    with pytest.raises(ValueError):
        replay_bag(path, None, rate=0)


def test_missing_and_corrupt_bags_give_clear_errors(tmp_path):
    with pytest.raises(BagError, match="bag not found") as missing:
        resolve_bag_path(tmp_path / "nope")
    assert missing.value.exit_code == 2
    (tmp_path / "empty_dir").mkdir()
    with pytest.raises(BagError, match="no metadata.yaml") as not_bag:
        resolve_bag_path(tmp_path / "empty_dir")
    assert not_bag.value.exit_code == 2
    broken_bag = tmp_path / "broken"
    write_small_bag(broken_bag)
    mcap = broken_bag / "broken.mcap"
    mcap.write_bytes(mcap.read_bytes()[:40] + b"\0garbage" * 50)
    with pytest.raises(BagError, match=r"cannot read bag .*broken \(corrupt\?\)") as broken:
        BagSource(broken_bag)
    assert broken.value.exit_code == 1
    assert "\n" not in str(broken.value)


def test_cli_replay_exit_codes(ros_node, small_bag, tmp_path, capsys):
    parser = _parser()
    args = parser.parse_args(["replay", str(tmp_path / "missing")])
    assert args.handler(args) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert error == [f"sam3-agent: error: bag not found: {tmp_path / 'missing'}"]
    args = parser.parse_args(["replay", str(small_bag[0]), "--remap", "oops"])
    assert args.handler(args) == 2
    args = parser.parse_args(["replay", str(small_bag[0]), "--rate", "20", "--topics", "/chatter"])
    assert args.handler(args) == 0
    assert "done: 5 messages" in capsys.readouterr().err


@pytest.mark.parametrize("named", [["--topics", "/nothing_here"],
                                   ["--topics", "/chatter", "/nothing_here"],
                                   ["--remap", "/nothing_here:=/image"]])
def test_cli_replay_of_a_topic_not_in_the_bag_exits_2_and_names_the_bags_topics(
        ros_node, small_bag, capsys, named):
    """issue 33: ``--topics /nothing_here`` played nothing and exited 0."""
    args = _parser().parse_args(["replay", str(small_bag[0]), "--rate", "20", *named])
    assert args.handler(args) == 2
    (error,) = capsys.readouterr().err.strip().splitlines()
    assert error.startswith(f"sam3-agent: error: not in the bag {small_bag[0]}: /nothing_here "
                            "(its topics: ")
    assert "/chatter" in error and "done:" not in error


def test_cli_replay_remap_gives_no_rcl_deprecation_warning(small_bag, tmp_path):
    """issue 33: rcl read the verb's own ``--remap OLD:=NEW`` as a ROS argument and warned
    "This syntax is deprecated"; the CLI's argv is not rcl's."""
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "sam3_agent_ros.cli", "replay", str(small_bag[0]), "--rate", "50",
         "--loopback", "--remap", "/chatter:=/renamed"], capture_output=True, text=True,
        timeout=60, env=dict(os.environ, PYTHONPATH=str(repo)))
    assert done.returncode == 0, done.stderr
    assert "deprecated" not in done.stderr, done.stderr
    assert "/renamed: 5" in done.stderr


def _parser():
    import argparse

    parser = argparse.ArgumentParser(prog="sam3-agent")
    commands.register(parser.add_subparsers(dest="command", required=True))
    return parser
