"""Publishing an answer: the one place where masks on a frame become ROS messages.

Two kinds of answer go out:
- a query's ``Result``: ``~/mask``, ``~/labels``, ``~/overlay``, ``~/overlay/compressed``
  (images), ``~/result`` (JSON) and, with depth, ``~/target`` / ``~/targets`` (CONTRACTS §5,
  §8b); on the way, its ``~/status`` events;
- a follow-mode update (masks tracked on a new frame): ``~/follow/mask``, ``~/follow/labels``,
  ``~/follow/overlay/compressed``, ``~/follow/target`` and ``~/follow/status`` (CONTRACTS §5b).

Building is separate from publishing. ``answer_messages`` / ``follow_messages`` return the
messages (the action server puts them into its result); ``AnswerPublisher`` / ``FollowPublisher``
build only the images somebody subscribes to (publishing a 1080p mono8 image alone costs ~2 ms)
and publish them. Every message carries the header of the frame the masks were computed on.

The images of one answer share their work (``image_messages``): each mask's pixel box is found
once; the label image is painted once and the union mask derived from it; the overlay is drawn
once, at ``overlay.max_side``, for both the raw and the JPEG topic.

Depth is optional and duck-typed: any object with ``locate(frame, masks) -> extras`` (see
``ros/depth.py``); locating never raises into the caller. Publishing runs on the thread that
computed the answer (the query worker or the follow worker), never on the executor.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from geometry_msgs.msg import Point, PointStamped, Pose, PoseArray
from rclpy.qos import QoSProfile
from sensor_msgs.msg import CompressedImage, Image
from std_msgs.msg import Header, String

from sam3_agent_ros import render
from sam3_agent_ros.config import OverlayConfig
from sam3_agent_ros.core.types import Frame, Mask, QueryStatus, Result, StatusEvent
from sam3_agent_ros.core.untrusted_text import for_log
from sam3_agent_ros.masks import PixelBox, pixel_box
from sam3_agent_ros.ros.conversions import frame_header, jpeg_image, mono8_image, rgb8_image
from sam3_agent_ros.ros.qos import OUTPUT_QOS

ERROR_LOG_CHARS = 500  # the most of a result's error that its log line repeats
IMAGE_KINDS = ("mask", "labels", "overlay", "overlay/compressed")  # = the topics ~/<kind>
FOLLOW_IMAGE_KINDS = ("mask", "labels", "overlay/compressed")  # ~/follow/<kind>
FOLLOW_NAMESPACE = "~/follow"
DEFAULT_OVERLAY = OverlayConfig()  # overlay.max_side, overlay.jpeg_quality at their defaults


def image_messages(image: np.ndarray, masks: Sequence[np.ndarray | None], header: Header,
                   kinds: Iterable[str] = IMAGE_KINDS, overlay: OverlayConfig = DEFAULT_OVERLAY,
                   boxes: Sequence[PixelBox | None] | None = None) -> dict[str, Any]:
    """The requested images among ``mask`` (mono8 union, 255), ``labels`` (mono8, k on the k-th
    mask), ``overlay`` (rgb8 frame with the masks drawn, numbered 1..N) and
    ``overlay/compressed`` (the same overlay as JPEG), in the order of ``kinds``.

    Overlays are at most ``overlay.max_side`` px on their longest side; the masks and labels are
    full size. ``boxes``: the masks' pixel boxes when known; a None mask (an object not visible
    on this frame) keeps its number and is drawn nowhere."""
    wanted = list(dict.fromkeys(kinds))
    unknown = [kind for kind in wanted if kind not in IMAGE_KINDS]
    if unknown:
        raise ValueError(f"unknown image kind {unknown[0]!r} (known: {', '.join(IMAGE_KINDS)})")
    shape = image.shape[:2]
    if boxes is None:
        boxes = [None if mask is None else pixel_box(mask) for mask in masks]
    built: dict[str, Any] = {}
    if "mask" in wanted or "labels" in wanted:
        labels = render.label_image(masks, shape, boxes)
        if "labels" in wanted:
            built["labels"] = mono8_image(labels, header)
        if "mask" in wanted:
            built["mask"] = mono8_image(render.union_from_labels(labels), header)
    if "overlay" in wanted or "overlay/compressed" in wanted:
        drawn = render.overlay_image(image, masks, overlay.max_side, boxes)
        if "overlay" in wanted:
            built["overlay"] = rgb8_image(drawn, header)
        if "overlay/compressed" in wanted:
            built["overlay/compressed"] = jpeg_image(drawn, overlay.jpeg_quality, header)
    return {kind: built[kind] for kind in wanted}


def mask_boxes(masks: Sequence[Mask]) -> list[PixelBox | None]:
    """The pixel box of each of an answer's masks (kept by the agent; found when missing)."""
    return [mask.pixel_box if mask.pixel_box is not None else pixel_box(mask.mask)
            for mask in masks]


