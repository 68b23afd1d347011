"""One segmenter, two kinds of users: the agent and follow mode first, concept passes between.

The agent's ``segment_phrase`` calls and follow mode's re-detections go through ``gate.first``
(a segmenter that waits its turn); a concept pass holds the segmenter through
``gate.concept_pass()`` for all its concepts at once (one backbone pass). A caller of ``first``
that arrives during a concept pass waits for that pass only: from the moment one is waiting, no
new concept pass starts until it is served. So the agent never waits more than one concept
pass, and the concept rate is what is left over.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from sam3_agent_ros.core.ports import Detections, Segmenter, segment_prompts

FIRST, CONCEPTS = "first", "concepts"
_POLL_S = 0.1  # how often a waiting concept pass looks at its stop condition


class PassAbandoned(Exception):
    """A concept pass gave up waiting for the segmenter (its runner is stopping)."""


class SegmenterGate:
    """``first``: the segmenter the agent and follow mode call; ``concept_pass()``: hold the
    segmenter for one concept pass. Thread-safe."""

    def __init__(self, segmenter: Segmenter):
        self.segmenter = segmenter
        self.first = FirstSegmenter(self)
        self._changed = threading.Condition()
        self._holder: str | None = None
        self._first_waiting = 0

    @property
    def holder(self) -> str | None:
        """Who holds the segmenter now: ``"first"``, ``"concepts"`` or None."""
        return self._holder

    @property
    def first_waiting(self) -> int:
        """How many ``first`` callers wait for the segmenter now."""
        return self._first_waiting

    def run_first(self, call: Callable[[], Any]) -> Any:
        """``call()`` as soon as the segmenter is free; no concept pass starts meanwhile."""
        with self._changed:
            self._first_waiting += 1
            try:
                while self._holder is not None:
                    self._changed.wait()
            finally:
                self._first_waiting -= 1
            self._holder = FIRST
        try:
            return call()
        finally:
            self._release()

    @contextmanager
    def concept_pass(self, stopped: Callable[[], bool] = lambda: False) -> Iterator[Segmenter]:
        """Hold the segmenter for one concept pass, once it is free and nobody waits for it
        through ``first``; ``PassAbandoned`` when ``stopped()`` turns true while waiting."""
        with self._changed:
            while self._holder is not None or self._first_waiting:
                if stopped():
                    raise PassAbandoned
                self._changed.wait(_POLL_S)
            self._holder = CONCEPTS
        try:
            yield self.segmenter
        finally:
            self._release()

    def _release(self) -> None:
        with self._changed:
            self._holder = None
            self._changed.notify_all()


class FirstSegmenter:
    """The gate's segmenter for the agent and follow mode: every call waits its turn (at most
    the concept pass running); anything else (``close``, ``untrained_weights``...) is the
    segmenter's own."""

    def __init__(self, gate: SegmenterGate):
        self._gate = gate

    def segment(self, image: np.ndarray, text_prompt: str) -> Any:
        segmenter = self._gate.segmenter
        return self._gate.run_first(lambda: segmenter.segment(image, text_prompt))

    def segment_many(self, image: np.ndarray, text_prompts: Sequence[str]) -> list[Detections]:
        segmenter = self._gate.segmenter
        return self._gate.run_first(lambda: segment_prompts(segmenter, image, text_prompts))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._gate.segmenter, name)
