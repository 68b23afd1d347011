"""3D targets over real rclpy (DDS confined to loopback by test/conftest.py).

First DepthTargets in this process (depth + camera_info in, ~/target and ~/targets out; every test
in its own namespace), then the whole node in a subprocess fed colour + depth + camera_info."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import rclpy
from geometry_msgs.msg import PointStamped, PoseArray
from rclpy.executors import MultiThreadedExecutor
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import Header, String
from visualization_msgs.msg import Marker, MarkerArray

from sam3_agent_demo import sample
from sam3_agent_demo.scene import box_errors, render_scene
from sam3_agent_ros.config import Config
from sam3_agent_ros.core.types import Frame, Mask
from sam3_agent_ros.geometry.measurement import Measurement
from sam3_agent_ros.geometry.rotations import quaternion_to_matrix
from sam3_agent_ros.ros.conversions import rgb8_image
from sam3_agent_ros.ros.dds import apply_loopback_env
from sam3_agent_ros.ros.depth import DepthTargets
from sam3_agent_ros.ros.messages.markers import target_messages
from sam3_agent_ros.ros.outputs import message_type
from sam3_agent_ros.ros.qos import OUTPUT_QOS
from test.ros.helpers import Spinner
from test.waiting import wait_until

COLOUR_FRAME = "camera_color_optical_frame"
REPO_ROOT = Path(__file__).resolve().parents[2]
STAMP = (1_700_000_000, 250_000_000)
_namespaces = itertools.count()


def _qos(reliable: bool) -> QoSProfile:
    reliability = ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=reliability)


@pytest.fixture(scope="module")
def ros_context():
    apply_loopback_env()  # already done by test/conftest.py; kept so the module stands alone
    context = rclpy.Context()
    rclpy.init(context=context)
    executor = MultiThreadedExecutor(num_threads=2, context=context)
    # Each test's nodes are destroyed while this executor spins: Spinner survives rclpy's
    # InvalidHandle race there (a bare executor.spin() thread died of it, and every later test
    # of the module waited in vain for camera_info).
    spinner = Spinner(executor, "test_depth")
    yield context, executor
    spinner.stop()
    executor.shutdown()
    rclpy.shutdown(context=context)


@pytest.fixture(scope="module")
def scene():
    return render_scene()


class Rig:
    """A node under test carrying DepthTargets, plus a feeder node that plays the camera and
    listens to the outputs."""

    def __init__(self, context, executor, config: Config, depth_reliable: bool = True):
        namespace = f"/depth_test_{os.getpid()}_{next(_namespaces)}"
        self.node = rclpy.create_node("sam3_agent", namespace=namespace, context=context)
        self.feeder = rclpy.create_node("camera", namespace=namespace, context=context)
        self.targets = DepthTargets(self.node, config.depth,
                                    max_pixels=config.node.max_image_pixels)
        # The 3D topics the answers go out on (the node's outputs room, ros/outputs.py).
        self.outputs = {name: self.node.create_publisher(message_type(name), name, OUTPUT_QOS)
                        for name in ("~/target", "~/targets", "~/markers")}
        self.depth_pub = self.feeder.create_publisher(Image, "depth", _qos(depth_reliable))
        self.info_pub = self.feeder.create_publisher(CameraInfo, "camera_info", _qos(False))
        self.received: dict[str, list] = {"target": [], "targets": []}
        self.feeder.create_subscription(PointStamped, "sam3_agent/target",
                                        self.received["target"].append, _qos(True))
        self.feeder.create_subscription(PoseArray, "sam3_agent/targets",
                                        self.received["targets"].append, _qos(True))
        self.executor = executor
        self._latest: dict[str, Any] = {}  # the last message sent on each input, for resending
        executor.add_node(self.node)
        executor.add_node(self.feeder)
        wait_until(lambda: self.depth_pub.get_subscription_count() >= 1
                   and self.info_pub.get_subscription_count() >= 1
                   and self.outputs["~/target"].get_subscription_count() >= 1
                   and self.outputs["~/targets"].get_subscription_count() >= 1,
                   "matching")

    def publish_targets(self, target, targets, markers=None) -> None:
        """What the outputs room sends on the 3D topics for an answer."""
        for name, message in (("~/target", target), ("~/targets", targets),
                              ("~/markers", markers)):
            if message is not None:
                self.outputs[name].publish(message)

    def send_info(self, k, width: int, height: int, stamp=(0, 0)) -> None:
        info = CameraInfo(width=width, height=height)
        info.header.frame_id = COLOUR_FRAME
        info.header.stamp.sec, info.header.stamp.nanosec = stamp
        info.k = [float(v) for v in np.asarray(k, np.float64).ravel()]
        self._send("info", info)

    def send_depth(self, data: np.ndarray, encoding: str, stamp=STAMP, step: int | None = None,
                   frame_id: str = COLOUR_FRAME) -> None:
        height, width = data.shape[:2]
        msg = Image(height=height, width=width, encoding=encoding,
                    step=step if step is not None else width * data.itemsize)
        msg.header.frame_id = frame_id
        msg.header.stamp.sec, msg.header.stamp.nanosec = stamp
        msg.data = data.tobytes()
        self._send("depth", msg)

    def _send(self, kind: str, msg: Any) -> None:
        self._latest[kind] = msg
        (self.info_pub if kind == "info" else self.depth_pub).publish(msg)

    def resend(self) -> None:
        """A best-effort reader may miss a sample (or match after it was sent): send again."""
        for kind, msg in list(self._latest.items()):
            self._send(kind, msg)

    def locate_when(self, frame, masks, ready) -> list[dict]:
        """locate() again until ``ready(extras)`` (the inputs travel asynchronously), resending
        the inputs now and then."""
        extras: list[dict] = []
        attempts = itertools.count()

        def attempt() -> bool:
            extras[:] = self.targets.measure(frame, masks)
            if ready(extras):
                return True
            if next(attempts) % 10 == 9:
                self.resend()
            return False

        try:
            wait_until(attempt, "a located result")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; last: {extras}") from None
        return extras

    def close(self) -> None:
        self.targets.destroy()
        self.executor.remove_node(self.node)
        self.executor.remove_node(self.feeder)
        self.node.destroy_node()
        self.feeder.destroy_node()


@pytest.fixture
def rig(ros_context):
    rigs: list[Rig] = []

    def make(config: Config | None = None, **kwargs) -> Rig:
        rigs.append(Rig(*ros_context, config or Config.from_params({"depth.enabled": True}),
                        **kwargs))
        return rigs[-1]

    yield make
    for made in rigs:
        made.close()


def colour_frame(scene, stamp=STAMP) -> Frame:
    return Frame(image=scene.rgb, stamp_sec=stamp[0], stamp_nanosec=stamp[1],
                 frame_id=COLOUR_FRAME)


def scene_masks(scene) -> tuple[list[str], list[Mask]]:
    names = list(scene.positions)
    return names, [Mask.from_array(scene.masks[n], 0.9, (0, 0, 1, 1)) for n in names]


def inputs_arrived(extras) -> bool:
    """locate() saw camera_info and a depth frame (whatever it made of them)."""
    reason = extras[0]["position_error"] or ""
    return not reason.startswith(("no camera_info received", "no depth frame received"))


def has_position(extras) -> bool:
    return bool(extras) and all(e["position"] is not None for e in extras)


def error_cm(position: dict, truth) -> float:
    got = np.array([position["x"], position["y"], position["z"]])
    return float(np.linalg.norm(got - np.asarray(truth))) * 100


def solid_box(frame, name: str):
    """The true box of an object standing on the table (what an answer's box is with the grasp
    scene on, CONTRACTS §12): its top face's, the centre moved half the object's height down
    along the face's normal (away from the camera); and that height."""
    top = frame.true_box(name)
    height = frame.scene.object(name).height
    normal = np.asarray(top.normal, np.float64)
    if normal @ np.asarray(top.center) < 0:
        normal = -normal
    centre = tuple(float(v) for v in np.asarray(top.center) + 0.5 * height * normal)
    return dataclasses.replace(top, center=centre), height


