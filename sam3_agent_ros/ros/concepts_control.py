"""The node's standing concepts (``concepts.*``, docs/concepts.md): the concepts thread, the
``~/concepts/*`` outputs, and the live parameter changes.

- ``offer(message)`` from the image callback (O(1));
- ``on_parameters(changes)`` from the set-parameters callback, once a change is accepted:
  ``concepts.prompts`` (a new list: the ids restart at 1; logged) and ``concepts.rate_hz`` apply
  at once;
- the concepts thread (``ConceptsRunner``) publishes every pass: ``~/concepts/detections``
  (``sam3_agent_ros/msg/ConceptDetections``, always), ``~/concepts/labels`` (mono16, pixel =
  instance id) and ``~/concepts/overlay/compressed`` (JPEG) when somebody subscribes; with depth,
  each detection gets its 3D position, and ``~/concepts/markers`` (RViz, when subscribed) draws
  each located detection (its box, or a sphere) labelled ``<concept> #<id>``. Every message
  carries the header of the pass's frame.
Without the generated interfaces (``sam3_agent_ros.msg``) the passes still run and publish the
images; ``~/concepts/detections`` is off, said once in the log (as the action ``~/segment``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from sensor_msgs.msg import CompressedImage, Image
from visualization_msgs.msg import MarkerArray

from sam3_agent_ros.concepts import ConceptFrame, SegmenterGate, StandingConcepts
from sam3_agent_ros.config import PARAMETERS_BY_NAME, Config
from sam3_agent_ros.core.untrusted_text import for_log
from sam3_agent_ros.follow.redetect import Gates
from sam3_agent_ros.geometry.measurement import Measurement
from sam3_agent_ros.pipeline.measurement import locate
from sam3_agent_ros.ros import interfaces as generated
from sam3_agent_ros.ros.concepts_runner import ConceptsRunner
from sam3_agent_ros.ros.messages.concepts import (
    IMAGE_KINDS,
    concept_messages,
)
from sam3_agent_ros.ros.qos import OUTPUT_QOS

NAMESPACE = "~/concepts"
SHUTDOWN_WAIT_S = 5.0


def interfaces() -> tuple[Any, Any] | None:
    """``(ConceptDetections, ConceptDetection)``, or None when the generated interfaces cannot be
    imported (a venv without scripts/build_interfaces.sh)."""
    return generated.concept_types()


def with_positions(result: ConceptFrame, depth: Any, logger: Any = None
                   ) -> tuple[ConceptFrame, list[Measurement] | None]:
    """``result`` with each detection's 3D position, and the detections' ``depth.locate``
    output (positions and boxes, for the markers); ``(result, None)`` without depth. Never
    raises."""
    if depth is None:
        return result, None
    if not result.detections:
        return result, []
    extras = locate(depth, result.frame, result.detections, logger)
    located = [dataclasses.replace(d, position=extra.to_json()["position"],
                                   position_error=extra.position_error)
               for d, extra in zip(result.detections, extras)]
    return dataclasses.replace(result, detections=located), extras


class ConceptsControl:
    def __init__(self, node: Any, config: Config, gate: SegmenterGate,
                 to_frame: Callable[[Any], Any], depth: Callable[[], Any]):
        self._node = node
        self._depth = depth
        follow = config.follow
        self.concepts = StandingConcepts(config.concepts.prompts,
                                         Gates(follow.match_min_iou, follow.match_max_shift))
        self._types = interfaces()
        self._publishers = {
            "labels": node.create_publisher(Image, f"{NAMESPACE}/labels", OUTPUT_QOS),
            "overlay": node.create_publisher(CompressedImage, f"{NAMESPACE}/overlay/compressed",
                                             OUTPUT_QOS),
        }
        if config.depth.enabled:
            self._publishers["markers"] = node.create_publisher(
                MarkerArray, f"{NAMESPACE}/markers", OUTPUT_QOS)
        self._jpeg_quality = config.overlay.jpeg_quality
        if self._types is not None:
            self._publishers["detections"] = node.create_publisher(
                self._types[0], f"{NAMESPACE}/detections", OUTPUT_QOS)
        else:
            generated.say_missing(node, "~/concepts/detections", "sam3_agent_ros.msg",
                                  "The concepts' labels and overlay work as usual.")
        self.runner = ConceptsRunner(concepts=self.concepts, gate=gate, to_frame=to_frame,
                                     publish=self._publish, rate_hz=config.concepts.rate_hz)
        self.runner.start()
        if self.concepts.prompts:
            self._log_list()

    # --- executor thread ---------------------------------------------------------------------
    def offer(self, message: Any) -> None:
        self.runner.offer(message)

    def on_parameters(self, changes: Sequence[Any]) -> None:
        """Accepted changes of ``concepts.prompts`` / ``concepts.rate_hz`` apply at once."""
        for change in changes:
            if change.name == "concepts.prompts":  # validated already: a list of strings
                prompts = PARAMETERS_BY_NAME["concepts.prompts"].validate(change.value)
                if self.concepts.set_prompts(prompts):
                    self._log_list()
            elif change.name == "concepts.rate_hz":
                self.runner.set_rate(float(change.value))

    def clear(self) -> None:
        self.runner.clear()

    def _log_list(self) -> None:
        prompts = self.concepts.prompts
        if prompts:
            listed = ", ".join(for_log(repr(p), 120) for p in prompts)
            self._node.get_logger().info(
                f"standing concepts ({len(prompts)}): {listed}; instance ids start at 1")
        else:
            self._node.get_logger().info("standing concepts: off (concepts.prompts is empty)")

    # --- concepts thread ---------------------------------------------------------------------
    def _publish(self, result: ConceptFrame) -> None:
        publishers = self._publishers
        context = getattr(self._node, "context", None)
        if not publishers or (context is not None and not context.ok()):
            return
        result, extras = with_positions(result, self._depth(), self._node.get_logger())
        kinds = [k for k in (*IMAGE_KINDS, "markers")
                 if k in publishers and publishers[k].get_subscription_count() > 0]
        messages = concept_messages(result, kinds, self._types, extras, self._jpeg_quality)
        if messages.markers is not None:
            publishers["markers"].publish(messages.markers)
        if messages.labels is not None:
            publishers["labels"].publish(messages.labels)
        if messages.overlay is not None:
            publishers["overlay"].publish(messages.overlay)
        if messages.detections is not None:
            publishers["detections"].publish(messages.detections)

    # --- lifecycle ---------------------------------------------------------------------------
    def destroy(self, wait_s: float = SHUTDOWN_WAIT_S) -> bool:
        """End the concepts thread (waited for up to ``wait_s``) and destroy the publishers;
        False when the thread is still busy (e.g. in the segmenter)."""
        stopped = self.runner.shutdown(wait_s)
        if not stopped:
            self._node.get_logger().warning("concepts: the concepts thread did not stop in time")
        publishers, self._publishers = self._publishers, {}
        for publisher in publishers.values():
            self._node.destroy_publisher(publisher)
        return stopped
