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
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sam3_agent_ros.concepts import ConceptFrame, SegmenterGate, StandingConcepts
from sam3_agent_ros.concepts.gate import PassAbandoned
from sam3_agent_ros.core.errors import SegmenterError
from sam3_agent_ros.core.types import Frame, FrameUnusable

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
        self._changed = threading.Condition()
        self._slot: Any = None
        self._next_due = 0.0
        self._busy = False
        self._shutdown = False
        self._thread: threading.Thread | None = None
        self._warned: dict[str, float] = {}
        self.stats = ConceptsStats()

    # --- any thread ------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="sam3_agent_concepts",
                                        daemon=True)
        self._thread.start()

    def offer(self, message: Any) -> None:
        """The image callback's part: O(1), keeps a reference, drops an untaken older frame."""
        if not self._concepts.prompts:
            return
        with self._changed:
            if self._slot is not None:
                self.stats.dropped += 1
            self._slot = message
            self._changed.notify_all()

    def set_rate(self, rate_hz: float) -> None:
        with self._changed:
            self._period_s = 1.0 / rate_hz
            self._next_due = 0.0  # the new rate counts from the next pass
            self._changed.notify_all()

    def clear(self) -> None:
        """Drop the waiting frame (deactivation: no stale frame after a later activation)."""
        with self._changed:
            self._slot = None

    def wait_idle(self, timeout_s: float) -> bool:
        """Until no pass runs; False on timeout."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._busy, timeout_s)

    def shutdown(self, timeout_s: float = 5.0) -> bool:
        """Stop the thread (a pass waiting for the segmenter gives up); False when it did not
        finish in time."""
        with self._changed:
            self._shutdown = True
            self._slot = None
            self._changed.notify_all()
        thread = self._thread
        if thread is None:
            return True
        thread.join(timeout_s)
        return not thread.is_alive()

    # --- the concepts thread ------------------------------------------------------------------
    def _take(self) -> Any:
        """The newest frame once a pass is due, or None at shutdown."""
        with self._changed:
            while True:
                if self._shutdown:
                    return None
                wait = None
                if self._slot is not None and self._concepts.prompts:
                    wait = self._next_due - self._clock()
                    if wait <= 0:
                        message, self._slot = self._slot, None
                        self._busy = True
                        return message
                self._changed.wait(wait)

    def _run(self) -> None:
        while True:
            message = self._take()
            if message is None:
                return
            try:
                self._pass(message)
            except Exception:  # noqa: BLE001 (the thread must survive anything)
                log.exception("concepts: unexpected failure")
            finally:
                with self._changed:
                    self._busy = False
                    self._changed.notify_all()

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
            with self._gate.concept_pass(stopped=lambda: self._shutdown) as segmenter:
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
