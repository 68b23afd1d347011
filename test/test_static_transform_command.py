"""``sam3-agent static-transform``: tf2_ros static_transform_publisher's argument forms, clear
usage errors (exit 2), and, over rclpy, a listener that starts after it still receives the
transform on /tf_static (transient local)."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sam3_agent_ros.cli import main
from sam3_agent_ros.static_transform_command import UsageError, parse_transform, rpy_to_quaternion
from test.waiting import wait_until

OPTICAL = (-0.5, 0.5, -0.5, 0.5)  # camera_link -> optical frame: roll -pi/2, yaw -pi/2


def test_the_flag_form_with_a_quaternion_or_euler_angles():
    plain = parse_transform(["--x", "0.1", "--y", "-0.2", "--z", "0.5", "--frame-id", "base_link",
                             "--child-frame-id", "camera_link"])
    assert plain.translation == (0.1, -0.2, 0.5) and plain.rotation == (0.0, 0.0, 0.0, 1.0)
    assert (plain.frame_id, plain.child_frame_id, plain.loopback) == ("base_link",
                                                                      "camera_link", False)
    optical = parse_transform(["--roll", str(-math.pi / 2), "--yaw", str(-math.pi / 2),
                               "--frame-id", "camera_link", "--child-frame-id", "optical",
                               "--loopback"])
    assert optical.rotation == pytest.approx(OPTICAL) and optical.loopback
    scaled = parse_transform(["--qz", "2", "--qw", "2", "--frame-id", "a", "--child-frame-id",
                              "b"])
    assert scaled.rotation == pytest.approx((0.0, 0.0, math.sqrt(0.5), math.sqrt(0.5)))
    assert parse_transform(["--help"]) is None and parse_transform(["-h"]) is None


def test_the_old_positional_forms():
    euler = parse_transform(["1", "2", "3", str(math.pi / 2), "0", "0", "odom", "base"])
    assert euler.translation == (1.0, 2.0, 3.0) and euler.old_style
    assert euler.rotation == pytest.approx((0.0, 0.0, math.sqrt(0.5), math.sqrt(0.5)))  # yaw
    quaternion = parse_transform(["0", "0", "-0.5", "0", "0", "0", "1", "odom", "base"])
    assert quaternion.translation == (0.0, 0.0, -0.5)
    assert quaternion.rotation == (0.0, 0.0, 0.0, 1.0)
    assert (quaternion.frame_id, quaternion.child_frame_id) == ("odom", "base")


def test_roll_pitch_yaw_are_fixed_axes_x_y_z():
    x, y, z, w = rpy_to_quaternion(0.3, -0.2, 1.1)
    # q = qz(yaw) * qy(pitch) * qx(roll), by the Hamilton product.
    def product(a, b):
        ax, ay, az, aw = a
        bx, by, bz, bw = b
        return (aw * bx + ax * bw + ay * bz - az * by, aw * by - ax * bz + ay * bw + az * bx,
                aw * bz + ax * by - ay * bx + az * bw, aw * bw - ax * bx - ay * by - az * bz)
    about = [(math.sin(0.15), 0.0, 0.0, math.cos(0.15)), (0.0, math.sin(-0.1), 0.0,
             math.cos(-0.1)), (0.0, 0.0, math.sin(0.55), math.cos(0.55))]
    assert (x, y, z, w) == pytest.approx(product(about[2], product(about[1], about[0])))


@pytest.mark.parametrize(("words", "message"), [
    (["--x", "1", "--child-frame-id", "b"], "parent frame is missing"),
    (["--frame-id", "a"], "child frame is missing"),
    (["--frame-id", "a", "--child-frame-id", "a"], "cannot be the parent frame"),
    (["--qw", "1", "--yaw", "1", "--frame-id", "a", "--child-frame-id", "b"], "both"),
    (["--x", "nan", "--frame-id", "a", "--child-frame-id", "b"], "finite"),
    (["--x", "one", "--frame-id", "a", "--child-frame-id", "b"], "must be a number"),
    (["--x"], "needs a value"),
    (["--speed", "1", "--frame-id", "a", "--child-frame-id", "b"], "unknown option --speed"),
    (["1", "2", "3", "a", "b"], "unexpected arguments"),
    (["1", "2", "3", "0", "0", "0", "a", "b", "--frame-id", "c"], "cannot mix"),
    (["--qw", "0", "--frame-id", "a", "--child-frame-id", "b"], "zero length"),
])
def test_bad_command_lines_are_one_line_and_exit_2(words, message, capsys):
    with pytest.raises(UsageError, match=message):
        parse_transform(words)
    assert main(["static-transform", *words]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("sam3-agent static-transform: ") and message in err
    assert len(err.splitlines()) == 1


def test_help_prints_the_forms(capsys):
    assert main(["static-transform", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--frame-id FRAME_ID" in out and "X Y Z YAW PITCH ROLL" in out


@pytest.mark.ros
def test_a_listener_that_starts_later_receives_it(ros_env):
    """The verb as a user runs it (a process of its own, --loopback); the listener subscribes
    only once it is publishing, with tf2's static QoS, and still gets the transform."""
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
    from tf2_msgs.msg import TFMessage

    from sam3_agent_ros.graph.verb_node import verb_node

    script = Path(sys.executable).parent / "sam3-agent"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "sam3_agent_ros.cli"]
    process = subprocess.Popen(
        [*command, "static-transform", "--x", "0.2", "--z", "0.4", "--roll",
         str(-math.pi / 2), "--yaw", str(-math.pi / 2), "--frame-id", "camera_link",
         "--child-frame-id", "camera_color_optical_frame", "--loopback"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        line = process.stdout.readline()  # printed once the transform is out
        assert line.startswith("publishing camera_link -> camera_color_optical_frame"), (
            line, process.stderr.read() if process.poll() is not None else "")
        received: list = []
        qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100,
                         reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
        with verb_node("static_transform_listener", loopback=True) as ros:
            ros.node.create_subscription(TFMessage, "/tf_static", received.append, qos)
            with ros.spinning():
                wait_until(lambda: received, "the static transform on /tf_static", 30.0)
        item = received[0].transforms[0]
        assert (item.header.frame_id, item.child_frame_id) == ("camera_link",
                                                               "camera_color_optical_frame")
        translation, rotation = item.transform.translation, item.transform.rotation
        assert (translation.x, translation.y, translation.z) == pytest.approx((0.2, 0.0, 0.4))
        assert (rotation.x, rotation.y, rotation.z, rotation.w) == pytest.approx(OPTICAL)
        assert item.header.stamp.sec > 0  # stamped when it was published
    finally:
        process.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 10.0
        while process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, process.stderr.read()
