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
here). Every publisher comes from ``ros/publishers.py`` (one table, one place); the 3D topics
exist while depth is on (``ros/depth.py`` holds them). ``AnswerPublisher`` / ``FollowPublisher``
build only the images somebody subscribes to (publishing a 1080p mono8 image alone costs
~2 ms) and publish them; the action server reuses what was built. Publishing runs on the
thread that computed the answer (the query worker or the follow worker), never on the
executor.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from rclpy.qos import QoSProfile
from std_msgs.msg import String

from sam3_agent_ros.config import OverlayConfig
from sam3_agent_ros.core import finite_json
from sam3_agent_ros.core.types import Frame, StatusEvent
from sam3_agent_ros.geometry.measurement import Measurement
from sam3_agent_ros.pipeline.measurement import Answer, Visible
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
from sam3_agent_ros.ros.messages.robot_frame import answer_robot_messages, follow_target
from sam3_agent_ros.ros.publishers import Publishers, context_ok
from sam3_agent_ros.ros.qos import OUTPUT_QOS, TEXT_OUTPUT_QOS

FOLLOW_NAMESPACE = "~/follow"
ANSWER_TOPICS = ("~/mask", "~/labels", "~/result", "~/status", "~/detections")
OVERLAY_TOPICS = ("~/overlay", "~/overlay/compressed")
FOLLOW_TOPICS = tuple(f"{FOLLOW_NAMESPACE}/{kind}" for kind in ("mask", "labels", "target",
                                                                 "status"))
FOLLOW_OVERLAY_TOPIC = f"{FOLLOW_NAMESPACE}/overlay/compressed"
MARKERS_TOPIC = "~/markers"
POINTS_TOPIC = "~/target/points"


def _wanted(publishers: Publishers, namespace: str, kinds: Sequence[str]) -> list[str]:
    """The image kinds whose publisher exists and has at least one subscriber (lazy)."""
    return [kind for kind in kinds if publishers.wanted(f"{namespace}/{kind}")]


