"""DepthTargets over real rclpy (DDS confined to loopback): depth + camera_info in, ~/target and
~/targets out. Every test gets its own namespace, so its topics see nothing of the others."""

from __future__ import annotations

import itertools
import os
import threading
import time

import numpy as np
import pytest
import rclpy
from geometry_msgs.msg import PointStamped, PoseArray
from rclpy.executors import MultiThreadedExecutor
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import Header

from sam3_agent_ros.config import Config
from sam3_agent_ros.core.types import Frame, Mask
from sam3_agent_ros.ros.dds import apply_loopback_env
from sam3_agent_ros.ros.depth import DepthTargets
from sam3_agent_ros.scene import render_scene

COLOUR_FRAME = "camera_color_optical_frame"
STAMP = (1_700_000_000, 250_000_000)
TIMEOUT_S = 10.0
_namespaces = itertools.count()


def _qos(reliable: bool) -> QoSProfile:
    reliability = ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=reliability)


@pytest.fixture(scope="module")
def ros_context():
    saved = dict(os.environ)
    apply_loopback_env()  # keeps a domain id / profile already exported by the session
    context = rclpy.Context()
    rclpy.init(context=context)
    executor = MultiThreadedExecutor(num_threads=2, context=context)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    yield context, executor
    executor.shutdown()
    rclpy.shutdown(context=context)
    spinner.join(timeout=5)
    os.environ.clear()
    os.environ.update(saved)


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
        self.targets = DepthTargets(self.node, config.depth)
        self.depth_pub = self.feeder.create_publisher(Image, "depth", _qos(depth_reliable))
        self.info_pub = self.feeder.create_publisher(CameraInfo, "camera_info", _qos(False))
        self.received: dict[str, list] = {"target": [], "targets": []}
        self.feeder.create_subscription(PointStamped, "sam3_agent/target",
                                        self.received["target"].append, _qos(True))
        self.feeder.create_subscription(PoseArray, "sam3_agent/targets",
                                        self.received["targets"].append, _qos(True))
        self.executor = executor
        executor.add_node(self.node)
        executor.add_node(self.feeder)
        wait_for(lambda: self.depth_pub.get_subscription_count() >= 1
                 and self.info_pub.get_subscription_count() >= 1
                 and self.targets._target_pub.get_subscription_count() >= 1
                 and self.targets._targets_pub.get_subscription_count() >= 1, "matching")

    def send_info(self, k, width: int, height: int) -> None:
        info = CameraInfo(width=width, height=height)
        info.header.frame_id = COLOUR_FRAME
        info.k = [float(v) for v in np.asarray(k, np.float64).ravel()]
        self.info_pub.publish(info)

    def send_depth(self, data: np.ndarray, encoding: str, stamp=STAMP, step: int | None = None,
                   frame_id: str = COLOUR_FRAME) -> None:
        height, width = data.shape[:2]
        msg = Image(height=height, width=width, encoding=encoding,
                    step=step if step is not None else width * data.itemsize)
        msg.header.frame_id = frame_id
        msg.header.stamp.sec, msg.header.stamp.nanosec = stamp
        msg.data = data.tobytes()
        self.depth_pub.publish(msg)

    def locate_when(self, frame, masks, ready) -> list[dict]:
        """locate() again until ``ready(extras)`` (the inputs travel asynchronously)."""
        extras: list[dict] = []

        def attempt() -> bool:
            extras[:] = self.targets.locate(frame, masks)
            return ready(extras)

        try:
            wait_for(attempt, "a located result")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; last: {extras}") from None
        return extras

    def close(self) -> None:
        self.targets.destroy()
        self.executor.remove_node(self.node)
        self.executor.remove_node(self.feeder)
        self.node.destroy_node()
        self.feeder.destroy_node()