def target_messages(header: Header, extras: Sequence[dict[str, Any]]
                    ) -> tuple[PointStamped | None, PoseArray]:
    """``~/target`` (the first mask's point, None when it has none) and ``~/targets`` (one pose
    per mask that has a position) from per-mask ``{"position": {"x", "y", "z"} | None}``."""
    points = [_point(extra.get("position")) for extra in extras]
    target = (PointStamped(header=header, point=points[0])
              if points and points[0] is not None else None)
    poses = PoseArray(header=header)
    poses.poses = [Pose(position=p) for p in points if p is not None]
    return target, poses


def locate(depth: Any, frame: Frame, masks: Sequence[Any], logger: Any = None
           ) -> list[dict[str, Any]]:
    """Per-mask positions from ``depth.locate`` (objects with a ``.mask`` array); never raises:
    a failure becomes a ``position_error`` for every mask."""
    try:
        return depth.locate(frame, list(masks))
    except Exception as exc:  # noqa: BLE001 (the 3D step must never break an answer)
        reason = f"3D step failed: {type(exc).__name__}: {exc}"
        if logger is not None:
            logger.warning(f"depth: locating the masks failed: {exc}")
        return [{"position": None, "position_error": reason} for _ in masks]


@dataclass
class AnswerMessages:
    """Everything one query's answer publishes. ``images`` holds the kinds asked for (none for a
    failed or cancelled query, or a frame without pixels; ``overlay/compressed`` is a
    CompressedImage); ``target``/``targets`` are None without depth."""

    header: Header
    result: String
    images: dict[str, Any] = field(default_factory=dict)
    target: PointStamped | None = None
    targets: PoseArray | None = None


def answer_messages(result: Result, depth: Any = None, kinds: Iterable[str] = IMAGE_KINDS,
                    logger: Any = None, overlay: OverlayConfig = DEFAULT_OVERLAY
                    ) -> AnswerMessages:
    """Build a query's messages. With ``depth``, the masks are located first and the positions
    go into ``result.mask_extras`` (so into the result JSON) and into the targets."""
    frame = result.frame
    header = frame_header(frame)
    answered = result.status in (QueryStatus.SUCCEEDED, QueryStatus.NO_MASK)
    has_pixels = frame is not None and frame.image.size > 0
    target = targets = None
    if answered and has_pixels and depth is not None:
        result.mask_extras = locate(depth, frame, result.masks, logger)
        target, targets = target_messages(header, result.mask_extras)
    images = {}
    if answered and has_pixels:
        images = image_messages(frame.image, [m.mask for m in result.masks], header, kinds,
                                overlay, mask_boxes(result.masks))
    return AnswerMessages(header=header, result=String(data=json.dumps(result.to_json())),
                          images=images, target=target, targets=targets)


def result_line(result: Result) -> str:
    """The log line of a published result: its id, status and error or mask count."""
    ending = (f" ({for_log(result.error, ERROR_LOG_CHARS)})" if result.error
              else f", {len(result.masks)} mask(s)")
    return f"query {for_log(result.query_id)}: {result.status.value}{ending}"


def _context_ok(node: Any) -> bool:
    context = getattr(node, "context", None)
    return context is None or context.ok()


def _wanted(publishers: dict[str, Any], kinds: Iterable[str]) -> list[str]:
    """The kinds whose publisher exists and has at least one subscriber (lazy rendering)."""
    return [kind for kind in kinds
            if kind in publishers and publishers[kind].get_subscription_count() > 0]


class AnswerPublisher:
    """``~/mask``, ``~/labels``, ``~/overlay`` and ``~/overlay/compressed`` (when
    ``publish_overlay``; drawn as ``overlay`` says), ``~/result`` and ``~/status`` of a node. The
    3D targets go out through the depth object's own publishers (``~/target``, ``~/targets``),
    which live as long as depth is enabled."""

    def __init__(self, node: Any, publish_overlay: bool = True, qos: QoSProfile = OUTPUT_QOS,
                 overlay: OverlayConfig = DEFAULT_OVERLAY):
        self._node = node
        self._overlay = overlay
        self._publishers: dict[str, Any] = {
            "mask": node.create_publisher(Image, "~/mask", qos),
            "labels": node.create_publisher(Image, "~/labels", qos),
            "result": node.create_publisher(String, "~/result", qos),
            "status": node.create_publisher(String, "~/status", qos),
        }
        if publish_overlay:
            self._publishers["overlay"] = node.create_publisher(Image, "~/overlay", qos)
            self._publishers["overlay/compressed"] = node.create_publisher(
                CompressedImage, "~/overlay/compressed", qos)

    def publish(self, result: Result, depth: Any = None) -> AnswerMessages:
        """Images (only those subscribed), then the result JSON, then the targets."""
        publishers = self._publishers
        messages = answer_messages(result, depth, _wanted(publishers, IMAGE_KINDS),
                                   self._node.get_logger(), self._overlay)
        for kind, image in messages.images.items():
            publishers[kind].publish(image)
        publishers["result"].publish(messages.result)
        if messages.targets is not None:
            try:
                depth.publish_messages(messages.target, messages.targets)
            except Exception as exc:  # noqa: BLE001
                self._node.get_logger().warning(f"depth: publishing the targets failed: {exc}")
        return messages

    def publish_status(self, event: StatusEvent) -> None:
        """One status event of a query as ``~/status`` JSON (CONTRACTS §7)."""
        if "status" in self._publishers:  # not destroyed
            self._publishers["status"].publish(String(data=json.dumps(event.to_json())))

    def destroy(self) -> None:
        for publisher in self._publishers.values():
            self._node.destroy_publisher(publisher)
        self._publishers = {}