class AnswerPublisher:
    """``~/mask``, ``~/labels``, ``~/overlay`` and ``~/overlay/compressed`` (when
    ``publish_overlay``; drawn as ``overlay`` says), ``~/result`` and ``~/status`` of a node,
    and the 3D targets (``~/target``, ``~/targets``, ``~/markers``) while depth is on."""

    def __init__(self, node: Any, publish_overlay: bool = True, qos: QoSProfile = OUTPUT_QOS,
                 overlay: OverlayConfig = DEFAULT_OVERLAY):
        self._node = node
        self._overlay = overlay
        self._publishers = Publishers(  # one result per query, however big the burst (qos.py)
            node, ANSWER_TOPICS + (OVERLAY_TOPICS if publish_overlay else ()), qos,
            {"~/result": TEXT_OUTPUT_QOS, "~/status": TEXT_OUTPUT_QOS})

    def publish(self, answer: Answer, depth: Any = None) -> AnswerMessages:
        """Images (only those subscribed), then the result JSON, then the targets (when the
        answer was measured)."""
        publishers = self._publishers
        messages = answer_messages(answer, _wanted(publishers, "~", IMAGE_KINDS), self._overlay)
        for kind, image in messages.images.items():
            publishers.publish(f"~/{kind}", image)
        publishers.publish("~/result", messages.result)
        # The 3D outputs in the output frame (target_frame when set; none for this answer when
        # its transform is missing), the vision_msgs detections and the cloud (CONTRACTS §9).
        robot = answer_robot_messages(answer)
        messages.answer, messages.robot = answer, robot
        messages.target, messages.targets, messages.markers = (robot.target, robot.targets,
                                                               robot.markers)
        if publishers.wanted("~/detections"):
            publishers.publish("~/detections", robot.detections)
        if robot.targets is not None:
            publishers.publish("~/target", robot.target)
            publishers.publish("~/targets", robot.targets)
            publishers.publish(MARKERS_TOPIC, robot.markers)
            if publishers.wanted("~/detections_3d"):
                publishers.publish("~/detections_3d", robot.detections_3d)
            publishers.publish(POINTS_TOPIC, robot.points)
        return messages

    def cloud_max_points(self, max_points: int) -> int | None:
        """``max_points`` when somebody subscribes to ``~/target/points`` (then the answer's
        cloud is computed), else None."""
        return max_points if self._publishers.subscribed(POINTS_TOPIC) else None

    def answer(self, answer: Answer, depth: Any = None) -> AnswerMessages:
        """The outputs port of ``pipeline.query_life``: ``publish``."""
        return self.publish(answer, depth)

    def status(self, event: StatusEvent) -> None:
        """The outputs port of ``pipeline.query_life``: ``publish_status``."""
        self.publish_status(event)

    def publish_status(self, event: StatusEvent) -> None:
        """One status event of a query as ``~/status`` JSON (interface §7)."""
        if "~/status" in self._publishers:  # not destroyed
            self._publishers.publish("~/status", String(data=finite_json.dumps(event.to_json())))

    def flush(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` until every reliable subscriber acknowledged what went out on
        ``~/result`` and ``~/status`` (before the process exits: the last results must leave)."""
        from rclpy.duration import Duration

        wait = Duration(nanoseconds=int(max(0.0, timeout_s) * 1e9))
        acked = True
        for name in ("~/result", "~/status"):
            if name in self._publishers:
                try:
                    acked = self._publishers[name].wait_for_all_acked(wait) and acked
                except Exception:  # noqa: BLE001 (a best-effort subscriber, a shut-down context)
                    acked = False
        return acked

    def destroy(self) -> None:
        self._publishers.destroy()


# --- follow mode ---------------------------------------------------------------------------------


class FollowPublisher:
    """``~/follow/mask``, ``~/follow/labels``, ``~/follow/overlay/compressed`` (unless
    ``overlay`` is None: publish_overlay off), ``~/follow/target``, ``~/follow/status``, and the
    followed boxes on ``~/markers`` (while depth is on). Images are built only when subscribed;
    the status always goes out. The 3D step is the caller's, before ``publish`` (``wants_3d``
    says whether anybody would read it: it costs a depth lookup)."""

    def __init__(self, node: Any, qos: QoSProfile = OUTPUT_QOS,
                 overlay: OverlayConfig | None = DEFAULT_OVERLAY):
        self._node = node
        self._overlay = overlay or DEFAULT_OVERLAY
        self._publishers = Publishers(
            node, FOLLOW_TOPICS + ((FOLLOW_OVERLAY_TOPIC,) if overlay is not None else ()), qos)

    def wants_3d(self, depth: Any) -> bool:
        """Whether a follow update is worth measuring: depth on, and a subscriber to
        ``~/follow/target``, ``~/follow/status`` or ``~/markers``."""
        publishers = self._publishers
        if depth is None or not publishers.names or not context_ok(self._node):
            return False
        return (publishers.subscribed(f"{FOLLOW_NAMESPACE}/target")
                or publishers.subscribed(f"{FOLLOW_NAMESPACE}/status")
                or publishers.subscribed(MARKERS_TOPIC))

    def publish(self, frame: Frame | None, masks: Sequence[np.ndarray | None],
                status: dict[str, Any],
                measurements: Sequence[Measurement | None] | None = None, depth: Any = None,
                label: str | None = None, visible: Visible | None = None) -> FollowMessages:
        """One follow update; ``measurements`` (one per mask, None for one not visible) come
        from the 3D step (``follow_control.measure_follow_in``; ``visible``: with its transform
        into ``target_frame``, then ``~/follow/target`` and the markers are in that frame, or
        not sent when the transform is missing)."""
        publishers = self._publishers
        if not publishers.names or not context_ok(self._node):  # destroyed, or rclpy shut down
            return FollowMessages(header=frame_header(frame), status=String())
        messages = follow_messages(frame, masks, status, measurements,
                                   _wanted(publishers, FOLLOW_NAMESPACE, FOLLOW_IMAGE_KINDS),
                                   label, self._overlay)
        if visible is not None and visible.target is not None:  # target_frame set
            target, markers = follow_target(frame, visible, label or "")
            messages.target = target
            if markers is not None or visible.output_measurements is None:
                messages.markers = markers
        for kind, image in messages.images.items():
            publishers.publish(f"{FOLLOW_NAMESPACE}/{kind}", image)
        publishers.publish(f"{FOLLOW_NAMESPACE}/target", messages.target)
        if depth is not None:
            publishers.publish(MARKERS_TOPIC, messages.markers)
        publishers.publish(f"{FOLLOW_NAMESPACE}/status", messages.status)
        return messages

    def destroy(self) -> None:
        self._publishers.destroy()