def test_16uc1_locate_and_publish(rig, scene):
    r = rig()
    names, masks = scene_masks(scene)
    frame = colour_frame(scene)
    assert "no camera_info" in r.targets.measure(frame, masks)[0]["position_error"]
    r.send_info(scene.intrinsics.K, 640, 480)  # best effort: sent again until it arrived
    r.locate_when(frame, masks, lambda extras: "no depth frame received on /depth_test"
                  in extras[0]["position_error"])
    r.send_depth(scene.depth_mm(), "16UC1")
    extras = r.locate_when(frame, masks, has_position)
    for name, extra in zip(names, extras, strict=True):
        assert error_cm(extra["position"], scene.positions[name]) < 1.0, name
        assert extra["position_error"] is None
        assert extra["position_spread_m"] >= 0.0
        assert extra["box_error"] is None, name
        if not scene.true_box(name).ambiguous:
            assert error_cm(extra["box"]["center"], scene.true_box(name).center) < 1.0, name

    header = Header(frame_id=COLOUR_FRAME)
    header.stamp.sec, header.stamp.nanosec = STAMP
    extras[1] = {"position": None, "position_error": "too few valid depth pixels (3 < 20)"}
    r.publish_targets(*target_messages(header, [Measurement.from_json(e) for e in extras]))
    wait_until(lambda: r.received["target"] and r.received["targets"], "~/target and ~/targets")
    target = r.received["target"][0]
    assert target.header.frame_id == COLOUR_FRAME
    assert (target.header.stamp.sec, target.header.stamp.nanosec) == STAMP
    truth = scene.positions[names[0]]
    assert [target.point.x, target.point.y, target.point.z] == pytest.approx(truth, abs=0.01)
    poses = r.received["targets"][0]
    assert poses.header.frame_id == COLOUR_FRAME
    assert len(poses.poses) == len(masks) - 1  # the mask without a position has no pose
    for pose, extra in zip(poses.poses, extras[:1] + extras[2:], strict=True):  # the boxes
        box = extra["box"]
        assert [pose.position.x, pose.position.y, pose.position.z] == pytest.approx(
            [box["center"][axis] for axis in "xyz"])
        assert [pose.orientation.x, pose.orientation.y, pose.orientation.z,
                pose.orientation.w] == pytest.approx([box["orientation"][a] for a in "xyzw"])
    assert poses.poses[1].position.x == pytest.approx(scene.positions[names[2]][0], abs=0.01)


