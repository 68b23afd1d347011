"""The small tracker interface follow mode runs behind (``follow.mode``).

A tracker moves each followed object's mask to a new frame. It is given the previous estimate of
every object (``Estimate``; ``mask`` None while an object is out of view) and returns one new
estimate per object, in the same order. Implementations: ``flow.FlowTracker`` (dense optical
flow) and ``redetect.RedetectTracker`` (segmenter + association).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import cv2
import numpy as np

from sam3_agent_ros.masks import PixelBox, pixel_box


@dataclass(frozen=True)
class Estimate:
    """Where one followed object is on one frame: its mask (None: not seen), a confidence in
    [0, 1], and ``trust``: the share of its confidence left since the last detection (1.0 right
    after one; flow lowers it). ``box``: the mask's pixel box when its maker knows it (a pass
    over a full-size mask saved; None: computed when asked)."""

    mask: np.ndarray | None
    confidence: float = 0.0
    trust: float = 1.0
    box: PixelBox | None = None

    @property
    def seen(self) -> bool:
        return self.mask is not None

    def pixel_box(self) -> PixelBox | None:
        if self.box is not None or self.mask is None:
            return self.box
        return pixel_box(self.mask)


MISSING = Estimate(mask=None, confidence=0.0, trust=0.0)


class Tracker(Protocol):
    """``source`` names what produced the estimates ("flow" or "redetect")."""

    source: str

    def track(self, frame_rgb: np.ndarray, previous: Sequence[Estimate]) -> list[Estimate]: ...


def mask_area(mask: np.ndarray, box: PixelBox | None = None) -> int:
    """Pixels of ``mask``; with its ``box`` only that part is read."""
    if box is not None:
        x0, y0, x1, y1 = box
        mask = mask[y0:y1, x0:x1]
    return int(np.count_nonzero(mask))


def centroid(mask: np.ndarray, box: PixelBox | None = None) -> tuple[float, float] | None:
    """Centroid (u, v) of ``mask`` (None: empty); pass its ``box`` when it is known."""
    box = box if box is not None else pixel_box(mask)
    if box is None:
        return None
    x0, y0, x1, y1 = box
    moments = cv2.moments(mask[y0:y1, x0:x1].view(np.uint8), binaryImage=True)
    return x0 + moments["m10"] / moments["m00"], y0 + moments["m01"] / moments["m00"]
