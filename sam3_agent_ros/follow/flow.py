"""``flow`` tracker: move each mask to the next frame with dense optical flow (OpenCV DIS).

Per frame: the frame is converted to grayscale at a reduced size (longest side
``follow.flow_max_side``), DIS computes the backward flow (new frame -> previous frame), and each
mask is pulled through it with ``cv2.remap`` inside a window around its previous box only, so the
cost grows with the objects' size, not the frame's. The flow is upsampled to full resolution
inside that window; the warped mask is the 0.5 level of the linearly interpolated previous mask,
so edges stay sub-pixel and do not erode step by step.

Confidence of a warped mask: the previous confidence times the ratio of the smaller to the larger
of its new and previous areas (an object leaving the view, or flow tearing a mask apart or
collapsing it, loses confidence; a rigid motion keeps it).
Drift is corrected outside this module: the session re-detects every ``follow.redetect_every``
frames and when confidence drops (see ``session.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from sam3_agent_ros.follow.tracker import MISSING, Estimate
from sam3_agent_ros.masks import PixelBox, pixel_box

SOURCE = "flow"
# Pixels added around a mask's box before warping, beyond the largest flow vector.
_WINDOW_MARGIN_PX = 4


def flow_scale(height: int, width: int, max_side: int) -> float:
    """Factor from full resolution to the flow resolution (<= 1)."""
    return min(1.0, max_side / float(max(height, width)))


class FlowTracker:
    """Dense-flow propagation. Call ``reset(frame)`` with the frame the masks were made on, then
    ``track(frame, previous)`` on each new frame (it also remembers that frame)."""

    source = SOURCE

    def __init__(self, max_side: int = 320):
        self._max_side = int(max_side)
        self._dis = cv2.DISOpticalFlow.create(cv2.DISOPTICAL_FLOW_PRESET_ULTRAFAST)
        self._previous_gray: np.ndarray | None = None
        self._backward: np.ndarray | None = None  # of the last track()
        self._scale = 1.0

    def reset(self, frame_rgb: np.ndarray) -> None:
        self._previous_gray = self._gray(frame_rgb)

    def _gray(self, frame_rgb: np.ndarray) -> np.ndarray:
        height, width = frame_rgb.shape[:2]
        self._scale = flow_scale(height, width, self._max_side)
        gray = cv2.cvtColor(frame_rgb, cv2.COLOR_RGB2GRAY)
        if self._scale < 1.0:
            size = (max(1, round(width * self._scale)), max(1, round(height * self._scale)))
            gray = cv2.resize(gray, size, interpolation=cv2.INTER_AREA)
        return gray

    def track(self, frame_rgb: np.ndarray, previous: Sequence[Estimate]) -> list[Estimate]:
        if self._previous_gray is None:
            raise RuntimeError("FlowTracker.track before reset(first frame)")
        gray = self._gray(frame_rgb)
        if gray.shape != self._previous_gray.shape:
            raise ValueError("frame size changed; reset the tracker")
        # new(x) ~ old(x + flow(x)). No flow to start from: None (OpenCV allocates one; its stubs
        # want an array).
        backward = self._dis.calc(gray, self._previous_gray, None)  # type: ignore[call-overload]
        self._previous_gray = gray
        self._backward = backward
        reach = float(np.abs(backward).max()) / self._scale if backward.size else 0.0
        return [self._warp(estimate, backward, reach, frame_rgb.shape[:2])
                for estimate in previous]

    def displacement(self, box: PixelBox) -> tuple[float, float]:
        """How far (dx, dy, full-resolution pixels) the region ``box`` moved between the two
        frames of the last ``track``: the median flow under it. A rigid shift, far cheaper than
        warping a mask (for look-alikes, which only need to be found again)."""
        backward = self._backward
        if backward is None:
            return 0.0, 0.0
        scale = self._scale
        height, width = backward.shape[:2]
        fx0 = min(width - 1, max(0, int(np.floor(box[0] * scale))))
        fy0 = min(height - 1, max(0, int(np.floor(box[1] * scale))))
        fx1 = max(fx0 + 1, min(width, int(np.ceil(box[2] * scale))))
        fy1 = max(fy0 + 1, min(height, int(np.ceil(box[3] * scale))))
        under = backward[fy0:fy1, fx0:fx1].reshape(-1, 2)
        dx, dy = np.median(under, axis=0)
        return -float(dx) / scale, -float(dy) / scale

    def _warp(self, estimate: Estimate, backward: np.ndarray, reach: float,
              shape: tuple[int, int]) -> Estimate:
        if estimate.mask is None:
            return MISSING
        box = estimate.pixel_box()
        if box is None:
            return MISSING
        height, width = shape
        margin = int(np.ceil(reach)) + _WINDOW_MARGIN_PX
        x0, y0 = max(0, box[0] - margin), max(0, box[1] - margin)
        x1, y1 = min(width, box[2] + margin), min(height, box[3] + margin)
        scale = self._scale
        # The low-resolution flow under the window, upsampled to the window's full-res pixels.
        fx0, fy0 = int(np.floor(x0 * scale)), int(np.floor(y0 * scale))
        fx1 = min(backward.shape[1], int(np.ceil(x1 * scale)) + 1)
        fy1 = min(backward.shape[0], int(np.ceil(y1 * scale)) + 1)
        # Map of full-res pixel x to low-res coordinate: (x + 0.5) * scale - 0.5.
        xs: np.ndarray = (np.arange(x0, x1, dtype=np.float32) + 0.5) * scale - 0.5 - fx0
        ys: np.ndarray = (np.arange(y0, y1, dtype=np.float32) + 0.5) * scale - 0.5 - fy0
        map_x, map_y = np.meshgrid(xs, ys)
        window_flow = cv2.remap(backward[fy0:fy1, fx0:fx1], map_x, map_y, cv2.INTER_LINEAR,
                                borderMode=cv2.BORDER_REPLICATE)
        # Pulled from the mask's own box only (it is all zeros outside, as the border value).
        bx0, by0, bx1, by1 = box
        grid_x, grid_y = np.meshgrid(np.arange(x0 - bx0, x1 - bx0, dtype=np.float32),
                                     np.arange(y0 - by0, y1 - by0, dtype=np.float32))
        source_x: np.ndarray = grid_x + window_flow[..., 0] / scale
        source_y: np.ndarray = grid_y + window_flow[..., 1] / scale
        previous = estimate.mask[by0:by1, bx0:bx1]
        warped = cv2.remap(previous.astype(np.float32), source_x, source_y, cv2.INTER_LINEAR,
                           borderMode=cv2.BORDER_CONSTANT, borderValue=0.0)
        inside = warped >= 0.5
        local = pixel_box(inside)
        if local is None:
            return MISSING
        area = int(np.count_nonzero(inside))
        mask = np.zeros(shape, bool)
        mask[y0:y1, x0:x1] = inside
        previous_area = int(np.count_nonzero(previous))
        area_ratio = min(area, previous_area) / max(area, previous_area)
        return Estimate(mask=mask, confidence=estimate.confidence * area_ratio,
                        trust=estimate.trust * area_ratio,
                        box=(x0 + local[0], y0 + local[1], x0 + local[2], y0 + local[3]))
