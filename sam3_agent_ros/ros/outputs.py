"""Publishing an answer: the publishers of a query's and a follow update's messages.

Two kinds of answer go out:
- a query's ``Result``: ``~/mask``, ``~/labels``, ``~/overlay``, ``~/overlay/compressed``
  (images), ``~/result`` (JSON) and, with depth, ``~/target`` / ``~/targets`` (box poses) and
  ``~/markers`` (RViz: a DELETEALL, then a CUBE and a label per mask; interface §5, §8b); on the
  way, its ``~/status`` events;
- a follow-mode update (masks tracked on a new frame): ``~/follow/mask``, ``~/follow/labels``,
  ``~/follow/overlay/compressed``, ``~/follow/target`` and ``~/follow/status`` (interface §5b),
  and with depth the followed objects' boxes on ``~/markers``.

The messages are built by ``ros/messages/`` (pure builders) from values computed before: a
query's ``pipeline.measurement.Answer`` (its masks measured by ``measure_answer`` before it comes
here), a follow update's measurements (``follow_control.measure_follow``, before it comes
here). ``AnswerPublisher`` / ``FollowPublisher`` build only
the images somebody subscribes to (publishing a 1080p mono8 image alone costs ~2 ms) and publish
them; the action server reuses what was built. Publishing runs on the thread that computed the
answer (the query worker or the follow worker), never on the executor.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from geometry_msgs.msg import PointStamped
from rclpy.qos import QoSProfile
from sensor_msgs.msg import CompressedImage, Image
from std_msgs.msg import String

from sam3_agent_ros.config import OverlayConfig
from sam3_agent_ros.core.types import Frame, StatusEvent
from sam3_agent_ros.geometry.measurement import Measurement
from sam3_agent_ros.pipeline.measurement import Answer
from sam3_agent_ros.ros.conversions import frame_header
from sam3_agent_ros.ros.messages.answer import (
    AnswerMessages,
    FollowMessages,
    answer_messages,
    follow_messages,
)
from sam3_agent_ros.ros.messages.images import (
    DEFAULT_OVERLAY,
    FOLLOW_IMAGE_KINDS,
    IMAGE_KINDS,
)
from sam3_agent_ros.ros.qos import OUTPUT_QOS

FOLLOW_NAMESPACE = "~/follow"


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

    def publish(self, answer: Answer, depth: Any = None) -> AnswerMessages:
        """Images (only those subscribed), then the result JSON, then the targets (through
        ``depth``'s publishers, when the answer was measured)."""
        publishers = self._publishers
        messages = answer_messages(answer, _wanted(publishers, IMAGE_KINDS), self._overlay)
        for kind, image in messages.images.items():
            publishers[kind].publish(image)
        publishers["result"].publish(messages.result)
        if messages.targets is not None and depth is not None:
            try:
                depth.publish_messages(messages.target, messages.targets, messages.markers)
            except Exception as exc:  # noqa: BLE001
                self._node.get_logger().warning(f"depth: publishing the targets failed: {exc}")
        return messages

    def answer(self, answer: Answer, depth: Any = None) -> AnswerMessages:
        """The outputs port of ``pipeline.query_life``: ``publish``."""
        return self.publish(answer, depth)

    def status(self, event: StatusEvent) -> None:
        """The outputs port of ``pipeline.query_life``: ``publish_status``."""
        self.publish_status(event)

    def publish_status(self, event: StatusEvent) -> None:
        """One status event of a query as ``~/status`` JSON (interface §7)."""
        if "status" in self._publishers:  # not destroyed
            self._publishers["status"].publish(String(data=json.dumps(event.to_json())))

    def destroy(self) -> None:
        for publisher in self._publishers.values():
            self._node.destroy_publisher(publisher)
        self._publishers = {}


# --- follow mode ---------------------------------------------------------------------------------


class FollowPublisher:
    """``~/follow/mask``, ``~/follow/labels``, ``~/follow/overlay/compressed`` (unless
    ``overlay`` is None: publish_overlay off), ``~/follow/target``, ``~/follow/status``, and the
    followed boxes on the depth object's ``~/markers``. Images are built only when subscribed;
    the status always goes out. The 3D step is the caller's, before ``publish`` (``wants_3d``
    says whether anybody would read it: it costs a depth lookup)."""

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

    def wants_3d(self, depth: Any) -> bool:
        """Whether a follow update is worth measuring: depth on, and a subscriber to
        ``~/follow/target``, ``~/follow/status`` or the depth object's ``~/markers``."""
        publishers = self._publishers
        if depth is None or not publishers or not _context_ok(self._node):
            return False
        return (publishers["target"].get_subscription_count() > 0
                or publishers["status"].get_subscription_count() > 0
                or _markers_wanted(depth))

    def publish(self, frame: Frame | None, masks: Sequence[np.ndarray | None],
                status: dict[str, Any],
                measurements: Sequence[Measurement | None] | None = None, depth: Any = None,
                label: str | None = None) -> FollowMessages:
        """One follow update; ``measurements`` (one per mask, None for one not visible) come
        from the 3D step (``follow_control.measure_follow``), ``depth`` carries ``~/markers``."""
        publishers = self._publishers
        if not publishers or not _context_ok(self._node):  # destroyed, or rclpy shut down
            return FollowMessages(header=frame_header(frame), status=String())
        messages = follow_messages(frame, masks, status, measurements,
                                   _wanted(publishers, FOLLOW_IMAGE_KINDS), label, self._overlay)
        for kind, image in messages.images.items():
            publishers[kind].publish(image)
        if messages.target is not None:
            publishers["target"].publish(messages.target)
        if messages.markers is not None and depth is not None:
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


def _markers_wanted(depth: Any) -> bool:
    """Whether the depth object's ``~/markers`` has a subscriber (False when it cannot say)."""
    wants = getattr(depth, "markers_wanted", None)
    try:
        return bool(wants()) if callable(wants) else False
    except Exception:  # noqa: BLE001 (a destroyed publisher: nobody to draw for)
        return False

