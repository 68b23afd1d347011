"""Instance ids that stay with an object from pass to pass (``InstanceIds``).

Each concept keeps the instances it saw; a new pass's detections of that concept are associated
to them with follow mode's association (``follow.redetect.associate``: an optimal one-to-one
assignment on mask IoU and centroid shift, gated by ``follow.match_min_iou`` /
``follow.match_max_shift``). A matched detection keeps its instance's id; an unmatched one gets
a new id; an instance unseen for more than ``keep_missing`` passes is forgotten (a brief
occlusion or one missed detection keeps the id).

Ids are unique across all concepts of the list and start at 1; ``reset`` (a new list) starts them
again. They are the pixel values of the mono16 label image, so after ``MAX_ID`` they wrap around
to the smallest ids not in use.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sam3_agent_ros.core.types import Mask
from sam3_agent_ros.follow.redetect import Gates, associate

MAX_ID = 65535  # the largest mono16 pixel value
KEEP_MISSING_PASSES = 2


@dataclass
class _Instance:
    id: int
    mask: np.ndarray
    missed: int = 0


class InstanceIds:
    """Carries ids across passes for the concepts of one list (not thread-safe: one pass at a
    time, ``StandingConcepts`` holds the lock)."""

    def __init__(self, gates: Gates | None = None, keep_missing: int = KEEP_MISSING_PASSES):
        self.gates = gates or Gates()
        self.keep_missing = keep_missing
        self._instances: dict[int, list[_Instance]] = {}  # concept index -> instances
        self._next_id = 1
        self._shape: tuple[int, int] | None = None

    def reset(self) -> None:
        """Forget every instance; ids start at 1 again."""
        self._instances = {}
        self._next_id = 1
        self._shape = None

    def assign(self, detections: Sequence[Sequence[Mask]], shape: tuple[int, int]
               ) -> list[list[int]]:
        """The id of every detection, per concept (``detections[c]``: concept c's masks, in
        the order given). A frame of another size than the last one starts over."""
        if self._shape is not None and shape != self._shape:
            self.reset()
        self._shape = shape
        ids: list[list[int]] = []
        for concept, masks in enumerate(detections):
            known = self._instances.get(concept, [])
            matches = associate([i.mask for i in known], masks, shape, self.gates)
            matched = {det: inst for inst, (det, _) in matches.items()}
            concept_ids = [known[matched[j]].id if j in matched else 0 for j in range(len(masks))]
            kept = []
            for index, instance in enumerate(known):
                if index in matches:
                    instance.mask, instance.missed = masks[matches[index][0]].mask, 0
                    kept.append(instance)
                elif instance.missed < self.keep_missing:
                    instance.missed += 1
                    kept.append(instance)
            for j, mask in enumerate(masks):
                if concept_ids[j] == 0:
                    concept_ids[j] = self._new_id(concept, kept)
                    kept.append(_Instance(concept_ids[j], mask.mask))
            self._instances[concept] = kept
            ids.append(concept_ids)
        for concept in list(self._instances):
            if concept >= len(detections):
                del self._instances[concept]
        return ids

    def _new_id(self, concept: int, kept: Sequence[_Instance]) -> int:
        """The next id; past ``MAX_ID``, the smallest id no remembered instance holds."""
        if self._next_id <= MAX_ID:
            new, self._next_id = self._next_id, self._next_id + 1
            return new
        used = {i.id for c, known in self._instances.items() if c != concept for i in known}
        used |= {i.id for i in kept}
        free = next((i for i in range(1, MAX_ID + 1) if i not in used), None)
        if free is None:
            raise RuntimeError(f"more than {MAX_ID} instances remembered at once")
        return free