def test_a_first_mask_without_position_leaves_the_target_to_the_best_mask_with_one(rig, scene):
    # ~/target is the best mask that has a position (issue 34: it was not published at all).
    r = rig()
    header = Header(frame_id=COLOUR_FRAME)
    r.publish_targets(*target_messages(header, [
        Measurement.missing("no depth"), Measurement(position=(0.1, 0.2, 0.9))]))
    wait_until(lambda: r.received["targets"] and r.received["target"], "~/target(s)")
    assert r.received["target"][0].point.x == pytest.approx(0.1)
    assert len(r.received["targets"][0].poses) == 1


def test_32fc1_half_resolution_best_effort_with_holes(rig, scene):
    r = rig(depth_reliable=False)
    names, masks = scene_masks(scene)
    half = scene.depth_m[::2, ::2].copy()
    half[::3, ::3] = np.nan
    half[1::4, ::5] = 0.0
    r.send_info(scene.intrinsics.K, 640, 480)
    r.send_depth(half, "32FC1")
    extras = r.locate_when(colour_frame(scene), masks, has_position)
    for name, extra in zip(names, extras, strict=True):
        assert error_cm(extra["position"], scene.positions[name]) < 1.0, name
    # The pixels each mask was measured from go to the sink (the target's points are read from
    # them): in the colour image, with the colour intrinsics; the same frame is not converted
    # again.
    frame = colour_frame(scene)
    first, again = PixelsKept(), PixelsKept()
    r.targets.measure(frame, masks, first)
    r.targets.measure(frame, masks, again)
    assert first.intrinsics.fx == pytest.approx(scene.intrinsics.K[0][0])
    assert len(first.pixels) == len(masks)
    for pixels in first.pixels:
        assert pixels is not None and pixels.count > 0
        height, width = pixels.used.shape
        assert pixels.y0 + height <= frame.height and pixels.x0 + width <= frame.width
        truth = scene.depth_m[pixels.y0:pixels.y0 + height, pixels.x0:pixels.x0 + width]
        assert np.median(np.abs(pixels.depth - truth)[pixels.used]) < 0.01
    assert np.shares_memory(first.pixels[0].depth, again.pixels[0].depth)  # converted once


