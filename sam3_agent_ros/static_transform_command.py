"""``sam3-agent static-transform``: publish one static transform on ``/tf_static``, as tf2_ros's
``static_transform_publisher`` does, from the venv (a fixed camera on a desk or a robot without
robot_state_publisher needs no ROS install).

The argument forms are tf2_ros's (its program's parsing, as documented in its usage text):
- flags: ``--x X --y Y --z Z`` (metres, default 0), the rotation as ``--qx --qy --qz --qw``
  (default the identity) or as ``--roll --pitch --yaw`` (radians, fixed axes X, Y, Z), not both,
  and ``--frame-id PARENT --child-frame-id CHILD`` (both required);
- the old positional forms: ``x y z yaw pitch roll PARENT CHILD`` and ``x y z qx qy qz qw PARENT
  CHILD`` (not mixed with the flags, except the roll/pitch/yaw ones tf2 also lets through).
Plus ``--loopback`` (DDS on this host only, as the other verbs) and ``-h``/``--help``. A bad
command line is one line on stderr and exit 2 (tf2 exits 1); the quaternion is normalised (a zero
one is refused), the frames must differ.

The transform goes out once on ``/tf_static``: reliable, transient local, keep last 1 (what
tf2_ros's StaticTransformBroadcaster offers; a listener that starts later still gets it), stamped
with the time it was published, and stays there until Ctrl-C (or SIGTERM) ends the verb.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
from dataclasses import dataclass
from typing import Any

EXIT_OK, EXIT_USAGE = 0, 2
VERB = "static-transform"
NUMBER_FLAGS = ("--x", "--y", "--z", "--qx", "--qy", "--qz", "--qw", "--roll", "--pitch",
                "--yaw")
TEXT_FLAGS = ("--frame-id", "--child-frame-id")
QUATERNION_FLAGS = ("--qx", "--qy", "--qz", "--qw")
EULER_FLAGS = ("--roll", "--pitch", "--yaw")
USAGE = (f"usage: sam3-agent {VERB} [--x X] [--y Y] [--z Z] [--qx QX] [--qy QY] [--qz QZ] "
         "[--qw QW] [--roll ROLL] [--pitch PITCH] [--yaw YAW] --frame-id FRAME_ID "
         "--child-frame-id CHILD_FRAME_ID [--loopback]\n"
         f"       sam3-agent {VERB} X Y Z YAW PITCH ROLL FRAME_ID CHILD_FRAME_ID [--loopback]\n"
         f"       sam3-agent {VERB} X Y Z QX QY QZ QW FRAME_ID CHILD_FRAME_ID [--loopback]")
HELP = f"""{USAGE}

