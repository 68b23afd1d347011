"""Publishing an answer: the one place where masks on a frame become ROS messages.

Two kinds of answer go out:
- a query's ``Result``: ``~/mask``, ``~/labels``, ``~/overlay``, ``~/overlay/compressed``
  (images), ``~/result`` (JSON) and, with depth, ``~/target`` / ``~/targets`` (box poses) and
  ``~/markers`` (RViz: a DELETEALL, then a CUBE and a label per mask; interface §5, §8b); on the
  way, its ``~/status`` events;
- a follow-mode update (masks tracked on a new frame): ``~/follow/mask``, ``~/follow/labels``,
  ``~/follow/overlay/compressed``, ``~/follow/target`` and ``~/follow/status`` (interface §5b),
  and with depth the followed objects' boxes on ``~/markers``.

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
from geometry_msgs.msg import Point, PointStamped, Pose, PoseArray, Quaternion, Vector3
from rclpy.qos import QoSProfile
from sensor_msgs.msg import CompressedImage, Image
from std_msgs.msg import ColorRGBA, Header, String
from visualization_msgs.msg import Marker, MarkerArray

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
# ~/markers: RViz namespaces, the label's text and placement, the smallest drawn extent (a flat
# face has no visible thickness; RViz warns about and hides a zero scale), the sphere of a mask
# with a position but no box.
BOX_NAMESPACE = "sam3_agent/boxes"
LABEL_NAMESPACE = "sam3_agent/labels"
LABEL_CHARS = 48
LABEL_HEIGHT_M = 0.03
LABEL_LIFT_M = 0.03  # towards the camera from the box's near face
MIN_MARKER_SCALE_M = 0.005
POINT_MARKER_M = 0.03
BOX_ALPHA = 0.5
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
    per mask that has a position: its box's centre and orientation, or its position with the
    identity orientation when no box could be fitted) from per-mask extras."""
    points = [_point(extra.get("position")) for extra in extras]
    target = (PointStamped(header=header, point=points[0])
              if points and points[0] is not None else None)
    poses = PoseArray(header=header)
    poses.poses = [_box_pose(extra.get("box")) or Pose(position=point)
                   for extra, point in zip(extras, points) if point is not None]
    return target, poses


def marker_messages(header: Header, extras: Sequence[dict[str, Any]],
                    label: str | Sequence[str], ids: Sequence[int] | None = None) -> MarkerArray:
    """``~/markers``: a DELETEALL (the previous answer's markers go), then per mask with a box a
    CUBE (pose and scale = the box, the mask's overlay colour) and a TEXT_VIEW_FACING label
    ``"<label> #<id>"``; a mask with a position but no box gets a SPHERE and the label. ``label``:
    one text for all (the query), or one per mask (standing concepts). ``ids``: the masks' ids
    (default 1..N, as in ``~/labels``). Every marker has ``header``."""
    markers = [Marker(header=header, action=Marker.DELETEALL)]
    texts = ([_marker_text(label)] * len(extras) if isinstance(label, str)
             else [_marker_text(text) for text in label])
    for index, extra in enumerate(extras):
        mask_id = ids[index] if ids is not None else index + 1
        text = texts[index]
        pose, box = _box_pose(extra.get("box")), extra.get("box")
        point = _point(extra.get("position"))
        if pose is None and point is None:
            continue
        red, green, blue = (c / 255.0 for c in render.palette_color(mask_id - 1))
        if pose is not None:
            size = box["size"]
            scale = Vector3(**{axis: max(float(size[axis]), MIN_MARKER_SCALE_M)
                               for axis in "xyz"})
            shape = Marker(header=header, ns=BOX_NAMESPACE, id=mask_id, type=Marker.CUBE,
                           action=Marker.ADD, pose=pose, scale=scale)
            near = max(float(size["z"]), MIN_MARKER_SCALE_M) / 2.0
            anchor = pose.position
        else:
            shape = Marker(header=header, ns=BOX_NAMESPACE, id=mask_id, type=Marker.SPHERE,
                           action=Marker.ADD, pose=Pose(position=point),
                           scale=Vector3(x=POINT_MARKER_M, y=POINT_MARKER_M, z=POINT_MARKER_M))
            near = POINT_MARKER_M / 2.0
            anchor = point
        shape.color = ColorRGBA(r=red, g=green, b=blue, a=BOX_ALPHA)
        markers.append(shape)
        markers.append(Marker(
            header=header, ns=LABEL_NAMESPACE, id=mask_id, type=Marker.TEXT_VIEW_FACING,
            action=Marker.ADD, pose=Pose(position=_towards_camera(anchor, near + LABEL_LIFT_M)),
            scale=Vector3(z=LABEL_HEIGHT_M), color=ColorRGBA(r=red, g=green, b=blue, a=1.0),
            text=f"{text} #{mask_id}"))
    return MarkerArray(markers=markers)


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
        return [{"position": None, "position_error": reason, "box": None, "box_error": reason}
                for _ in masks]