class PixelsKept:
    """A pixel sink that keeps what it is given."""

    pixels: list | None = None
    intrinsics = None

    def take(self, pixels, intrinsics):
        self.pixels, self.intrinsics = list(pixels), intrinsics


def test_without_depth_no_pixels_are_handed_over(rig, scene):
    r = rig()
    _, masks = scene_masks(scene)
    kept = PixelsKept()
    measured = r.targets.measure(colour_frame(scene), masks, kept)
    assert len(measured) == len(masks) and kept.pixels is None


def test_camera_info_of_another_resolution_is_refused_not_scaled(rig, scene):
    """A 1280x720 camera_info for 640x480 frames was scaled unevenly (the box 40 cm off, twice
    its size): now no position and no box, with the size mismatch named."""
    r = rig()
    _, masks = scene_masks(scene)
    k = scene.intrinsics
    r.send_info([[2 * k.fx, 0, 2 * k.cx + 0.5], [0, 1.5 * k.fy, 1.5 * k.cy], [0, 0, 1]],
                1280, 720)
    r.send_depth(scene.depth_mm(), "16UC1")
    extras = r.locate_when(colour_frame(scene), masks, inputs_arrived)
    for extra in extras:
        assert extra["position"] is None and extra["box"] is None, extra
        assert "camera_info is for 1280x720 images but the colour frame is 640x480" in \
            extra["position_error"]
        assert extra["box_error"] == extra["position_error"]


def test_nearest_stamp_is_used_and_far_stamps_are_refused(rig, scene):
    r = rig(Config.from_params({"depth.enabled": True, "depth.max_stamp_diff_s": 0.05}))
    names, masks = scene_masks(scene)
    r.send_info(scene.intrinsics.K, 640, 480)
    sec, nsec = STAMP
    wrong = np.full(scene.depth_m.shape, 2000, np.uint16)  # 2 m everywhere
    r.send_depth(wrong, "16UC1", stamp=(sec - 1, nsec))
    r.send_depth(scene.depth_mm(), "16UC1", stamp=(sec, nsec + 10_000_000))  # 10 ms later
    r.send_depth(wrong, "16UC1", stamp=(sec + 1, nsec))
    extras = r.locate_when(colour_frame(scene), masks, lambda e: has_position(e) and {
        m.header.stamp.sec for m in r.targets._ring.messages()} == {sec - 1, sec, sec + 1})
    assert error_cm(extras[0]["position"], scene.positions[names[0]]) < 1.0

    late = colour_frame(scene, stamp=(sec + 5, nsec))
    reason = r.targets.measure(late, masks)[0]["position_error"]
    assert reason.startswith("no depth frame within depth.max_stamp_diff_s=0.05 s")
    assert "(nearest is 4.000 s away)" in reason


