"""``StandingConcepts``: the list of standing concepts, one pass per frame, stable instance ids.

A pass is two steps so that a caller can hold the segmenter for the first only:
``detect(segmenter, image)`` runs every concept on the frame in one segmenter call
(``core.ports.segment_prompts``: SAM 3's ``segment_many`` runs the image backbone once for all of
them); ``finish(detected, frame)`` gives every detection its instance id (``InstanceIds``) and
returns the ``ConceptFrame``, or None when the list changed while the pass ran (its ids belong to
the old list). ``process`` does both. ``set_prompts`` may be called from any thread; a different
list (order included) starts a new generation and restarts the ids at 1.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np

from sam3_agent_ros.concepts.instances import InstanceIds
from sam3_agent_ros.concepts.types import ConceptDetection, ConceptFrame
from sam3_agent_ros.core.ports import Segmenter, segment_prompts
from sam3_agent_ros.core.types import Frame, Mask
from sam3_agent_ros.follow.redetect import Gates


@dataclass(frozen=True)
class Detected:
    """The first step of a pass: the masks of every concept on one frame."""

    prompts: tuple[str, ...]
    generation: int
    masks: list[list[Mask]]  # per concept, highest score first, empty masks dropped
    segment_ms: float
    untrained_weights: bool = False


class StandingConcepts:
    def __init__(self, prompts: tuple[str, ...] | list[str] = (), gates: Gates | None = None):
        self._lock = threading.Lock()
        self._ids = InstanceIds(gates)
        self._prompts: tuple[str, ...] = ()
        self._generation = 0
        self.set_prompts(prompts)

    @property
    def prompts(self) -> tuple[str, ...]:
        return self._prompts

    @property
    def generation(self) -> int:
        return self._generation

    def set_prompts(self, prompts: tuple[str, ...] | list[str]) -> bool:
        """Use this list from the next pass on (entries stripped); True when it differs from
        the current one (the ids then restart at 1). Bounds are the caller's (config.py)."""
        cleaned = tuple(p.strip() for p in prompts)
        with self._lock:
            if cleaned == self._prompts:
                return False
            self._prompts = cleaned
            self._generation += 1
            self._ids.reset()
            return True

    def detect(self, segmenter: Segmenter, image: np.ndarray) -> Detected:
        """Every concept of the current list on ``image`` (one segmenter call); raises the
        segmenter's ``SegmenterError``."""
        with self._lock:
            prompts, generation = self._prompts, self._generation
        started = time.perf_counter()
        found = segment_prompts(segmenter, image, prompts) if prompts else []
        masks = [[m for m in d.to_masks() if m.area > 0] for d in found]
        return Detected(prompts, generation, masks, (time.perf_counter() - started) * 1000.0,
                        any(d.untrained_weights for d in found))

    def finish(self, detected: Detected, frame: Frame) -> ConceptFrame | None:
        """Ids for the detections of ``detected`` (computed on ``frame``); None when the list
        changed since ``detect`` began."""
        started = time.perf_counter()
        with self._lock:
            if detected.generation != self._generation:
                return None
            ids = self._ids.assign(detected.masks, frame.image.shape[:2])
        detections = [
            ConceptDetection(concept=concept, id=instance_id, mask=m.mask, score=m.score,
                             bbox=m.bbox, centroid=m.centroid, area=m.area)
            for concept, masks, concept_ids in zip(detected.prompts, detected.masks, ids)
            for m, instance_id in zip(masks, concept_ids)]
        timings = {"segment": detected.segment_ms,
                   "ids": (time.perf_counter() - started) * 1000.0}
        return ConceptFrame(frame, detected.prompts, detected.generation, detections, timings,
                            detected.untrained_weights)

    def process(self, segmenter: Segmenter, frame: Frame) -> ConceptFrame | None:
        """One whole pass on ``frame`` (the CLI's, and any caller that owns the segmenter)."""
        return self.finish(self.detect(segmenter, frame.image), frame)
