"""The frame as the LLM sees it.

Every image sent to the model is downscaled to ``agent.max_image_side`` anyway, so the frame is
downscaled once per query and overlays are drawn at that size, on masks resized (nearest) once
each. At 1080p this replaces a full-resolution render plus a ~2-15 ms resize per image with a
~0.5 ms mask resize. Mask geometry (the table, the answer) stays in full-frame pixels.
"""

from __future__ import annotations

import functools
import threading

import numpy as np

from sam3_agent_ros import render
from sam3_agent_ros.core.types import Mask
from sam3_agent_ros.masks import resize_mask


class LlmView:
    def __init__(self, image: np.ndarray, max_side: int):
        self.full = image
        self._max_side = max_side
        self._lock = threading.Lock()
        self._masks: dict[int, tuple[Mask, np.ndarray]] = {}  # id(mask) -> (mask, resized)

    @functools.cached_property
    def image(self) -> np.ndarray:
        """The frame downscaled to the LLM's size (computed on first use, then shared)."""
        return render.downscale(self.full, self._max_side)

    @property
    def scaled(self) -> bool:
        return self.image is not self.full

    def mask(self, mask: Mask) -> np.ndarray:
        """``mask.mask`` at the view's size (cached; thread-safe)."""
        if not self.scaled:
            return mask.mask
        with self._lock:
            hit = self._masks.get(id(mask))
            if hit is not None and hit[0] is mask:
                return hit[1]
        resized = self._resize(mask)
        with self._lock:
            self._masks[id(mask)] = (mask, resized)
        return resized

    def _resize(self, mask: Mask) -> np.ndarray:
        return resize_mask(mask.mask, self.image.shape[:2], mask.pixel_box)

    def keep_only(self, masks: list[Mask]) -> None:
        """Forget resized masks that are no longer current (bounds memory over long queries)."""
        alive = {id(m) for m in masks}
        with self._lock:
            self._masks = {k: v for k, v in self._masks.items() if k in alive}