@dataclass
class AnswerMessages:
    """Everything one query's answer publishes. ``images`` holds the kinds asked for (none for a
    failed or cancelled query, or a frame without pixels; ``overlay/compressed`` is a
    CompressedImage); ``target``/``targets``/``markers`` are None without depth."""

    header: Header
    result: String
    images: dict[str, Any] = field(default_factory=dict)
    target: PointStamped | None = None
    targets: PoseArray | None = None
    markers: MarkerArray | None = None


def answer_messages(result: Result, depth: Any = None, kinds: Iterable[str] = IMAGE_KINDS,
                    logger: Any = None, overlay: OverlayConfig = DEFAULT_OVERLAY
                    ) -> AnswerMessages:
    """Build a query's messages. With ``depth``, the masks are located first and the positions
    go into ``result.mask_extras`` (so into the result JSON) and into the targets."""
    frame = result.frame
    header = frame_header(frame)
    answered = result.status in (QueryStatus.SUCCEEDED, QueryStatus.NO_MASK)
    has_pixels = frame is not None and frame.image.size > 0
    target = targets = markers = None
    if answered and has_pixels and depth is not None:
        result.mask_extras = locate(depth, frame, result.masks, logger)
        target, targets = target_messages(header, result.mask_extras)
        markers = marker_messages(header, result.mask_extras, result.query)
    images = {}
    if answered and has_pixels:
        images = image_messages(frame.image, [m.mask for m in result.masks], header, kinds,
                                overlay, mask_boxes(result.masks))
    return AnswerMessages(header=header, result=String(data=json.dumps(result.to_json())),
                          images=images, target=target, targets=targets, markers=markers)


def result_line(result: Result) -> str:
    """The log line of a published result: its id, status and error or mask count, and the
    answer it refined."""
    ending = (f" ({for_log(result.error, ERROR_LOG_CHARS)})" if result.error
              else f", {len(result.masks)} mask(s)")
    return f"query {for_log(result.query_id)}: {result.status.value}{ending}{refines_note(result)}"