# --- follow mode ---------------------------------------------------------------------------------


@dataclass
class FollowMessages:
    """One follow update's messages; ``target`` is None without depth or without a position."""

    header: Header
    status: String
    images: dict[str, Any] = field(default_factory=dict)
    target: PointStamped | None = None
    extras: list[dict[str, Any]] = field(default_factory=list)


def follow_messages(frame: Frame | None, masks: Sequence[np.ndarray | None],
                    status: dict[str, Any], depth: Any = None,
                    kinds: Iterable[str] = FOLLOW_IMAGE_KINDS, logger: Any = None,
                    overlay: OverlayConfig = DEFAULT_OVERLAY) -> FollowMessages:
    """Build a follow update's messages. ``masks`` are in the answer's order, None for an
    object not visible on this frame, so ``labels`` keeps k for the k-th object of the answer.
    Images are built when at least one object is visible; with ``depth`` the visible objects
    are located, ``target`` is the first object's point (as ``~/target``), and each status
    object (matched by ``id``) gains ``position`` / ``position_error``."""
    header = frame_header(frame)
    visible = [k for k, m in enumerate(masks) if m is not None]
    images, target, extras = {}, None, []
    if frame is not None and frame.image.size > 0 and visible:
        images = image_messages(frame.image, masks, header, kinds, overlay)
        if depth is not None:
            located = locate(depth, frame, [_MaskView(masks[k]) for k in visible], logger)
            extras = [{}] * len(masks)
            for k, extra in zip(visible, located):
                extras[k] = extra
            if masks[0] is not None:
                target, _ = target_messages(header, extras[:1])
    status = dict(status)
    if extras and isinstance(status.get("objects"), list):
        status["objects"] = [dict(obj, **extras[obj["id"] - 1])
                             if 0 < obj.get("id", 0) <= len(extras) else dict(obj)
                             for obj in status["objects"]]
    return FollowMessages(header=header, status=String(data=json.dumps(status)),
                          images=images, target=target, extras=extras)


class FollowPublisher:
    """``~/follow/mask``, ``~/follow/labels``, ``~/follow/overlay/compressed`` (unless
    ``overlay`` is None: publish_overlay off), ``~/follow/target``, ``~/follow/status``.
    Images and the target are built only when subscribed (the target costs a depth lookup);
    the status always goes out."""

    def __init__(self, node: Any, qos: QoSProfile = OUTPUT_QOS,
                 overlay: OverlayConfig | None = DEFAULT_OVERLAY):
        self._node = node
        self._overlay = overlay or DEFAULT_OVERLAY
        self._publishers: dict[str, Any] = {
            "mask": node.create_publisher(Image, f"{FOLLOW_NAMESPACE}/mask", qos),
            "labels": node.create_publisher(Image, f"{FOLLOW_NAMESPACE}/labels", qos),
            "target": node.create_publisher(PointStamped, f"{FOLLOW_NAMESPACE}/target", qos),
            "status": node.create_publisher(String, f"{FOLLOW_NAMESPACE}/status", qos),
        }
        if overlay is not None:
            self._publishers["overlay/compressed"] = node.create_publisher(
                CompressedImage, f"{FOLLOW_NAMESPACE}/overlay/compressed", qos)

    def publish(self, frame: Frame | None, masks: Sequence[np.ndarray | None],
                status: dict[str, Any], depth: Any = None) -> FollowMessages:
        publishers = self._publishers
        if not publishers or not _context_ok(self._node):  # destroyed, or rclpy shut down
            return FollowMessages(header=frame_header(frame), status=String())
        wants_target = depth is not None and (
            publishers["target"].get_subscription_count() > 0
            or publishers["status"].get_subscription_count() > 0)
        messages = follow_messages(frame, masks, status, depth if wants_target else None,
                                   _wanted(publishers, FOLLOW_IMAGE_KINDS),
                                   self._node.get_logger(), self._overlay)
        for kind, image in messages.images.items():
            publishers[kind].publish(image)
        if messages.target is not None:
            publishers["target"].publish(messages.target)
        publishers["status"].publish(messages.status)
        return messages

    def destroy(self) -> None:
        for publisher in self._publishers.values():
            self._node.destroy_publisher(publisher)
        self._publishers = {}


@dataclass(frozen=True)
class _MaskView:
    """An array seen as an object with ``.mask`` (what ``depth.locate`` measures)."""

    mask: np.ndarray


def _point(position: dict[str, float] | None) -> Point | None:
    if not position:
        return None
    return Point(x=float(position["x"]), y=float(position["y"]), z=float(position["z"]))
