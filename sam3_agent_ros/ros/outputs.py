"""The node's outputs room: every output publisher, created from the table
(``ros/output_topics.TOPICS``) by configuration, held by one owner (``NodeOutputs``, made by
``ros/assembly.NodeParts`` at configure and destroyed at cleanup), with one publish method per
kind of update:

- ``publish_answer``: a query's answer (interface §5, §8b; CONTRACTS §9): the images, the result
  JSON, the 2D detections and, with depth, the 3D outputs in the output frame (``target_frame``
  when set, else the colour camera's);
- ``publish_status``: a query's status event on ``~/status`` (interface §7);
- ``publish_follow``: a follow-mode update (interface §5b), with depth the followed boxes on
  ``~/markers``;
- ``publish_concepts``: a standing concepts pass (docs/concepts.md).

Every message is built by ``ros/messages/`` (pure builders) from values computed before, by the
one 3D step (``pipeline.three_d.measure_3d``); a builder hands its messages over as ``{field:
message}``, and the table routes each field to its topic: no topic name is spelled here. A
``lazy`` topic's message is built and sent only for a subscriber (publishing a 1080p mono8 image
alone costs ~2 ms); the others whenever the update has them. Publishing runs on the thread that
computed the update (the query worker, the follow or concepts thread), never on the executor,
and never raises: a failure is a warning, once per topic (the table's names: a fixed set).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from rclpy.qos import QoSProfile
from std_msgs.msg import String

from sam3_agent_ros.concepts import ConceptFrame
from sam3_agent_ros.config import Config
from sam3_agent_ros.core import finite_json
from sam3_agent_ros.core.types import Frame, StatusEvent
from sam3_agent_ros.pipeline.measurement import Answer
from sam3_agent_ros.pipeline.three_d import Located
from sam3_agent_ros.ros import generated_types
from sam3_agent_ros.ros.conversions import frame_header
from sam3_agent_ros.ros.messages.answer import (
    AnswerMessages,
    FollowMessages,
    answer_messages,
    follow_messages,
)
from sam3_agent_ros.ros.messages.concepts import ConceptMessages, concept_messages
from sam3_agent_ros.ros.messages.images import FOLLOW_IMAGE_KINDS, IMAGE_KINDS
from sam3_agent_ros.ros.output_topics import TOPICS, TYPE_OF, fields_of, topic_of
from sam3_agent_ros.ros.qos import LATCHED_OUTPUT_QOS, OUTPUT_QOS, TEXT_OUTPUT_QOS

_ROW = {topic.name: topic for topic in TOPICS}


def message_type(name: str) -> Any:
    """The message class of output topic ``name`` (``pkg/msg/Type`` in the table)."""
    package, _, type_name = TYPE_OF[name].split("/")
    return getattr(importlib.import_module(f"{package}.msg"), type_name)


def context_ok(node: Any) -> bool:
    """False once rclpy is shut down (nothing can be published)."""
    context = getattr(node, "context", None)
    return context is None or bool(context.ok())


def switched_on(config: Config, interfaces: bool) -> dict[str, bool]:
    """Which ``when`` of the table holds for ``config`` (``interfaces``: the generated
    interfaces can be imported)."""
    return {"always": True, "overlay": config.node.publish_overlay,
            "depth": config.depth.enabled,
            "scene": config.depth.enabled and config.scene.enabled, "interfaces": interfaces}


class NodeOutputs:
    """The publishers of ``node`` for every row of the table that ``config`` switches on (see
    the module's docstring); ``concept_types``: the generated ``(ConceptDetections,
    ConceptDetection)`` (looked up when not given; None: ``~/concepts/detections`` is off)."""

    def __init__(self, node: Any, config: Config, qos: QoSProfile = OUTPUT_QOS,
                 concept_types: tuple[Any, Any] | None | bool = True):
        self._node = node
        self._overlay = config.overlay
        self._lock = threading.Lock()
        self._warned: set[str] = set()  # topic names of the table: bounded
        # the collision objects' ids of the last answer that published some (REMOVEd first by
        # the next: a planning scene never holds two copies)
        self._scene_ids: list[str] = []
        types = generated_types.concept_types() if concept_types is True else concept_types
        self.concept_types: tuple[Any, Any] | None = types if isinstance(types, tuple) else None
        on = switched_on(config, self.concept_types is not None)
        self._publishers: dict[str, Any] = {}
        for topic in TOPICS:
            if topic.updates and on[topic.when]:  # one result per query however big the burst
                profile = (TEXT_OUTPUT_QOS if topic.text
                           else LATCHED_OUTPUT_QOS if topic.latched else qos)
                self._publishers[topic.name] = node.create_publisher(
                    message_type(topic.name), topic.name, profile)
        if self.concept_types is None:
            generated_types.say_missing(node, topic_of("concepts", "detections"),
                                        "sam3_agent_ros.msg",
                                        "The concepts' labels and overlay work as usual.")

    # --- what is worth building ----------------------------------------------------------------
    @property
    def names(self) -> list[str]:
        """The topics with a publisher now (none once destroyed)."""
        return list(self._publishers)

    def live(self) -> bool:
        """Publishers held and rclpy running: an update is worth building."""
        return bool(self._publishers) and context_ok(self._node)

    def subscribed(self, name: str) -> bool:
        """Whether ``name`` has a publisher with at least one subscriber (False when it cannot
        say, e.g. a destroyed publisher)."""
        publisher = self._publishers.get(name)
        if publisher is None:
            return False
        try:
            return bool(publisher.get_subscription_count() > 0)
        except Exception:  # noqa: BLE001 (destroyed meanwhile: nobody to build for)
            return False

    def wanted(self, name: str) -> bool:
        """Whether a message for ``name`` is worth building: it has a publisher, and is sent
        whoever subscribes (not ``lazy``) or has a subscriber."""
        return name in self._publishers and (not _ROW[name].lazy or self.subscribed(name))

    def wanted_fields(self, update: str) -> list[str]:
        """The fields of ``update`` worth building now, in the table's order."""
        return [field for field in fields_of(update) if self.wanted(topic_of(update, field))]

    def cloud_max_points(self, max_points: int) -> int | None:
        """``max_points`` when somebody subscribes to the answer's cloud (then it is
        computed), else None."""
        return max_points if self.subscribed(topic_of("answer", "points")) else None

    def follow_wants_3d(self, depth: Any) -> bool:
        """Whether a follow update is worth measuring: depth on, and a subscriber to its
        target, its status or the markers."""
        if depth is None or not self.live():
            return False
        return any(self.subscribed(topic_of("follow", field))
                   for field in ("target", "status", "markers"))

    # --- one publish method per kind of update -------------------------------------------------
    def publish_answer(self, answer: Answer) -> AnswerMessages:
        """A query's answer (``pipeline.query_life``'s outputs port): the messages built for
        what is wanted, sent in their order; returned for the action's result."""
        kinds = [kind for kind in self.wanted_fields("answer") if kind in IMAGE_KINDS]
        scene = topic_of("answer", "collision_objects") in self._publishers
        with self._lock:
            previous = list(self._scene_ids) if scene else None
        messages = answer_messages(answer, kinds, self._overlay, previous)
        if messages.scene is not None and messages.scene.measured:
            with self._lock:
                self._scene_ids = messages.scene.added_ids
        self._send("answer", messages.outputs())
        return messages

    def publish_status(self, event: StatusEvent) -> None:
        """One status event of a query as JSON (interface §7)."""
        if topic_of("status", "status") in self._publishers:  # not destroyed
            self._send("status", {"status": String(data=finite_json.dumps(event.to_json()))})

    def publish_follow(self, frame: Frame | None, masks: Sequence[np.ndarray | None],
                       status: dict[str, Any], located: Located | None = None,
                       label: str | None = None) -> FollowMessages:
        """One follow update; ``located`` (with depth: ``three_d.measure_3d`` of its masks, its
        transform into ``target_frame`` when set) measured before."""
        if not self.live():  # destroyed, or rclpy shut down
            return FollowMessages(header=frame_header(frame), status=String())
        kinds = [kind for kind in self.wanted_fields("follow") if kind in FOLLOW_IMAGE_KINDS]
        messages = follow_messages(frame, masks, status, located, kinds, label, self._overlay)
        self._send("follow", messages.outputs())
        return messages

    def publish_concepts(self, result: ConceptFrame, located: Located | None) -> ConceptMessages:
        """One standing concepts pass; ``located``: its one 3D step (None without depth)."""
        messages = concept_messages(result, self.wanted_fields("concepts"), self.concept_types,
                                    located, self._overlay.jpeg_quality)
        if self.live():
            self._send("concepts", messages.outputs())
        return messages

    def _send(self, update: str, messages: Mapping[str, Any]) -> None:
        """Each message to the topic of its field (nothing for None, a topic without a
        publisher, or a lazy one nobody subscribes to). Never raises."""
        for field, message in messages.items():
            name = topic_of(update, field)
            publisher = self._publishers.get(name)
            if message is None or publisher is None:
                continue
            if _ROW[name].lazy and not self.subscribed(name):
                continue
            try:
                for one in message if isinstance(message, list) else (message,):
                    publisher.publish(one)  # a list: several messages, in order
            except Exception as exc:  # noqa: BLE001
                with self._lock:
                    first = name not in self._warned
                    self._warned.add(name)
                if first:
                    self._node.get_logger().warning(
                        f"cannot publish {name}: {type(exc).__name__}: {exc} (said once)")

    # --- the end -------------------------------------------------------------------------------
    def flush(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` until every reliable subscriber acknowledged what went out on
        the result and status topics (before the process exits: the last results must leave)."""
        from rclpy.duration import Duration

        wait = Duration(nanoseconds=int(max(0.0, timeout_s) * 1e9))
        acked = True
        for name in (topic_of("answer", "result"), topic_of("status", "status")):
            publisher = self._publishers.get(name)
            if publisher is not None:
                try:
                    acked = publisher.wait_for_all_acked(wait) and acked
                except Exception:  # noqa: BLE001 (a best-effort subscriber, a shut-down context)
                    acked = False
        return acked

    def destroy(self) -> None:
        """Destroy every publisher (cleanup); publishing afterwards sends nothing."""
        publishers, self._publishers = self._publishers, {}
        for name, publisher in publishers.items():
            try:
                self._node.destroy_publisher(publisher)
            except Exception as exc:  # noqa: BLE001 (teardown goes on)
                self._node.get_logger().warning(f"destroying {name} failed: {exc}")
