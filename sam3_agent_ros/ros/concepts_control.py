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

from sam3_agent_ros.concepts import ConceptFrame, SegmenterGate, StandingConcepts
from sam3_agent_ros.config import PARAMETERS_BY_NAME, Config
from sam3_agent_ros.core.untrusted_text import for_log
from sam3_agent_ros.follow.redetect import Gates
from sam3_agent_ros.geometry.measurement import Measurement
from sam3_agent_ros.log_limit import limiter_of
from sam3_agent_ros.pipeline.measurement import locate
from sam3_agent_ros.pipeline.target_frame import TargetFrame, TargetFrameRequest, lookup_target
from sam3_agent_ros.ros import interfaces as generated
from sam3_agent_ros.ros.concepts_runner import ConceptsRunner
from sam3_agent_ros.ros.messages.concepts import (
    IMAGE_KINDS,
    concept_messages,
)
from sam3_agent_ros.ros.messages.robot_frame import concept_robot_messages
from sam3_agent_ros.ros.publishers import Publishers, context_ok
from sam3_agent_ros.ros.qos import OUTPUT_QOS

NAMESPACE = "~/concepts"
SHUTDOWN_WAIT_S = 5.0
TOPIC_OF = {"labels": f"{NAMESPACE}/labels", "overlay": f"{NAMESPACE}/overlay/compressed",
            "markers": f"{NAMESPACE}/markers", "detections": f"{NAMESPACE}/detections",
            "detections_2d": f"{NAMESPACE}/detections_2d",
            "detections_3d": f"{NAMESPACE}/detections_3d"}


def interfaces() -> tuple[Any, Any] | None:
    """``(ConceptDetections, ConceptDetection)``, or None when the generated interfaces cannot be
    imported (a venv without scripts/build_interfaces.sh)."""
    return generated.concept_types()


def with_positions(result: ConceptFrame, depth: Any, logger: Any = None
                   ) -> tuple[ConceptFrame, list[Measurement] | None]:
    """``result`` with each detection's 3D position, and the detections' ``depth.measure``
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


@dataclasses.dataclass
class _ConceptOutputs:
    detections_2d: Any
    detections_3d: Any
    markers: Any
    target: TargetFrame | None


class ConceptsControl:
    def __init__(self, node: Any, config: Config, gate: SegmenterGate,
                 to_frame: Callable[[Any], Any], depth: Callable[[], Any],
                 target_frame: Callable[[], TargetFrameRequest | None] | None = None):
        self._node = node
        self._depth = depth
        self._target_frame = target_frame  # the node's TF request (target_frame set) or None
        follow = config.follow
        self.concepts = StandingConcepts(config.concepts.prompts,
                                         Gates(follow.match_min_iou, follow.match_max_shift))
        self._types = interfaces()
        names = [TOPIC_OF["labels"], TOPIC_OF["overlay"], TOPIC_OF["detections_2d"]]
        if config.depth.enabled:
            names += [TOPIC_OF["markers"], TOPIC_OF["detections_3d"]]
        self._jpeg_quality = config.overlay.jpeg_quality
        if self._types is not None:
            names.append(TOPIC_OF["detections"])
        self._publishers = Publishers(node, names, OUTPUT_QOS)
        if self._types is None:
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
        """The new list, at most as often as the node's limiter allows (a peer may set
        ``concepts.prompts`` in a loop)."""
        prompts = self.concepts.prompts

        def line() -> str:
            if not prompts:
                return "standing concepts: off (concepts.prompts is empty)"
            listed = ", ".join(for_log(repr(p), 120) for p in prompts)
            return f"standing concepts ({len(prompts)}): {listed}; instance ids start at 1"

        limiter_of(self._node).emit("standing concepts", self._node.get_logger().info, line)

    # --- concepts thread ---------------------------------------------------------------------
    def _publish(self, result: ConceptFrame) -> None:
        publishers = self._publishers
        if not publishers.names or not context_ok(self._node):
            return
        result, extras = with_positions(result, self._depth(), self._node.get_logger())
        kinds = [k for k in (*IMAGE_KINDS, "markers") if publishers.wanted(TOPIC_OF[k])]
        messages = concept_messages(result, kinds, self._types, extras, self._jpeg_quality)
        markers = messages.markers
        request = self._target_frame() if self._target_frame is not None else None
        if any(publishers.wanted(TOPIC_OF[k]) for k in ("detections_2d", "detections_3d")) \
                or (markers is not None and request is not None):
            robot = self._robot_messages(result, extras, request)
            publishers.publish(TOPIC_OF["detections_2d"], robot.detections_2d)
            if publishers.wanted(TOPIC_OF["detections_3d"]):
                publishers.publish(TOPIC_OF["detections_3d"], robot.detections_3d)
            if markers is not None and robot.target is not None:  # target_frame set
                markers = robot.markers  # in target_frame; None without the transform
        publishers.publish(TOPIC_OF["markers"], markers)
        publishers.publish(TOPIC_OF["labels"], messages.labels)
        publishers.publish(TOPIC_OF["overlay"], messages.overlay)
        publishers.publish(TOPIC_OF["detections"], messages.detections)

    def _robot_messages(self, result: ConceptFrame, extras: list[Measurement] | None,
                        request: TargetFrameRequest | None) -> _ConceptOutputs:
        """The pass's vision_msgs detections and, with ``target_frame``, its 3D outputs in
        that frame (the transform at the pass's frame's stamp, looked up once)."""
        target = (lookup_target(request, result.frame)
                  if request is not None and extras else None)
        built = concept_robot_messages(result.frame, result.detections, extras, target)
        return _ConceptOutputs(built.detections_2d, built.detections_3d, built.markers, target)

    # --- lifecycle ---------------------------------------------------------------------------
    def destroy(self, wait_s: float = SHUTDOWN_WAIT_S) -> bool:
        """End the concepts thread (waited for up to ``wait_s``) and destroy the publishers;
        False when the thread is still busy (e.g. in the segmenter)."""
        stopped = self.runner.shutdown(wait_s)
        if not stopped:
            self._node.get_logger().warning("concepts: the concepts thread did not stop in time")
        self._publishers.destroy()
        return stopped