def test_bad_depth_messages_give_reasons_not_exceptions(rig, scene):
    r = rig()
    _, masks = scene_masks(scene)
    frame = colour_frame(scene)
    r.send_info(scene.intrinsics.K, 640, 480)

    def gives_reason(send, expected: str) -> bool:
        """Send a bad depth frame, then locate until that frame (not a copy of the previous one
        still in flight: they share the stamp) is the one used; fails after a timeout."""
        send()
        r.targets._ring.clear()
        extras = r.locate_when(frame, masks,
                               lambda e: expected in (e[0]["position_error"] or ""))
        return extras[0]["position"] is None

    rgb = np.zeros((480, 640, 3), np.uint8)
    assert gives_reason(lambda: r.send_depth(rgb, "rgb8"), "unsupported depth encoding 'rgb8'")
    depth_mm = scene.depth_mm()
    assert gives_reason(lambda: r.send_depth(depth_mm, "16UC1", step=640), "step 640 is smaller")
    short = np.zeros((100, 640), np.uint16)
    # Lie about the height: the data holds 100 rows, the header claims 480.
    msg = Image(height=480, width=640, encoding="16UC1", step=1280, data=short.tobytes())
    msg.header.stamp.sec, msg.header.stamp.nanosec = STAMP
    assert gives_reason(lambda: r._send("depth", msg), "too short")
    wide = np.zeros((480, 1280), np.uint16)
    assert gives_reason(lambda: r.send_depth(wide, "16UC1"), "aspect ratio")
    # A mask of another size and an uncalibrated camera_info.
    r.send_depth(scene.depth_mm(), "16UC1")
    small = Mask.from_array(np.ones((10, 10), bool), 0.9, (0, 0, 10, 10))
    extras = r.locate_when(frame, [small, masks[0]], lambda e: e[1]["position"] is not None)
    assert "mask shape (10, 10) differs" in extras[0]["position_error"]
    r.send_info(np.zeros(9), 640, 480)
    extras = r.locate_when(frame, masks, lambda e: e[0]["position"] is None)
    assert "unusable camera_info" in extras[0]["position_error"]
    assert r.targets.measure(frame, []) == []


def test_a_depth_frame_over_max_image_pixels_is_not_converted(rig, scene):
    """The cap of the colour frames holds for depth: refused on arrival from the header fields
    (never kept), whatever the data, with the reason in position_error."""
    r = rig(Config.from_params({"depth.enabled": True, "max_image_pixels": 640 * 480 - 1}))
    _, masks = scene_masks(scene)
    r.send_info(scene.intrinsics.K, 640, 480)
    r.send_depth(scene.depth_mm(), "16UC1")
    extras = r.locate_when(colour_frame(scene), masks, inputs_arrived)
    assert all(e["position"] is None for e in extras)
    assert extras[0]["position_error"].endswith(
        ": depth frame refused on arrival: 640x480 = 307200 pixels, more than "
        "max_image_pixels=307199")
    assert len(r.targets._ring) == 0 and r.targets.buffered_bytes == 0


def test_too_few_valid_pixels_reason(rig, scene):
    r = rig()
    r.send_info(scene.intrinsics.K, 640, 480)
    r.send_depth(scene.depth_mm(), "16UC1")
    tiny = np.zeros((480, 640), bool)
    tiny[10, 10:15] = True
    extras = r.locate_when(colour_frame(scene), [Mask.from_array(tiny, 0.9, (10, 10, 15, 11))],
                           inputs_arrived)
    reason = "too few valid depth pixels (5 < 20)"
    assert extras == [{"position": None, "position_error": reason, "box": None,
                       "box_error": reason}]


# --- the node, as a user runs it ---------------------------------------------------------------
NODE_NS = "/depth_robot"


