"""The node's standing concepts (``concepts.*``, docs/concepts.md), ROS-free: the concepts
thread, each pass's 3D step, and the live parameter changes; the ``~/concepts/*`` messages go
out through the node's outputs room (``ros/outputs.NodeOutputs.publish_concepts``).

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
from typing import Any, Protocol

from sam3_agent_ros.concepts import ConceptFrame, SegmenterGate, StandingConcepts
from sam3_agent_ros.config import PARAMETERS_BY_NAME, Config
from sam3_agent_ros.core.errors import SegmenterError
from sam3_agent_ros.core.ports import Logger
from sam3_agent_ros.core.types import Frame, Mask
from sam3_agent_ros.core.untrusted_text import for_log
from sam3_agent_ros.follow.redetect import Gates
from sam3_agent_ros.log_limit import LogLimiter
from sam3_agent_ros.pipeline.concepts_runner import ConceptsRunner
from sam3_agent_ros.pipeline.target_frame import TargetFrameRequest
from sam3_agent_ros.pipeline.three_d import Located, measure_3d

SHUTDOWN_WAIT_S = 5.0


def with_positions(result: ConceptFrame, depth: Any, logger: Any = None,
                   target_frame: TargetFrameRequest | None = None
                   ) -> tuple[ConceptFrame, Located | None]:
    """``result`` with each detection's 3D position, and the pass's one 3D step
    (``three_d.measure_3d``: each detection's measurement and, with ``target_frame``, the
    transform at the pass's frame's stamp and the measurements moved into it); ``(result,
    None)`` without depth. Computed before any message is built, whoever subscribes. Never
    raises."""
    if depth is None:
        return result, None
    located = measure_3d(depth, result.frame, [d.mask for d in result.detections], target_frame,
                         logger)
    placed = [dataclasses.replace(d, position=(dict(zip("xyz", m.position)) if m is not None
                                                and m.position is not None else None),
                                  position_error=m.position_error if m is not None else None)
              for d, m in zip(result.detections, located.measurements)]
    return dataclasses.replace(result, detections=placed), located


class ConceptsOutputs(Protocol):
    """Where concept passes go out (the node: ``ros/outputs.NodeOutputs``)."""

    def live(self) -> bool: ...

    def publish_concepts(self, result: ConceptFrame, located: Located | None) -> object: ...


class ConceptsControl:
    def __init__(self, logger: Logger, limiter: LogLimiter, config: Config, gate: SegmenterGate,
                 to_frame: Callable[[Any], Any], depth: Callable[[], Any],
                 outputs: ConceptsOutputs,
                 target_frame: Callable[[], TargetFrameRequest | None] | None = None):
        self._logger = logger  # the node's
        self._limiter = limiter  # the node's (log_limit.limiter_of): lines a peer can cause
        self._outputs = outputs  # the node's outputs room (ros/outputs.py)
        self._depth = depth
        self._target_frame = target_frame  # the node's TF request (target_frame set) or None
        self._first = gate.first  # the agent's way to the segmenter (ahead of any pass)
        follow = config.follow
        self.concepts = StandingConcepts(config.concepts.prompts,
                                         Gates(follow.match_min_iou, follow.match_max_shift))
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

    # --- worker thread -----------------------------------------------------------------------
    def detections_on(self, frame: Frame) -> list[Mask]:
        """Every standing concept's detections on ``frame`` (an answer's, for its grasp scene:
        neighbours the query did not name are obstacles too, CONTRACTS §12): one pass through
        the segmenter ahead of the concepts thread (SAM 3 reuses the frame's features when the
        agent's last call was on it); none without concepts, and none with a warning when the
        segmenter fails."""
        if not self.concepts.prompts:
            return []
        try:
            detected = self.concepts.detect(self._first, frame.image)
        except SegmenterError as exc:
            line = f"concepts: no neighbours for the grasp scene: {exc}"
            self._limiter.emit("concept neighbours", self._logger.warning, lambda: line)
            return []
        return [mask for masks in detected.masks for mask in masks]

    def _log_list(self) -> None:
        """The new list, at most as often as the node's limiter allows (a peer may set
        ``concepts.prompts`` in a loop)."""
        prompts = self.concepts.prompts

        def line() -> str:
            if not prompts:
                return "standing concepts: off (concepts.prompts is empty)"
            listed = ", ".join(for_log(repr(p), 120) for p in prompts)
            return f"standing concepts ({len(prompts)}): {listed}; instance ids start at 1"

        self._limiter.emit("standing concepts", self._logger.info, line)

    # --- concepts thread ---------------------------------------------------------------------
    def _publish(self, result: ConceptFrame) -> None:
        """The pass's 3D step first (its measurements and, with ``target_frame``, its
        transform), then its messages (``NodeOutputs.publish_concepts``)."""
        if not self._outputs.live():
            return
        request = self._target_frame() if self._target_frame is not None else None
        result, located = with_positions(result, self._depth(), self._logger, request)
        self._outputs.publish_concepts(result, located)

    # --- lifecycle ---------------------------------------------------------------------------
    def destroy(self, wait_s: float = SHUTDOWN_WAIT_S) -> bool:
        """End the concepts thread (waited for up to ``wait_s``); False when the thread is
        still busy (e.g. in the segmenter). The publishers are the outputs room's."""
        stopped = self.runner.shutdown(wait_s)
        if not stopped:
            self._logger.warning("concepts: the concepts thread did not stop in time")
        return stopped
