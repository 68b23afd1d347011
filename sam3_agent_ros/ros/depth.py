"""Aligned depth in: the ROS side of ``geometry/`` (the ``depth`` and ``camera_info``
subscriptions, each colour frame's depth frame and camera model; the 3D outputs are the outputs
room's, ``ros/outputs.py``).

Threads: the subscription callbacks only keep message references (``frame_world.DepthRing``:
bounded in count, ``depth.buffer_size``, and in bytes, ``depth.buffer_mib``, checked on arrival
with the pixel cap) and the calibrations by stamp (``camera_model.CalibrationHistory``). When a
query takes its colour frame, ``bind`` pins the depth frame nearest its stamp (a nearer one that
arrives next replaces it) and the camera_info in force then (``DepthBinding``, carried by the
frame's world): a 30 s answer, or a refinement minutes later, is measured on exactly those,
whatever the ring holds by then. ``measure`` (called by the one 3D step,
``pipeline.three_d.measure_3d``) runs on the node's worker thread: the frame's binding (or, for
a frame without one, e.g. a follow update measured at once, the ring's nearest now), that
camera model checked against the frame (``camera_model.image_intrinsics``: size, binning/ROI,
focal lengths, principal point), only that depth frame converted and handed, as a
``pipeline.three_d.PreparedDepth``, to the pipeline, which measures the masks on it (this
module measures nothing itself). Nothing here raises into the node: any problem becomes a
``position_error`` reason
(and a warning, once per kind: the kinds are fixed names, never outside text, and every outside
text in a log line is escaped with ``for_log``); the camera model's verdict goes to
``/diagnostics`` (``health.camera_model_checked``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from sensor_msgs.msg import CameraInfo, Image

from sam3_agent_ros.config import DepthConfig
from sam3_agent_ros.core.types import stamp_ns
from sam3_agent_ros.core.untrusted_text import for_log
from sam3_agent_ros.geometry.camera_model import (
    CalibrationHistory,
    CameraModel,
    CameraModelError,
    image_intrinsics,
)
from sam3_agent_ros.geometry.depth_image import depth_for_colour, depth_from_buffer
from sam3_agent_ros.geometry.measure import PixelSink
from sam3_agent_ros.geometry.measurement import Measurement
from sam3_agent_ros.image_header import DEFAULT_MAX_PIXELS, pixel_cap_problem
from sam3_agent_ros.pipeline.frame_world import DepthPin, DepthRing, world_of
from sam3_agent_ros.pipeline.three_d import PreparedDepth
from sam3_agent_ros.ros.conversions import frame_stamp_ns
from sam3_agent_ros.ros.qos import DEPTH_QOS

DEPTH_TOPIC = "depth"
CAMERA_INFO_TOPIC = "camera_info"
ID_LOG_CHARS = 80  # the most of one frame_id a warning repeats
WARNING_CHARS = 1000  # the most of one warning
REASON_CHARS = 300  # the most of a depth frame's problem that a position_error repeats


@dataclass
class DepthBinding:
    """A colour frame's depth (``pin``: the depth frame nearest its stamp) and the camera model in
    force at its stamp (None: none known when bound; looked up again when measured)."""

    pin: DepthPin
    model: CameraModel | None = None

    @property
    def nbytes(self) -> int:
        return self.pin.nbytes


def camera_model_of(msg: CameraInfo) -> CameraModel:
    """A sensor_msgs/CameraInfo's camera model (K, P, D and its model, size, binning, ROI)."""
    roi = msg.roi
    return CameraModel.from_values(msg.k, msg.width, msg.height, msg.binning_x, msg.binning_y,
                                   (roi.x_offset, roi.y_offset, roi.width, roi.height),
                                   p=msg.p, d=msg.d, distortion_model=msg.distortion_model)