def refines_note(item: Any) -> str:
    """`` (refines 'ID')`` for a query or result that refines an earlier answer, else ``""``:
    the id escaped like any outside text in a log line."""
    refines = getattr(item, "refines", None)
    return "" if refines is None else f" (refines '{for_log(refines)}')"


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
    3D targets go out through the depth object's own publishers (``~/target``, ``~/targets``,
    ``~/markers``), which live as long as depth is enabled."""

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
                depth.publish_messages(messages.target, messages.targets, messages.markers)
            except Exception as exc:  # noqa: BLE001
                self._node.get_logger().warning(f"depth: publishing the targets failed: {exc}")
        return messages

    def publish_status(self, event: StatusEvent) -> None:
        """One status event of a query as ``~/status`` JSON (interface §7)."""
        if "status" in self._publishers:  # not destroyed
            self._publishers["status"].publish(String(data=json.dumps(event.to_json())))

    def destroy(self) -> None:
        for publisher in self._publishers.values():
            self._node.destroy_publisher(publisher)
        self._publishers = {}


# --- follow mode ---------------------------------------------------------------------------------


@dataclass
class FollowMessages:
    """One follow update's messages; ``target`` is None without depth or without a position,
    ``markers`` None without depth or when the boxes do not change (see ``follow_messages``)."""

    header: Header
    status: String
    images: dict[str, Any] = field(default_factory=dict)
    target: PointStamped | None = None
    extras: list[dict[str, Any]] = field(default_factory=list)
    markers: MarkerArray | None = None


def follow_messages(frame: Frame | None, masks: Sequence[np.ndarray | None],
                    status: dict[str, Any], depth: Any = None,
                    kinds: Iterable[str] = FOLLOW_IMAGE_KINDS, logger: Any = None,
                    label: str | None = None,
                    overlay: OverlayConfig = DEFAULT_OVERLAY) -> FollowMessages:
    """Build a follow update's messages. ``masks`` are in the answer's order, None for an
    object not visible on this frame, so ``labels`` keeps k for the k-th object of the answer.
    Images are built when at least one object is visible; with ``depth`` the visible objects
    are located, ``target`` is the first object's point (as ``~/target``), each status object
    (matched by ``id``) gains ``position`` / ``position_error`` / ``box`` / ``box_error``, and
    ``markers`` holds their boxes labelled ``label`` (default: the query id); with depth and no
    object visible while ``lost``, ``markers`` is a lone DELETEALL (the boxes are gone)."""
    header = frame_header(frame)
    visible = [k for k, m in enumerate(masks) if m is not None]
    images, target, extras, markers = {}, None, [], None
    if frame is not None and frame.image.size > 0 and visible:
        images = image_messages(frame.image, masks, header, kinds, overlay)
        if depth is not None:
            located = locate(depth, frame, [_MaskView(masks[k]) for k in visible], logger)
            extras = [{}] * len(masks)
            for k, extra in zip(visible, located):
                extras[k] = extra
            if masks[0] is not None:
                target, _ = target_messages(header, extras[:1])
            markers = marker_messages(header, [extras[k] for k in visible],
                                      label or str(status.get("query_id", "")),
                                      ids=[k + 1 for k in visible])
    elif depth is not None and frame is not None and status.get("state") == "lost":
        markers = marker_messages(header, [], "")
    status = dict(status)
    if extras and isinstance(status.get("objects"), list):
        status["objects"] = [dict(obj, **extras[obj["id"] - 1])
                             if 0 < obj.get("id", 0) <= len(extras) else dict(obj)
                             for obj in status["objects"]]
    return FollowMessages(header=header, status=String(data=json.dumps(status)),
                          images=images, target=target, extras=extras, markers=markers)


class FollowPublisher:
    """``~/follow/mask``, ``~/follow/labels``, ``~/follow/overlay/compressed`` (unless
    ``overlay`` is None: publish_overlay off), ``~/follow/target``, ``~/follow/status``, and the
    followed boxes on the depth object's ``~/markers``. Images and the 3D step are built only
    when subscribed (it costs a depth lookup); the status always goes out."""

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
                status: dict[str, Any], depth: Any = None,
                label: str | None = None) -> FollowMessages:
        publishers = self._publishers
        if not publishers or not _context_ok(self._node):  # destroyed, or rclpy shut down
            return FollowMessages(header=frame_header(frame), status=String())
        wants_3d = depth is not None and (
            publishers["target"].get_subscription_count() > 0
            or publishers["status"].get_subscription_count() > 0
            or _markers_wanted(depth))
        messages = follow_messages(frame, masks, status, depth if wants_3d else None,
                                   _wanted(publishers, FOLLOW_IMAGE_KINDS),
                                   self._node.get_logger(), label, self._overlay)
        for kind, image in messages.images.items():
            publishers[kind].publish(image)
        if messages.target is not None:
            publishers["target"].publish(messages.target)
        if messages.markers is not None:
            try:
                depth.publish_markers(messages.markers)
            except Exception as exc:  # noqa: BLE001
                self._node.get_logger().warning(f"depth: publishing the markers failed: {exc}")
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


def _markers_wanted(depth: Any) -> bool:
    """Whether the depth object's ``~/markers`` has a subscriber (False when it cannot say)."""
    wants = getattr(depth, "markers_wanted", None)
    try:
        return bool(wants()) if callable(wants) else False
    except Exception:  # noqa: BLE001 (a destroyed publisher: nobody to draw for)
        return False


def _point(position: dict[str, float] | None) -> Point | None:
    if not position:
        return None
    return Point(x=float(position["x"]), y=float(position["y"]), z=float(position["z"]))


def _box_pose(box: dict[str, Any] | None) -> Pose | None:
    """The pose of a result JSON box: its centre and orientation."""
    if not box:
        return None
    orientation = box["orientation"]
    return Pose(position=_point(box["center"]),
                orientation=Quaternion(**{axis: float(orientation[axis]) for axis in "xyzw"}))


def _towards_camera(point: Point, distance: float) -> Point:
    """``point`` moved ``distance`` towards the camera (the optical frame's origin)."""
    length = float(np.sqrt(point.x ** 2 + point.y ** 2 + point.z ** 2))
    if length <= distance or length == 0.0:
        return Point(x=point.x, y=point.y, z=point.z)
    keep = 1.0 - distance / length
    return Point(x=point.x * keep, y=point.y * keep, z=point.z * keep)


def _marker_text(text: str) -> str:
    """A query as one short line for an RViz label."""
    line = " ".join(str(text).split())
    return line if len(line) <= LABEL_CHARS else line[:LABEL_CHARS - 1] + "\u2026"
