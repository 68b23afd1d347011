"""Look-alikes of a followed answer: the other detections of its text prompt, remembered so that
they compete in the association (``redetect.py``) and a same-coloured neighbour never takes over
the identity of an object that vanished beside it; flow masks also lose their pixels
(``without``). At most ``MAX_LOOKALIKES`` are kept (nearest to the followed objects first), each
moved rigidly by the median flow under it in ``flow`` mode and forgotten ``lost_timeout_s``
after its last detection. Pure (numpy).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from sam3_agent_ros.follow.redetect import Redetection
from sam3_agent_ros.follow.tracker import MISSING, Estimate
from sam3_agent_ros.masks import PixelBox, pixel_box

# Look-alikes remembered for the association (the nearest to the followed objects).
MAX_LOOKALIKES = 8


@dataclass(frozen=True)
class LookAlike:
    """Another detection of the prompt: its mask as a crop whose top-left corner is at (x, y)
    (moved rigidly by flow in ``flow`` mode), and when it was last detected."""

    crop: np.ndarray
    x: float
    y: float
    detected_s: float

    @classmethod
    def detected(cls, found: Estimate, now_s: float) -> LookAlike:
        """A detection (``found.seen``: a non-empty mask) remembered at ``now_s``."""
        box = found.pixel_box()
        if found.mask is None or box is None:
            raise ValueError("a look-alike is a detection with a non-empty mask")
        x0, y0, x1, y1 = box
        return cls(found.mask[y0:y1, x0:x1].copy(), float(x0), float(y0), now_s)

    def moved(self, dx: float, dy: float) -> LookAlike:
        return replace(self, x=self.x + dx, y=self.y + dy)

    def box(self) -> PixelBox:
        """Its box on the frame, possibly reaching past the frame's edges."""
        x0, y0 = round(self.x), round(self.y)
        return x0, y0, x0 + self.crop.shape[1], y0 + self.crop.shape[0]

    def placed(self, shape: tuple[int, int]) -> tuple[np.ndarray, PixelBox] | None:
        """The part of the crop inside a frame of ``shape`` and its box there (None: none)."""
        x0, y0, x1, y1 = self.box()
        cx0, cy0 = max(0, -x0), max(0, -y0)
        cx1 = min(self.crop.shape[1], shape[1] - x0)
        cy1 = min(self.crop.shape[0], shape[0] - y0)
        if cx0 >= cx1 or cy0 >= cy1 or not self.crop[cy0:cy1, cx0:cx1].any():
            return None
        return self.crop[cy0:cy1, cx0:cx1], (x0 + cx0, y0 + cy0, x0 + cx1, y0 + cy1)

    def mask(self, shape: tuple[int, int]) -> np.ndarray:
        """Its full-frame mask (empty when it is out of the frame)."""
        mask = np.zeros(shape, bool)
        placed = self.placed(shape)
        if placed is not None:
            crop, (x0, y0, x1, y1) = placed
            mask[y0:y1, x0:x1] = crop
        return mask


def remembered(old: Sequence[LookAlike], found: Redetection, now_s: float, timeout_s: float,
               anchors: Sequence[tuple[float, float] | None]) -> list[LookAlike]:
    """The look-alikes after a re-detection: ``old`` ones it found again take their new place,
    those not detected for ``timeout_s`` are forgotten, its unmatched detections join; at most
    ``MAX_LOOKALIKES``, the nearest to ``anchors`` (the followed objects' centroids) first."""
    kept = [LookAlike.detected(where, now_s) if where.seen else previous
            for previous, where in zip(old, found.lookalikes)]
    kept = [a for a in kept if now_s - a.detected_s < timeout_s]
    kept += [LookAlike.detected(where, now_s) for where in found.unmatched]
    if len(kept) > MAX_LOOKALIKES:
        kept.sort(key=lambda a: _distance_to(_box_centre(a.box()), anchors))
    return kept[:MAX_LOOKALIKES]


def without(estimate: Estimate, others: Sequence[tuple[np.ndarray, PixelBox]]) -> Estimate:
    """``estimate`` less the pixels of ``others`` (crops and their boxes on the frame): the same
    estimate when they share none, else one with a new mask. Only the overlap of the boxes is
    read."""
    box = estimate.pixel_box()
    if box is None or estimate.mask is None:
        return estimate
    mask: np.ndarray = estimate.mask
    for crop, other_box in others:
        x0, y0 = max(box[0], other_box[0]), max(box[1], other_box[1])
        x1, y1 = min(box[2], other_box[2]), min(box[3], other_box[3])
        if x0 >= x1 or y0 >= y1:
            continue
        ox, oy = other_box[0], other_box[1]
        shared = mask[y0:y1, x0:x1] & crop[y0 - oy:y1 - oy, x0 - ox:x1 - ox]
        if shared.any():
            mask = mask.copy() if mask is estimate.mask else mask
            mask[y0:y1, x0:x1] &= ~shared
    if mask is estimate.mask:
        return estimate
    left = pixel_box(mask[box[1]:box[3], box[0]:box[2]])
    if left is None:
        return MISSING
    return replace(estimate, mask=mask, box=(box[0] + left[0], box[1] + left[1],
                                             box[0] + left[2], box[1] + left[3]))


def _box_centre(box: PixelBox) -> tuple[float, float]:
    return (box[0] + box[2]) / 2.0, (box[1] + box[3]) / 2.0


def _distance_to(point: tuple[float, float] | None,
                 anchors: Sequence[tuple[float, float] | None]) -> float:
    if point is None:
        return math.inf
    return min((math.hypot(point[0] - a[0], point[1] - a[1]) for a in anchors if a is not None),
               default=math.inf)