class DepthTargets:
    """Subscribes ``depth`` and ``camera_info``; ``measure``: masks' 3D fields on a frame's
    depth, prepared here and measured by ``pipeline.three_d.PreparedDepth`` (the pixels they
    come from go to a pixel sink)."""

    def __init__(self, node: Any, cfg: DepthConfig, callback_group: Any = None,
                 max_pixels: int = DEFAULT_MAX_PIXELS, health: Any = None):
        self._node = node
        self._cfg = cfg
        self._max_pixels = max_pixels  # max_image_pixels: larger depth frames are not converted
        self._logger = node.get_logger()
        self._lock = threading.Lock()
        self._ring = DepthRing(cfg.buffer_size, cfg.buffer_mib * 2**20,
                               close_after_ns=int(cfg.max_stamp_diff_s * 1e9))
        self._refused: str | None = None  # why the newest depth frame was refused on arrival
        self._received = False  # a depth frame arrived (kept or refused)
        self._calibrations = CalibrationHistory()  # camera_info by stamp
        self._health = health  # a HealthRecorder (/diagnostics) or None
        self._warned: set[str] = set()  # fixed kinds, never outside text: bounded
        self._depth_sub = node.create_subscription(
            Image, DEPTH_TOPIC, self._on_depth, DEPTH_QOS, callback_group=callback_group)
        self._info_sub = node.create_subscription(
            CameraInfo, CAMERA_INFO_TOPIC, self._on_camera_info, DEPTH_QOS,
            callback_group=callback_group)
        self._depth_topic = self._depth_sub.topic_name
        self._info_topic = self._info_sub.topic_name
        self._last_prepared: tuple[Any, Image, tuple[Any, Any, str | None]] | None = None

    # --- callbacks (executor thread): keep references only --------------------------------------
    def _on_depth(self, msg: Image) -> None:
        """Kept by reference, within the pixel cap and ``depth.buffer_mib`` (from the header
        and the buffer's length: nothing converted)."""
        self._received = True
        problem = pixel_cap_problem(msg.width, msg.height, self._max_pixels)
        if problem is None:
            stamp = stamp_ns(msg.header.stamp.sec, msg.header.stamp.nanosec)
            problem = self._ring.add(stamp, len(msg.data), msg)
        if problem is not None:
            self._refused = f"depth frame refused on arrival: {problem}"
            self._warn_once("depth:refused", f"{self._refused} (said once)")
        else:
            self._refused = None

    def _on_camera_info(self, msg: CameraInfo) -> None:
        model = camera_model_of(msg)
        stamp = stamp_ns(msg.header.stamp.sec, msg.header.stamp.nanosec)
        with self._lock:
            self._calibrations.add(stamp, model)

    @property
    def buffered_bytes(self) -> int:
        """Bytes of the depth frames buffered now (at most ``depth.buffer_mib``)."""
        return self._ring.kept_bytes

    def bind(self, stamp: int) -> DepthBinding:
        """When a query takes its colour frame (stamp in ns): its depth frame and camera model,
        pinned (cheap: the executor may call it)."""
        with self._lock:
            model, _ = self._calibrations.at(stamp)
        return DepthBinding(self._ring.pin(stamp), model)

    # --- queries (worker thread) ----------------------------------------------------------------
    def measure(self, frame: Any, masks: list[Any],
                pixels_to: PixelSink | None = None) -> list[dict[str, Any]]:
        """Per mask the result JSON's 3D fields (``pipeline.three_d.PreparedDepth.measure`` on
        the frame's depth, ``prepared``; ``pixels_to`` takes the pixels with valid depth they
        come from, before the boxes are fitted). Never raises."""
        if not masks:
            return []
        try:
            return self.prepared(frame).measure(frame, masks, pixels_to)
        except Exception as exc:  # noqa: BLE001 (the 3D step must never break a query)
            reason = f"3D step failed: {type(exc).__name__}: {exc}"
            self._warn_once("internal", reason)
            return [Measurement.missing(reason).to_json() for _ in masks]

    def prepared(self, frame: Any) -> PreparedDepth:
        """The frame's depth at the colour resolution and its intrinsics, or why there are
        none (``_prepared``)."""
        depth_m, intrinsics, reason = self._prepared(frame)
        return PreparedDepth(depth_m, intrinsics, reason, self._cfg)

    def _prepared(self, frame: Any) -> tuple[Any, Any, str | None]:
        """``_prepare`` of the frame's depth: the depth frame and camera model bound when its
        query took it (``bind``), else the ring's nearest now; reused for the same colour frame
        and depth frame (an answer and a follow update on one frame convert once)."""
        target_ns = frame_stamp_ns(frame)
        world = world_of(frame)
        binding = world.depth if world is not None else None
        if not isinstance(binding, DepthBinding) or binding.pin.stamp_ns != target_ns:
            binding = DepthBinding(self._ring.pin(target_ns, keep_open=False))
        model = binding.model
        if model is None:
            with self._lock:
                have_info = len(self._calibrations) > 0
                model, missing = self._calibrations.at(target_ns)
            if not have_info:
                return None, None, f"no camera_info received on {self._info_topic}"
            if model is None:
                return None, None, (f"no camera_info for the colour frame's stamp on "
                                    f"{self._info_topic}: {missing}")
        best = binding.pin.best
        if best is None:
            refused = self._refused
            if refused is not None:
                return None, None, f"no depth frame kept on {self._depth_topic}: {refused}"
            return None, None, f"no depth frame received on {self._depth_topic}"
        depth_msg = best.message
        diff_s = (binding.pin.distance_ns() or 0) / 1e9
        if diff_s > self._cfg.max_stamp_diff_s:
            refused = f"; the newest {self._refused}" if self._refused is not None else ""
            return None, None, (
                f"no depth frame within depth.max_stamp_diff_s={self._cfg.max_stamp_diff_s:g}"
                f" s of the colour frame (nearest is {diff_s:.3f} s away){refused}")
        key = (id(depth_msg), id(model), target_ns, frame.width, frame.height)
        with self._lock:
            cached = self._last_prepared
        if cached is not None and cached[0] == key and cached[1] is depth_msg:
            return cached[2]
        prepared = self._prepare(frame, depth_msg, model)
        with self._lock:  # holds the message too: its id cannot be reused meanwhile
            self._last_prepared = (key, depth_msg, prepared)
        return prepared

    def _prepare(self, frame: Any, depth_msg: Image, model: CameraModel):
        """(depth in metres at the colour resolution, colour intrinsics, None) or a reason."""
        try:  # the camera model must fit the colour frame: else no 3D (camera_model.py)
            intrinsics = image_intrinsics(model, (frame.width, frame.height),
                                          rectified=self._cfg.rectified)
        except CameraModelError as exc:
            reason = f"unusable camera_info: {exc}"
            self._camera_model_checked(reason, model)
            self._warn_once("camera_info", reason)
            return None, None, reason
        self._camera_model_checked(None, model, intrinsics)
        too_large = pixel_cap_problem(depth_msg.width, depth_msg.height, self._max_pixels)
        if too_large:  # from the header: nothing converted
            reason = f"unusable depth frame: {too_large}"
            self._warn_once("depth:too-large", reason)
            return None, None, reason
        try:
            depth_m = depth_from_buffer(depth_msg.data, depth_msg.width, depth_msg.height,
                                        depth_msg.step, depth_msg.encoding,
                                        bool(depth_msg.is_bigendian))
        except ValueError as exc:  # may quote the peer's encoding: clipped, escaped
            reason = f"unusable depth frame: {for_log(exc, REASON_CHARS)}"
            self._warn_once("depth:unusable", reason)
            return None, None, reason
        if depth_msg.header.frame_id != frame.frame_id:
            self._warn_once(
                "frame_id",
                f"depth frame_id '{for_log(depth_msg.header.frame_id, ID_LOG_CHARS)}' differs "
                f"from the colour frame_id '{for_log(frame.frame_id, ID_LOG_CHARS)}': depth must "
                "be registered (aligned) to the colour camera, e.g. RealSense "
                "align_depth.enable:=true (see docs/depth.md; said once)")
        try:  # depth at the colour resolution (geometry.depth_image)
            depth_m, intrinsics = depth_for_colour(depth_m, (frame.width, frame.height),
                                                   intrinsics)
        except ValueError as exc:
            reason = str(exc)
            self._warn_once("depth:aspect", reason)
            return None, None, reason
        return depth_m, intrinsics, None

    def destroy(self) -> None:
        """Drop the subscriptions and buffered messages; never raises."""
        node = self._node
        try:
            for sub in (self._depth_sub, self._info_sub):
                if sub is not None:
                    node.destroy_subscription(sub)
        except Exception as exc:  # noqa: BLE001 (teardown goes on)
            self._logger.warning(f"depth: destroy failed: {exc}")
        self._depth_sub = self._info_sub = None
        self._ring.clear()
        with self._lock:
            self._calibrations.clear()
            self._last_prepared = None
        if self._health is not None:
            self._health.camera_model_started(False)

    def _camera_model_checked(self, problem: str | None, model: CameraModel,
                              intrinsics: Any = None) -> None:
        if self._health is None:
            return
        summary = model.describe()
        if intrinsics is not None:
            summary += (f", fx={intrinsics.fx:g} fy={intrinsics.fy:g} cx={intrinsics.cx:g} "
                        f"cy={intrinsics.cy:g}")
        self._health.camera_model_checked(problem, summary)

    def _warn_once(self, kind: str, message: str) -> None:
        """Log ``message`` (escaped: it may quote outside text) the first time of ``kind``, a
        fixed name: the memory holds at most one entry per kind whatever the peers send."""
        with self._lock:
            if kind in self._warned:
                return
            self._warned.add(kind)
        self._logger.warning(for_log(message, WARNING_CHARS))


def start_depth(node: Any, cfg: DepthConfig, max_pixels: int,
                health: Any = None) -> DepthTargets | None:
    """``DepthTargets`` on the node's default callback group (activation, ``depth.enabled``);
    None, said in the log, when they cannot be created: the node then answers without 3D."""
    try:
        targets = DepthTargets(node, cfg, callback_group=node.default_callback_group,
                               max_pixels=max_pixels, health=health)
        if health is not None:
            health.camera_model_started()
        return targets
    except Exception as exc:  # noqa: BLE001
        node.get_logger().error(f"depth disabled: {type(exc).__name__}: {exc}")
        return None