def wait_for(condition, what: str, timeout_s: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


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


def test_16uc1_locate_and_publish(rig, scene):
    r = rig()
    names, masks = scene_masks(scene)
    frame = colour_frame(scene)
    assert "no camera_info" in r.targets.locate(frame, masks)[0]["position_error"]
    r.send_info(scene.intrinsics.K, 640, 480)
    wait_for(lambda: "no depth frame received on /depth_test"
             in r.targets.locate(frame, masks)[0]["position_error"], "camera_info")
    r.send_depth(scene.depth_mm(), "16UC1")
    extras = r.locate_when(frame, masks, has_position)
    for name, extra in zip(names, extras, strict=True):
        assert error_cm(extra["position"], scene.positions[name]) < 1.0, name
        assert extra["position_error"] is None
        assert extra["position_spread_m"] >= 0.0

    header = Header(frame_id=COLOUR_FRAME)
    header.stamp.sec, header.stamp.nanosec = STAMP
    extras[1] = {"position": None, "position_error": "too few valid depth pixels (3 < 20)"}
    r.targets.publish(header, extras)
    wait_for(lambda: r.received["target"] and r.received["targets"], "~/target and ~/targets")
    target = r.received["target"][0]
    assert target.header.frame_id == COLOUR_FRAME
    assert (target.header.stamp.sec, target.header.stamp.nanosec) == STAMP
    truth = scene.positions[names[0]]
    assert [target.point.x, target.point.y, target.point.z] == pytest.approx(truth, abs=0.01)
    poses = r.received["targets"][0]
    assert poses.header.frame_id == COLOUR_FRAME
    assert len(poses.poses) == len(masks) - 1  # the mask without a position has no pose
    assert poses.poses[0].orientation.w == 1.0
    assert poses.poses[1].position.x == pytest.approx(scene.positions[names[2]][0], abs=0.01)


def test_first_mask_without_position_publishes_no_target(rig, scene):
    r = rig()
    header = Header(frame_id=COLOUR_FRAME)
    r.targets.publish(header, [{"position": None, "position_error": "no depth"},
                               {"position": {"x": 0.1, "y": 0.2, "z": 0.9},
                                "position_error": None}])
    wait_for(lambda: r.received["targets"], "~/targets")
    time.sleep(0.2)
    assert r.received["target"] == []
    assert len(r.received["targets"][0].poses) == 1


def test_32fc1_half_resolution_best_effort_with_holes(rig, scene):
    r = rig(depth_reliable=False)
    names, masks = scene_masks(scene)
    half = scene.depth_m[::2, ::2].copy()
    half[::3, ::3] = np.nan
    half[1::4, ::5] = 0.0
    r.send_info(scene.intrinsics.K, 640, 480)
    extras = r.locate_when(colour_frame(scene), masks, lambda e: (
        r.send_depth(half, "32FC1") or has_position(e)))  # best effort: resend until one lands
    for name, extra in zip(names, extras, strict=True):
        assert error_cm(extra["position"], scene.positions[name]) < 1.0, name


def test_camera_info_of_another_resolution_is_scaled(rig, scene):
    r = rig()
    names, masks = scene_masks(scene)
    k = scene.intrinsics
    # The same camera calibrated at 1280x960: K doubles (pixel centres at integer coordinates).
    r.send_info([[2 * k.fx, 0, 2 * k.cx + 0.5], [0, 2 * k.fy, 2 * k.cy + 0.5], [0, 0, 1]],
                1280, 960)
    r.send_depth(scene.depth_mm(), "16UC1")
    extras = r.locate_when(colour_frame(scene), masks, has_position)
    for name, extra in zip(names, extras, strict=True):
        assert error_cm(extra["position"], scene.positions[name]) < 1.0, name


def test_nearest_stamp_is_used_and_far_stamps_are_refused(rig, scene):
    r = rig(Config.from_params({"depth.enabled": True, "depth.max_stamp_diff_s": 0.05}))
    names, masks = scene_masks(scene)
    r.send_info(scene.intrinsics.K, 640, 480)
    sec, nsec = STAMP
    wrong = np.full(scene.depth_m.shape, 2000, np.uint16)  # 2 m everywhere
    r.send_depth(wrong, "16UC1", stamp=(sec - 1, nsec))
    r.send_depth(scene.depth_mm(), "16UC1", stamp=(sec, nsec + 10_000_000))  # 10 ms later
    r.send_depth(wrong, "16UC1", stamp=(sec + 1, nsec))
    extras = r.locate_when(colour_frame(scene), masks,
                           lambda e: has_position(e) and len(r.targets._depth_frames) == 3)
    assert error_cm(extras[0]["position"], scene.positions[names[0]]) < 1.0

    late = colour_frame(scene, stamp=(sec + 5, nsec))
    reason = r.targets.locate(late, masks)[0]["position_error"]
    assert reason.startswith("no depth frame within depth.max_stamp_diff_s=0.05 s")
    assert "(nearest is 4.000 s away)" in reason


def test_bad_depth_messages_give_reasons_not_exceptions(rig, scene):
    r = rig()
    _, masks = scene_masks(scene)
    frame = colour_frame(scene)
    r.send_info(scene.intrinsics.K, 640, 480)

    def reason_after(send) -> str:
        r.targets._depth_frames.clear()
        send()
        extras = r.locate_when(frame, masks, inputs_arrived)
        return extras[0]["position_error"]

    rgb = np.zeros((480, 640, 3), np.uint8)
    assert "unsupported depth encoding 'rgb8'" in reason_after(lambda: r.send_depth(rgb, "rgb8"))
    depth_mm = scene.depth_mm()
    assert "step 640 is smaller" in reason_after(lambda: r.send_depth(depth_mm, "16UC1", step=640))
    short = np.zeros((100, 640), np.uint16)
    # Lie about the height: the data holds 100 rows, the header claims 480.
    msg = Image(height=480, width=640, encoding="16UC1", step=1280, data=short.tobytes())
    msg.header.stamp.sec, msg.header.stamp.nanosec = STAMP
    assert "too short" in reason_after(lambda: r.depth_pub.publish(msg))
    wide = np.zeros((480, 1280), np.uint16)
    assert "aspect ratio" in reason_after(lambda: r.send_depth(wide, "16UC1"))
    # A mask of another size and an uncalibrated camera_info.
    r.send_depth(scene.depth_mm(), "16UC1")
    small = Mask.from_array(np.ones((10, 10), bool), 0.9, (0, 0, 10, 10))
    extras = r.locate_when(frame, [small, masks[0]], lambda e: e[1]["position"] is not None)
    assert "mask shape (10, 10) differs" in extras[0]["position_error"]
    r.send_info(np.zeros(9), 640, 480)
    extras = r.locate_when(frame, masks, lambda e: e[0]["position"] is None)
    assert "unusable camera_info" in extras[0]["position_error"]
    assert r.targets.locate(frame, []) == []


def test_too_few_valid_pixels_reason(rig, scene):
    r = rig()
    r.send_info(scene.intrinsics.K, 640, 480)
    r.send_depth(scene.depth_mm(), "16UC1")
    tiny = np.zeros((480, 640), bool)
    tiny[10, 10:15] = True
    extras = r.locate_when(colour_frame(scene), [Mask.from_array(tiny, 0.9, (10, 10, 15, 11))],
                           inputs_arrived)
    assert extras == [{"position": None,
                       "position_error": "too few valid depth pixels (5 < 20)"}]
