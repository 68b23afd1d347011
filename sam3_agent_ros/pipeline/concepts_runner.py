"""Standing concepts off the executor thread: one concepts thread, a newest-only frame slot.

ROS-free (the node passes plain callables), so the threading is unit-tested without a ROS graph.

- the image callback calls ``offer(message)``: O(1); with no concepts it returns at once, else the
  message replaces the slot's (never a queue: a frame the segmenter had no time for is dropped);
- the concepts thread waits until a pass is due (``concepts.rate_hz``: at most one pass per
  period, counted from the start of the previous one), takes the newest frame, converts it,
  holds the segmenter through the ``SegmenterGate`` for one pass (every concept at once), gives
  the detections their ids and publishes them, outside the gate. A pass computed with a list that
  changed meanwhile is dropped (its ids belong to the old list).
- the agent and follow mode use the segmenter through the same gate first: they wait at most
  for the pass that holds it, and no new pass starts while they wait.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sam3_agent_ros.concepts import ConceptFrame, SegmenterGate, StandingConcepts
from sam3_agent_ros.concepts.gate import PassAbandoned
from sam3_agent_ros.core.errors import SegmenterError
from sam3_agent_ros.core.types import Frame, FrameUnusable
from sam3_agent_ros.pipeline.newest_frame import NewestFrameWorker, Wait, Work

log = logging.getLogger(__name__)
WARN_EVERY_S = 10.0  # the same kind of warning at most this often


@dataclass
class ConceptsStats:
    passes: int = 0  # passes published
    dropped: int = 0  # frames replaced in the slot before a pass took them
    unusable: int = 0  # frames that could not be converted
    failed: int = 0  # passes the segmenter failed
    stale: int = 0  # passes dropped because the list changed meanwhile
    pass_ms: list[float] = field(default_factory=list)  # latest passes: frame taken -> published


class ConceptsRunner:
    """- ``to_frame(message) -> Frame`` converts a frame message, raising ``FrameUnusable``;
    - ``publish(result)`` sends a pass's outputs (on the concepts thread).
    """

    def __init__(self, *, concepts: StandingConcepts, gate: SegmenterGate,
                 to_frame: Callable[[Any], Frame], publish: Callable[[ConceptFrame], None],
                 rate_hz: float, clock: Callable[[], float] = time.monotonic):
        self._concepts = concepts
        self._gate = gate
        self._to_frame = to_frame
        self._publish = publish
        self._clock = clock
        self._period_s = 1.0 / rate_hz
        self._next_due = 0.0
        self._frames: NewestFrameWorker[Any] = NewestFrameWorker(
            plan=self._plan, label="concepts", thread_name="sam3_agent_concepts",
            wanted=lambda: bool(self._concepts.prompts), clock=clock)
        self._changed = self._frames.changed  # the rate shares the slot's lock
        self._warned: dict[str, float] = {}
        self.stats = ConceptsStats()

    # --- any thread ------------------------------------------------------------------------------
    def start(self) -> None:
        self._frames.start()

    def offer(self, message: Any) -> None:
        """The image callback's part: O(1), keeps a reference, drops an untaken older frame."""
        if self._frames.offer(message):
            self.stats.dropped += 1

    def set_rate(self, rate_hz: float) -> None:
        with self._changed:
            self._period_s = 1.0 / rate_hz
            self._next_due = 0.0  # the new rate counts from the next pass
            self._changed.notify_all()

    def clear(self) -> None:
        """Drop the waiting frame (deactivation: no stale frame after a later activation)."""
        self._frames.clear()

    def wait_idle(self, timeout_s: float) -> bool:
        """Until no pass runs; False on timeout."""
        return self._frames.wait_idle(timeout_s)

    def shutdown(self, timeout_s: float = 5.0) -> bool:
        """Stop the thread (a pass waiting for the segmenter gives up); False when it did not
        finish in time."""
        return self._frames.stop(timeout_s)

    # --- the concepts thread ------------------------------------------------------------------
    def _plan(self) -> Work | Wait:
        """The newest frame's pass once one is due; else wait (until it is due, or for a frame
        and a concept). Under ``_changed``."""
        if self._frames.newest is None or not self._concepts.prompts:
            return Wait(None)
        wait = self._next_due - self._clock()
        offered = self._frames.take() if wait <= 0 else None
        if offered is None:
            return Wait(wait)
        return lambda: self._pass(offered.message)

    def _pass(self, message: Any) -> None:
        started = self._clock()
        with self._changed:
            self._next_due = started + self._period_s
        try:
            frame = self._to_frame(message)
        except FrameUnusable as exc:
            self.stats.unusable += 1
            self._warn("unusable", f"concepts: skipping an unusable frame: {exc.reason}")
            return
        try:
            with self._gate.concept_pass(stopped=lambda: self._frames.stopping) as segmenter:
                detected = self._concepts.detect(segmenter, frame.image)
        except PassAbandoned:
            return
        except SegmenterError as exc:
            self.stats.failed += 1
            self._warn("segmenter", f"concepts: the segmenter failed on a frame: {exc}")
            return
        result = self._concepts.finish(detected, frame)
        if result is None:
            self.stats.stale += 1
            return
        self._publish(result)
        self.stats.passes += 1
        self.stats.pass_ms = (self.stats.pass_ms + [(self._clock() - started) * 1000.0])[-1000:]

    def _warn(self, kind: str, text: str) -> None:
        now = time.monotonic()
        if now - self._warned.get(kind, -WARN_EVERY_S) >= WARN_EVERY_S:
            self._warned[kind] = now
            log.warning(text)
