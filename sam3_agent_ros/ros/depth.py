"""3D targets from aligned depth: the ROS side of ``geometry3d`` (depth + camera_info in,
``~/target``, ``~/targets`` and ``~/markers`` out).

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
from visualization_msgs.msg import MarkerArray

from sam3_agent_ros.config import DepthConfig
from sam3_agent_ros.core.types import stamp_ns
from sam3_agent_ros.geometry3d import (
    as_intrinsics,
    depth_for_colour,
    depth_from_buffer,
    measure_mask,
)
from sam3_agent_ros.image_header import DEFAULT_MAX_PIXELS, pixel_cap_problem
from sam3_agent_ros.ros.conversions import frame_stamp_ns
from sam3_agent_ros.ros.qos import DEPTH_QOS, OUTPUT_QOS

DEPTH_TOPIC = "depth"
CAMERA_INFO_TOPIC = "camera_info"
TARGET_TOPIC = "~/target"
TARGETS_TOPIC = "~/targets"
MARKERS_TOPIC = "~/markers"


class DepthTargets:
    """Subscribes ``depth`` and ``camera_info``, measures masks, publishes ``~/target(s)`` and
    ``~/markers``."""

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
        self._markers_pub = node.create_publisher(MarkerArray, MARKERS_TOPIC, OUTPUT_QOS)

    # --- callbacks (executor thread): keep references only --------------------------------------
    def _on_depth(self, msg: Image) -> None:
        with self._lock:
            self._depth_frames.append(msg)

    def _on_camera_info(self, msg: CameraInfo) -> None:
        with self._lock:
            self._camera_info = msg

    # --- queries (worker thread) ----------------------------------------------------------------
    def locate(self, frame: Any, masks: list[Any]) -> list[dict[str, Any]]:
        """Per mask ``{"position": {"x", "y", "z"} | None, "position_error": None | reason,
        "box": {"center", "size", "orientation"} | None, "box_error": None | reason}``
        (``"position_spread_m"`` with a position): ``geometry3d.measure_mask``. Never raises."""
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
        try:
            intrinsics = as_intrinsics(info.k)
        except ValueError as exc:
            reason = f"unusable camera_info: {exc}"
            self._warn_once("camera_info", reason)
            return None, None, reason
        try:  # the colour resolution, the colour image's intrinsics (geometry3d)
            depth_m, intrinsics = depth_for_colour(
                depth_m, (frame.width, frame.height), intrinsics,
                (info.width, info.height) if info.width and info.height else None)
        except ValueError as exc:
            reason = str(exc)
            self._warn_once(f"aspect:{depth_msg.width}x{depth_msg.height}", reason)
            return None, None, reason
        return depth_m, intrinsics, None

    def _measure(self, mask: Any, frame: Any, depth_m, intrinsics) -> dict[str, Any]:
        array = mask.mask
        if array.shape != (frame.height, frame.width):
            return _no_position(f"mask shape {array.shape} differs from the frame "
                                f"({frame.height}, {frame.width})")
        return measure_mask(array, depth_m, intrinsics, self._cfg)

    # --- outputs --------------------------------------------------------------------------------
    def publish_messages(self, target: PointStamped | None, targets: PoseArray,
                         markers: MarkerArray | None = None) -> None:
        """``~/target`` (the first selected mask's point, when it has one), ``~/targets`` (one
        pose per mask with a position) and ``~/markers``, as built by ``outputs``. Never
        raises."""
        try:
            if target is not None:
                self._target_pub.publish(target)
            self._targets_pub.publish(targets)
        except Exception as exc:  # noqa: BLE001
            self._warn_once("publish", f"cannot publish 3D targets: {type(exc).__name__}: {exc}")
        if markers is not None:
            self.publish_markers(markers)

    def publish_markers(self, markers: MarkerArray) -> None:
        """``~/markers`` (an answer's or a follow update's boxes). Never raises."""
        try:
            self._markers_pub.publish(markers)
        except Exception as exc:  # noqa: BLE001
            self._warn_once("markers", f"cannot publish ~/markers: {type(exc).__name__}: {exc}")

    def markers_wanted(self) -> bool:
        """Whether anybody subscribes to ``~/markers`` (follow mode builds them only then)."""
        publisher = self._markers_pub
        return publisher is not None and publisher.get_subscription_count() > 0

    def destroy(self) -> None:
        """Drop the subscriptions, publishers and buffered messages; never raises."""
        node = self._node
        try:
            for sub in (self._depth_sub, self._info_sub):
                if sub is not None:
                    node.destroy_subscription(sub)
            for pub in (self._target_pub, self._targets_pub, self._markers_pub):
                if pub is not None:
                    node.destroy_publisher(pub)
        except Exception as exc:  # noqa: BLE001 (teardown goes on)
            self._logger.warning(f"depth: destroy failed: {exc}")
        self._depth_sub = self._info_sub = None
        self._target_pub = self._targets_pub = self._markers_pub = None
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
    """A mask without 3D: no position and no box, for the same reason."""
    reason = reason or "no position"
    return {"position": None, "position_error": reason, "box": None, "box_error": reason}
