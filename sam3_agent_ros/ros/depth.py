"""3D targets from aligned depth: the ROS side of ``geometry3d`` (depth + camera_info in,
``~/target`` and ``~/targets`` out).

Threads: the subscription callbacks only keep message references (a ring buffer of depth frames,
the latest camera_info); ``locate`` runs on the node's worker thread, picks the depth frame nearest
in stamp to the colour frame, converts only that one and measures every mask. Nothing here raises
into the node: any problem becomes a ``position_error`` reason (and a warning, once per kind).
"""

from __future__ import annotations

import collections
import threading
from typing import Any

from geometry_msgs.msg import PointStamped, PoseArray
from sensor_msgs.msg import CameraInfo, Image

from sam3_agent_ros.config import DepthConfig
from sam3_agent_ros.core.types import stamp_ns
from sam3_agent_ros.geometry3d import (
    as_intrinsics,
    depth_from_buffer,
    locate_mask,
    resize_depth_to,
    scale_intrinsics,
)
from sam3_agent_ros.image_header import DEFAULT_MAX_PIXELS, pixel_cap_problem
from sam3_agent_ros.ros.conversions import frame_stamp_ns
from sam3_agent_ros.ros.qos import DEPTH_QOS, OUTPUT_QOS

DEPTH_TOPIC = "depth"
CAMERA_INFO_TOPIC = "camera_info"
TARGET_TOPIC = "~/target"
TARGETS_TOPIC = "~/targets"
# Colour and depth images whose aspect ratios differ by more than this are not aligned.
ASPECT_TOLERANCE = 0.02
POSITION_DECIMALS = 5  # 10 micrometres