def test_node_publishes_the_target_of_the_selected_object(tmp_path):
    """sam3_agent_node (offline backends, depth.enabled) fed a camera's three topics: the
    sample bag's frame of its first query. ``sam3-agent run --depth`` on the same frame saved
    to files gives the same numbers."""
    from test.ros.helpers import Harness, NodeProcess

    scene = sample.render_frame(2.0)
    proc = NodeProcess(NODE_NS, {"depth": {"enabled": True}}, tmp_path)
    harness = Harness("depth_node_test")
    stop = threading.Event()
    camera_thread = None
    try:
        outputs = {"result": String, "target": PointStamped, "targets": PoseArray,
                   "markers": MarkerArray}
        for name, msg_type in outputs.items():
            harness.listen(f"{NODE_NS}/sam3_agent/{name}", msg_type)
        harness.wait_state(proc.name, "active", timeout=60)
        harness.wait_subscribed(f"{NODE_NS}/query")
        for topic, msg_type in (("image", Image), ("depth", Image), ("camera_info", CameraInfo)):
            harness.wait_subscribed(f"{NODE_NS}/{topic}", msg_type)

        colour = rgb8_image(scene.rgb)
        depth = Image(height=480, width=640, encoding="16UC1", step=1280,
                      data=scene.depth_mm().tobytes())
        info = CameraInfo(width=640, height=480)
        info.k = [float(v) for v in scene.intrinsics.K.ravel()]
        colour.header.frame_id = depth.header.frame_id = info.header.frame_id = COLOUR_FRAME
        stamps: list[tuple[int, int]] = []
        send_info = threading.Event()

        def camera() -> None:
            """Colour, aligned depth and (once enabled) camera_info with one stamp per frame."""
            serial = 0
            while not stop.is_set():
                serial += 1
                stamp = (2000 + serial, 1000 * serial)
                for msg in (colour, depth, info):
                    msg.header.stamp.sec, msg.header.stamp.nanosec = stamp
                if send_info.is_set():
                    harness.publisher(f"{NODE_NS}/camera_info", CameraInfo).publish(info)
                harness.publisher(f"{NODE_NS}/depth", Image).publish(depth)
                harness.publisher(f"{NODE_NS}/image", Image).publish(colour)
                stamps.append(stamp)
                stop.wait(0.1)

        def frames_after(count: int) -> None:
            target = len(stamps) + count
            harness.wait_for(lambda: len(stamps) >= target, 10, f"{count} more frames")

        camera_thread = threading.Thread(target=camera, daemon=True)
        camera_thread.start()
        frames_after(3)

        # No camera_info yet: the query still succeeds in 2D and says why there is no position.
        harness.send_query(NODE_NS, {"id": "no-info", "query": "the leftmost blue object"})
        result = harness.wait_result(NODE_NS, "no-info")
        assert result["status"] == "succeeded", result
        assert result["masks"][0]["position"] is None
        assert "no camera_info received" in result["masks"][0]["position_error"]

        send_info.set()
        frames_after(3)
        harness.send_query(NODE_NS, {"id": "with-depth", "query": "the leftmost blue object"})
        result = harness.wait_result(NODE_NS, "with-depth")
        assert result["status"] == "succeeded", result
        mask = result["masks"][0]
        assert mask["position_error"] is None, mask
        assert error_cm(mask["position"], scene.positions["blue_box"]) < 1.0
        stamp = (result["stamp"]["sec"], result["stamp"]["nanosec"])
        assert stamp in stamps

        def stamped(topic: str) -> list:
            return [m for m in harness.messages(f"{NODE_NS}/sam3_agent/{topic}")
                    if (m.header.stamp.sec, m.header.stamp.nanosec) == stamp]

        def stamped_markers() -> list:
            return [marker for array in harness.messages(f"{NODE_NS}/sam3_agent/markers")
                    for marker in array.markers
                    if (marker.header.stamp.sec, marker.header.stamp.nanosec) == stamp]

        target = harness.wait_for(lambda: stamped("target"), 10, "~/target of the query")[0]
        assert target.header.frame_id == COLOUR_FRAME
        got = [target.point.x, target.point.y, target.point.z]
        assert got == pytest.approx(list(scene.positions["blue_box"]), abs=0.01)
        poses = harness.wait_for(lambda: stamped("targets"), 10, "~/targets of the query")[0]
        assert len(poses.poses) == len(result["masks"]) and poses.header.frame_id == COLOUR_FRAME

        # The box: on target (standing on the table: scene.enabled), the pose of ~/targets, a
        # CUBE with a label on ~/markers.
        box = mask["box"]
        assert mask["box_error"] is None, mask
        solid, height = solid_box(scene, "blue_box")
        errors = box_errors(solid, [box["center"][a] for a in "xyz"],
                            [box["size"][a] for a in "xyz"],
                            quaternion_to_matrix([box["orientation"][a] for a in "xyzw"]))
        assert errors.within(), errors.describe()
        assert box["size"]["z"] == pytest.approx(height, abs=0.01)
        assert mask["support"] is not None and mask["support_error"] is None, mask
        pose = poses.poses[0]
        assert [pose.orientation.x, pose.orientation.y, pose.orientation.z,
                pose.orientation.w] == pytest.approx([box["orientation"][a] for a in "xyzw"])
        markers = harness.wait_for(lambda: stamped_markers(), 10, "~/markers of the query")
        assert [m.action for m in markers[:1]] == [Marker.DELETEALL]
        cube, label = markers[1:]
        assert cube.type == Marker.CUBE and cube.header.frame_id == COLOUR_FRAME
        assert [cube.pose.position.x, cube.pose.position.y, cube.pose.position.z] == \
            pytest.approx([box["center"][a] for a in "xyz"])
        assert cube.scale.x == pytest.approx(box["size"]["x"])
        assert label.type == Marker.TEXT_VIEW_FACING
        assert label.text == "the leftmost blue object #1"

        # Follow mode redraws the followed box on later frames (~/markers has a subscriber).
        harness.send_query(NODE_NS, {"id": "followed", "query": "the leftmost blue object",
                                     "follow": True})
        answered = harness.wait_result(NODE_NS, "followed")
        answer_ns = answered["stamp"]["sec"] * 10**9 + answered["stamp"]["nanosec"]

        def followed_cubes() -> list:
            return [m for array in harness.messages(f"{NODE_NS}/sam3_agent/markers")
                    for m in array.markers if m.type == Marker.CUBE
                    and m.header.stamp.sec * 10**9 + m.header.stamp.nanosec > answer_ns]

        cube = harness.wait_for(followed_cubes, 20, "a followed frame's box")[0]
        # a follow update's box is the top face's (the grasp scene is the answers')
        assert cube.id == 1 and cube.pose.position.z == pytest.approx(
            scene.true_box("blue_box").center[2], abs=0.01)
        labels = [m.text for array in harness.messages(f"{NODE_NS}/sam3_agent/markers")
                  for m in array.markers if m.header.stamp == cube.header.stamp
                  and m.type == Marker.TEXT_VIEW_FACING]
        assert labels == ["the leftmost blue object #1"]
        harness.send_query(NODE_NS, {"stop_follow": True})

        # 3D without ROS: the same frame from files gives the same position and box.
        # The grasp scene on both sides, or on neither (a node whose results carry no support).
        scene_on = any("support" in m for m in result["masks"])
        cli = run_cli_on_files(scene, tmp_path / "cli", scene_on)
        assert cli["status"] == "succeeded", cli
        assert [m["box"] for m in cli["masks"]] == [m["box"] for m in result["masks"]]
        assert [m.get("support") for m in cli["masks"]] == [
            m.get("support") for m in result["masks"]]
        assert [m["position"] for m in cli["masks"]] == [m["position"] for m in result["masks"]]
    except (AssertionError, TimeoutError) as exc:
        raise AssertionError(f"{exc}\n--- node log ---\n{proc.log()}") from exc
    finally:
        stop.set()
        if camera_thread is not None:
            camera_thread.join(5)
        harness.close()
        assert proc.stop() == 0, proc.log()
    assert "Traceback" not in proc.log(), proc.log()


def run_cli_on_files(scene, folder: Path, scene_on: bool = True) -> dict:
    """``sam3-agent run --depth`` on the frame saved as a user would: colour PNG, 16-bit depth
    PNG (millimetres), the camera_info dumped as YAML; ``scene_on``: ``scene.enabled``."""
    folder.mkdir()
    cv2.imwrite(str(folder / "colour.png"), cv2.cvtColor(scene.rgb, cv2.COLOR_RGB2BGR))
    cv2.imwrite(str(folder / "depth.png"), scene.depth_mm())
    k = [float(v) for v in scene.intrinsics.K.ravel()]
    (folder / "camera_info.yaml").write_text(f"width: 640\nheight: 480\nk: {k}\n")
    completed = subprocess.run(
        [sys.executable, "-m", "sam3_agent_ros.cli", "run", "--offline",
         "--image", str(folder / "colour.png"), "--query", "the leftmost blue object",
         "--depth", str(folder / "depth.png"), "--camera-info", str(folder / "camera_info.yaml"),
         "-p", f"scene.enabled:={'true' if scene_on else 'false'}"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)
