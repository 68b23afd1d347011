"""Pure geometry of binary masks shared by every layer: the pixel box and a box-limited IoU.

A pixel box is ``(x0, y0, x1, y1)`` in pixels with exclusive ``x1``/``y1`` (slicing
``mask[y0:y1, x0:x1]`` holds every true pixel), or None for an empty mask. Work on a mask is then
confined to its box, which keeps 1080p frames cheap.
"""

from __future__ import annotations

import cv2
import numpy as np

PixelBox = tuple[int, int, int, int]


def pixel_box(mask: np.ndarray) -> PixelBox | None:
    """``(x0, y0, x1, y1)`` (exclusive) of the non-zero pixels of a 2-D mask; None when empty.

    One OpenCV pass (a fraction of a millisecond at 1080p); a bool C-contiguous mask is read in
    place, anything else is converted first (non-zero = inside)."""
    binary = np.ascontiguousarray(mask, dtype=bool).view(np.uint8)
    x, y, w, h = cv2.boundingRect(binary)
    if w == 0 or h == 0:
        return None
    return x, y, x + w, y + h


def overlap_iou(a: np.ndarray, a_box: PixelBox | None, a_area: int, b: np.ndarray,
                b_box: PixelBox | None, b_area: int) -> float:
    """IoU of two (H, W) bool masks, given their pixel boxes and areas: only the overlap of the
    two boxes is read. 0.0 when either is empty or the boxes do not meet."""
    if a_box is None or b_box is None:
        return 0.0
    x0, y0 = max(a_box[0], b_box[0]), max(a_box[1], b_box[1])
    x1, y1 = min(a_box[2], b_box[2]), min(a_box[3], b_box[3])
    if x0 >= x1 or y0 >= y1:
        return 0.0
    inter = int(np.count_nonzero(a[y0:y1, x0:x1] & b[y0:y1, x0:x1]))
    union = a_area + b_area - inter
    return inter / union if union > 0 else 0.0


def resize_mask(mask: np.ndarray, size: tuple[int, int], box: PixelBox | None = None
                ) -> np.ndarray:
    """A (H, W) bool mask resized to ``size`` = (height, width), nearest neighbour, reading only
    its pixel ``box`` (computed when not given): a whole-frame resize of a 1080p mask costs
    ~0.5 ms, and most masks cover a small part of the frame.

    Output pixel j samples input column floor((j + 0.5) * full / small): the pixel-centre rule
    of OpenCV's INTER_NEAREST_EXACT, so the result equals a whole-frame resize."""
    return resize_mask_with_box(mask, size, box)[0]


def resize_mask_with_box(mask: np.ndarray, size: tuple[int, int], box: PixelBox | None = None
                         ) -> tuple[np.ndarray, PixelBox | None]:
    """``resize_mask`` and the pixel box of the resized mask (looked for only where the
    resized box can be)."""
    height, width = size
    full_height, full_width = mask.shape
    out = np.zeros((height, width), bool)
    box = pixel_box(mask) if box is None else box
    if box is None:
        return out, None
    x0, y0, x1, y1 = box
    sx, sy = full_width / width, full_height / height
    j0, j1 = int(x0 / sx), min(width, int(np.ceil(x1 / sx)) + 1)
    i0, i1 = int(y0 / sy), min(height, int(np.ceil(y1 / sy)) + 1)
    cols = np.minimum(((np.arange(j0, j1) + 0.5) * sx).astype(np.intp), full_width - 1)
    rows = np.minimum(((np.arange(i0, i1) + 0.5) * sy).astype(np.intp), full_height - 1)
    out[i0:i1, j0:j1] = mask.take(rows, axis=0).take(cols, axis=1)  # 3x np.ix_'s speed
    inner = pixel_box(out[i0:i1, j0:j1])
    if inner is None:  # a mask thinner than the sampling step can vanish
        return out, None
    return out, (j0 + inner[0], i0 + inner[1], j0 + inner[2], i0 + inner[3])