class DepthTargets:
    """Subscribes ``depth`` and ``camera_info``, measures masks, publishes ``~/target(s)``."""

    def __init__(self, node: Any, cfg: DepthConfig, callback_group: Any = None,
                 max_pixels: int = DEFAULT_MAX_PIXELS):
        self._node = node
        self._cfg = cfg
        self._max_pixels = max_pixels  # max_image_pixels: larger depth frames are not converted
        self._logger = node.get_logger()
        self._lock = threading.Lock()
        self._depth_frames: collections.deque = collections.deque(maxlen=cfg.buffer_size)
        self._camera_info: CameraInfo | None = None
        self._warned: set[str] = set()
        self._depth_sub = node.create_subscription(
            Image, DEPTH_TOPIC, self._on_depth, DEPTH_QOS, callback_group=callback_group)
        self._info_sub = node.create_subscription(
            CameraInfo, CAMERA_INFO_TOPIC, self._on_camera_info, DEPTH_QOS,
            callback_group=callback_group)
        self._depth_topic = self._depth_sub.topic_name
        self._info_topic = self._info_sub.topic_name
        self._target_pub = node.create_publisher(PointStamped, TARGET_TOPIC, OUTPUT_QOS)
        self._targets_pub = node.create_publisher(PoseArray, TARGETS_TOPIC, OUTPUT_QOS)

    # --- callbacks (executor thread): keep references only --------------------------------------
    def _on_depth(self, msg: Image) -> None:
        with self._lock:
            self._depth_frames.append(msg)

    def _on_camera_info(self, msg: CameraInfo) -> None:
        with self._lock:
            self._camera_info = msg

    # --- queries (worker thread) ----------------------------------------------------------------
    def locate(self, frame: Any, masks: list[Any]) -> list[dict[str, Any]]:
        """Per mask ``{"position": {"x", "y", "z"} | None, "position_error": None | reason}``
        (``"position_spread_m"`` on success). Never raises."""
        if not masks:
            return []
        try:
            return self._locate(frame, masks)
        except Exception as exc:  # noqa: BLE001 (the 3D step must never break a query)
            reason = f"3D step failed: {type(exc).__name__}: {exc}"
            self._warn_once("internal", reason)
            return [_no_position(reason) for _ in masks]

    def _locate(self, frame: Any, masks: list[Any]) -> list[dict[str, Any]]:
        with self._lock:
            depth_frames = list(self._depth_frames)
            info = self._camera_info
        reason = None
        if info is None:
            reason = f"no camera_info received on {self._info_topic}"
        elif not depth_frames:
            reason = f"no depth frame received on {self._depth_topic}"
        if reason:
            return [_no_position(reason) for _ in masks]

        target_ns = frame_stamp_ns(frame)

        def distance_ns(message: Image) -> int:
            return abs(stamp_ns(message.header.stamp.sec, message.header.stamp.nanosec)
                       - target_ns)

        # reversed: among equal stamps (a re-sent frame) the newest wins.
        depth_msg = min(reversed(depth_frames), key=distance_ns)
        diff_s = distance_ns(depth_msg) / 1e9
        if diff_s > self._cfg.max_stamp_diff_s:
            reason = (f"no depth frame within depth.max_stamp_diff_s={self._cfg.max_stamp_diff_s:g}"
                      f" s of the colour frame (nearest is {diff_s:.3f} s away)")
            return [_no_position(reason) for _ in masks]

        depth_m, intrinsics, reason = self._prepare(frame, depth_msg, info)
        if reason:
            return [_no_position(reason) for _ in masks]
        return [self._measure(mask, frame, depth_m, intrinsics) for mask in masks]

    def _prepare(self, frame: Any, depth_msg: Image, info: CameraInfo):
        """(depth in metres at the colour resolution, colour intrinsics, None) or a reason."""
        too_large = pixel_cap_problem(depth_msg.width, depth_msg.height, self._max_pixels)
        if too_large:  # from the header: nothing converted
            reason = f"unusable depth frame: {too_large}"
            self._warn_once("depth:too-large", reason)
            return None, None, reason
        try:
            depth_m = depth_from_buffer(depth_msg.data, depth_msg.width, depth_msg.height,
                                        depth_msg.step, depth_msg.encoding,
                                        bool(depth_msg.is_bigendian))
        except ValueError as exc:
            reason = f"unusable depth frame: {exc}"
            self._warn_once(f"depth:{depth_msg.encoding}:{type(exc).__name__}", reason)
            return None, None, reason
        if depth_msg.header.frame_id != frame.frame_id:
            self._warn_once(
                f"frame_id:{depth_msg.header.frame_id}",
                f"depth frame_id '{depth_msg.header.frame_id}' differs from the colour frame_id "
                f"'{frame.frame_id}': depth must be registered (aligned) to the colour camera, "
                "e.g. RealSense align_depth.enable:=true (see docs/depth.md)")
        colour_aspect = frame.width / frame.height
        depth_aspect = depth_msg.width / depth_msg.height
        if abs(depth_aspect / colour_aspect - 1.0) > ASPECT_TOLERANCE:
            reason = (f"depth image {depth_msg.width}x{depth_msg.height} does not have the colour "
                      f"image's aspect ratio ({frame.width}x{frame.height}): is it aligned to the "
                      "colour camera?")
            self._warn_once(f"aspect:{depth_msg.width}x{depth_msg.height}", reason)
            return None, None, reason
        try:
            intrinsics = as_intrinsics(info.k)
            if info.width and info.height and (info.width, info.height) != (frame.width,
                                                                             frame.height):
                intrinsics = scale_intrinsics(intrinsics, (info.width, info.height),
                                              (frame.width, frame.height))
        except ValueError as exc:
            reason = f"unusable camera_info: {exc}"
            self._warn_once("camera_info", reason)
            return None, None, reason
        return resize_depth_to(depth_m, frame.height, frame.width), intrinsics, None

    def _measure(self, mask: Any, frame: Any, depth_m, intrinsics) -> dict[str, Any]:
        array = mask.mask
        if array.shape != (frame.height, frame.width):
            return _no_position(f"mask shape {array.shape} differs from the frame "
                                f"({frame.height}, {frame.width})")
        cfg = self._cfg
        located = locate_mask(array, depth_m, intrinsics, erode_px=cfg.erode_px, min_m=cfg.min_m,
                              max_m=cfg.max_m, min_valid_pixels=cfg.min_valid_pixels,
                              statistic=cfg.statistic)
        if located.position is None:
            return _no_position(located.error)
        x, y, z = (round(float(c), POSITION_DECIMALS) for c in located.position)
        return {"position": {"x": x, "y": y, "z": z}, "position_error": None,
                "position_spread_m": round(float(located.spread_m), POSITION_DECIMALS)}

    # --- outputs --------------------------------------------------------------------------------
    def publish_messages(self, target: PointStamped | None, targets: PoseArray) -> None:
        """``~/target`` (the first selected mask's point, when it has one) and ``~/targets`` (one
        pose per mask with a position), as built by ``outputs.target_messages``. Never raises."""
        try:
            if target is not None:
                self._target_pub.publish(target)
            self._targets_pub.publish(targets)
        except Exception as exc:  # noqa: BLE001
            self._warn_once("publish", f"cannot publish 3D targets: {type(exc).__name__}: {exc}")

    def destroy(self) -> None:
        """Drop the subscriptions, publishers and buffered messages; never raises."""
        node = self._node
        try:
            for sub in (self._depth_sub, self._info_sub):
                if sub is not None:
                    node.destroy_subscription(sub)
            for pub in (self._target_pub, self._targets_pub):
                if pub is not None:
                    node.destroy_publisher(pub)
        except Exception as exc:  # noqa: BLE001 (teardown goes on)
            self._logger.warning(f"depth: destroy failed: {exc}")
        self._depth_sub = self._info_sub = self._target_pub = self._targets_pub = None
        with self._lock:
            self._depth_frames.clear()
            self._camera_info = None

    def _warn_once(self, key: str, message: str) -> None:
        with self._lock:
            if key in self._warned:
                return
            self._warned.add(key)
        self._logger.warning(message)


def start_depth(node: Any, cfg: DepthConfig, max_pixels: int) -> DepthTargets | None:
    """``DepthTargets`` on the node's default callback group (activation, ``depth.enabled``);
    None, said in the log, when they cannot be created: the node then answers without 3D."""
    try:
        return DepthTargets(node, cfg, callback_group=node.default_callback_group,
                            max_pixels=max_pixels)
    except Exception as exc:  # noqa: BLE001
        node.get_logger().error(f"depth disabled: {type(exc).__name__}: {exc}")
        return None


def _no_position(reason: str | None) -> dict[str, Any]:
    return {"position": None, "position_error": reason or "no position"}
