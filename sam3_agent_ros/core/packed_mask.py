"""A mask kept for later at 1 bit a pixel of its pixel box (``core/answers.py``).

A ``Mask`` holds one bool per frame pixel (40 MB at the 40 M ``max_image_pixels`` cap). A kept
answer needs its masks only when a refinement draws them, so ``PackedMask`` keeps the pixels of
the mask's pixel box, 8 to a byte (``numpy.packbits``), with the mask's facts, and ``unpack``
gives the full-size ``Mask`` back, equal pixel for pixel.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sam3_agent_ros.core.types import Box, Mask, Point, float_box, float_point
from sam3_agent_ros.masks import PixelBox, pixel_box


@dataclass(frozen=True, eq=False)
class PackedMask:
    shape: tuple[int, int]  # (H, W) of the frame
    box: PixelBox | None  # the pixels' box (x0, y0, x1, y1, exclusive); None: an empty mask
    bits: np.ndarray  # the box's pixels, row-major, packbits; empty for an empty mask
    score: float
    bbox: Box
    area: int
    centroid: Point

    @classmethod
    def of(cls, mask: Mask) -> PackedMask:
        pixels = np.asarray(mask.mask, dtype=bool)
        box = mask.pixel_box if mask.pixel_box is not None else pixel_box(pixels)
        if box is None:
            bits = np.zeros(0, np.uint8)
        else:
            x0, y0, x1, y1 = box
            bits = np.packbits(pixels[y0:y1, x0:x1], axis=None)
        return cls((int(pixels.shape[0]), int(pixels.shape[1])), box, bits, float(mask.score),
                   float_box(mask.bbox), int(mask.area), float_point(mask.centroid))

    @property
    def nbytes(self) -> int:
        return int(self.bits.nbytes)

    def unpack(self) -> Mask:
        """The full-size mask (a new array each call)."""
        pixels = np.zeros(self.shape, bool)
        if self.box is not None:
            x0, y0, x1, y1 = self.box
            count = (y1 - y0) * (x1 - x0)
            pixels[y0:y1, x0:x1] = np.unpackbits(self.bits, count=count).reshape(
                y1 - y0, x1 - x0).view(bool)
        return Mask(mask=pixels, score=self.score, bbox=self.bbox, area=self.area,
                    centroid=self.centroid, pixel_box=self.box)