Publish a static transform FRAME_ID -> CHILD_FRAME_ID on /tf_static (reliable, transient local)
until Ctrl-C, with the argument forms of tf2_ros's static_transform_publisher. Translation in
metres; rotation as a quaternion or as roll, pitch, yaw in radians (fixed axes X, Y, Z), not
both. --loopback keeps DDS on this machine. Example, a camera's optical frame under its link:
  sam3-agent {VERB} --roll -1.5708 --yaw -1.5708 --frame-id camera_link \\
      --child-frame-id camera_color_optical_frame"""


@dataclass(frozen=True)
class StaticTransform:
    """One transform: ``translation`` (m), ``rotation`` (x, y, z, w: unit), the frames."""

    translation: tuple[float, float, float]
    rotation: tuple[float, float, float, float]
    frame_id: str
    child_frame_id: str
    loopback: bool = False
    old_style: bool = False


class UsageError(ValueError):
    """A command line that does not fit (its message: one line, what is wrong)."""


def rpy_to_quaternion(roll: float, pitch: float, yaw: float) -> tuple[float, float, float,
                                                                       float]:
    """(x, y, z, w) of roll about X, then pitch about Y, then yaw about Z (fixed axes; tf2's
    setRPY)."""
    cr, sr = math.cos(roll / 2), math.sin(roll / 2)
    cp, sp = math.cos(pitch / 2), math.sin(pitch / 2)
    cy, sy = math.cos(yaw / 2), math.sin(yaw / 2)
    return (sr * cp * cy - cr * sp * sy, cr * sp * cy + sr * cp * sy,
            cr * cp * sy - sr * sp * cy, cr * cp * cy + sr * sp * sy)


def parse_transform(words: list[str]) -> StaticTransform | None:
    """The transform the command line asks for (None: ``--help``); ``UsageError`` when it does
    not fit."""
    numbers: dict[str, float] = {}
    texts: dict[str, str] = {}
    positional: list[str] = []
    loopback = False
    index = 0
    while index < len(words):
        word = words[index]
        if word in ("-h", "--help"):
            return None
        if word == "--loopback":
            loopback = True
        elif word in NUMBER_FLAGS or word in TEXT_FLAGS:
            if index + 1 >= len(words):
                raise UsageError(f"{word} needs a value")
            index += 1
            if word in TEXT_FLAGS:
                texts[word] = words[index]
            else:
                numbers[word] = _number(word, words[index])
        elif word.startswith("--"):
            raise UsageError(f"unknown option {word}")
        else:
            positional.append(word)
        index += 1
    if any(flag in numbers for flag in QUATERNION_FLAGS) and any(
            flag in numbers for flag in EULER_FLAGS):
        raise UsageError("cannot give both a quaternion (--qx --qy --qz --qw) and Euler angles "
                         "(--roll --pitch --yaw)")
    old_style = len(positional) in (8, 9)
    if old_style:
        if texts or any(flag in numbers for flag in ("--x", "--y", "--z", *QUATERNION_FLAGS)):
            raise UsageError("cannot mix the old positional form with the flags")
        names = ["--x", "--y", "--z", *(("--yaw", "--pitch", "--roll") if len(positional) == 8
                                        else QUATERNION_FLAGS)]
        for name, word in zip(names, positional):
            numbers[name] = _number(name.lstrip("-"), word)
        texts["--frame-id"], texts["--child-frame-id"] = positional[-2], positional[-1]
    elif positional:
        raise UsageError(f"unexpected arguments {' '.join(positional)!r} (the old form takes 8 "
                         "or 9: x y z yaw pitch roll | qx qy qz qw, then the two frames)")
    frame, child = texts.get("--frame-id", ""), texts.get("--child-frame-id", "")
    if not frame:
        raise UsageError("the parent frame is missing or empty (--frame-id FRAME_ID)")
    if not child:
        raise UsageError("the child frame is missing or empty (--child-frame-id CHILD_FRAME_ID)")
    if frame == child:
        raise UsageError(f"the child frame cannot be the parent frame ({frame!r})")
    if any(flag in numbers for flag in EULER_FLAGS):
        rotation = rpy_to_quaternion(numbers.get("--roll", 0.0), numbers.get("--pitch", 0.0),
                                     numbers.get("--yaw", 0.0))
    else:
        rotation = (numbers.get("--qx", 0.0), numbers.get("--qy", 0.0),
                    numbers.get("--qz", 0.0), numbers.get("--qw", 1.0))
    length = math.sqrt(sum(c * c for c in rotation))
    if not length > 1e-9:
        raise UsageError("the quaternion has zero length: give a rotation (qw 1: none)")
    x, y, z, w = (c / length for c in rotation)
    return StaticTransform((numbers.get("--x", 0.0), numbers.get("--y", 0.0),
                            numbers.get("--z", 0.0)), (x, y, z, w), frame, child, loopback,
                           old_style)


def _number(name: str, word: str) -> float:
    try:
        value = float(word)
    except ValueError:
        raise UsageError(f"{name} must be a number, got {word!r}") from None
    if not math.isfinite(value):
        raise UsageError(f"{name} must be a finite number, got {word!r}")
    return value


def register(subparsers: Any) -> None:
    """Add ``static-transform``; its words are parsed here, not by argparse (negative numbers,
    the old positional forms)."""
    parser = subparsers.add_parser(
        VERB, add_help=False, prefix_chars="+",
        help="publish a static transform on /tf_static (like tf2_ros static_transform_publisher)",
        description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("words", nargs="*")
    parser.set_defaults(handler=cmd_static_transform)


def cmd_static_transform(args: argparse.Namespace) -> int:
    try:
        transform = parse_transform(list(args.words))
    except UsageError as exc:
        print(f"sam3-agent {VERB}: {exc} (see --help)", file=sys.stderr)
        return EXIT_USAGE
    if transform is None:
        print(HELP)
        return EXIT_OK
    return publish(transform)


def publish(transform: StaticTransform) -> int:
    """Publish ``transform`` on /tf_static and hold it until SIGINT or SIGTERM."""
    from geometry_msgs.msg import TransformStamped
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
    from tf2_msgs.msg import TFMessage  # our wire-identical copy in the PyPI venv

    from sam3_agent_ros.graph.verb_node import verb_node

    qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1,
                     reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
    with verb_node(f"static_transform_publisher_{os.getpid()}", transform.loopback,
                          stop_signals=(signal.SIGINT, signal.SIGTERM)) as ros:
        publisher = ros.node.create_publisher(TFMessage, "/tf_static", qos)
        item = TransformStamped()
        item.header.stamp = ros.node.get_clock().now().to_msg()
        item.header.frame_id, item.child_frame_id = transform.frame_id, transform.child_frame_id
        tx, ty, tz = transform.translation
        item.transform.translation.x, item.transform.translation.y = tx, ty
        item.transform.translation.z = tz
        rotation = item.transform.rotation
        rotation.x, rotation.y, rotation.z, rotation.w = transform.rotation
        publisher.publish(TFMessage(transforms=[item]))
        if transform.old_style:
            print(f"sam3-agent {VERB}: the old positional form is deprecated in tf2_ros; the "
                  "flags (--x ... --frame-id ...) say the same", file=sys.stderr)
        print(f"publishing {transform.frame_id} -> {transform.child_frame_id} on /tf_static: "
              f"translation ({tx:g}, {ty:g}, {tz:g}), rotation (x, y, z, w) "
              f"({', '.join(f'{c:.6g}' for c in transform.rotation)}); Ctrl-C to stop",
              flush=True)
        ros.stop.wait()
    return EXIT_OK
