"""Post-processing of SAM 3 detections: pure numpy, no torch.

``filter_detections`` drops low scores and small masks, removes overlaps greedily by score and
returns what is left sorted by descending score, with boxes clipped to the frame.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Detections:
    """``masks`` (N, H, W) bool, ``scores`` (N,) float64, ``boxes`` (N, 4) float64 x0 y0 x1 y1."""

    masks: np.ndarray
    scores: np.ndarray
    boxes: np.ndarray

    @classmethod
    def empty(cls, height: int, width: int) -> Detections:
        return cls(np.zeros((0, height, width), bool), np.zeros(0), np.zeros((0, 4)))


def filter_detections(masks: np.ndarray, scores: np.ndarray, boxes: np.ndarray, *,
                      confidence_threshold: float, overlap_threshold: float,
                      min_mask_area: int) -> Detections:
    """Keep masks with ``score >= confidence_threshold`` and ``area >= min_mask_area``; then, in
    descending score, drop every mask whose IoU with an already kept mask exceeds
    ``overlap_threshold`` (1.0 keeps all). Raises ``ValueError`` on inconsistent shapes."""
    masks = np.asarray(masks)
    if masks.ndim == 4 and masks.shape[1] == 1:
        masks = masks[:, 0]
    if masks.ndim != 3:
        raise ValueError(f"masks must be (N, H, W), got shape {masks.shape}")
    masks = masks.astype(bool, copy=False)
    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    count, height, width = masks.shape
    if scores.shape[0] != count or boxes.shape[0] != count:
        raise ValueError(f"{count} masks but {scores.shape[0]} scores and {boxes.shape[0]} boxes")

    areas = masks.reshape(count, height * width).sum(axis=1)
    candidates = np.flatnonzero((scores >= confidence_threshold) & (areas >= max(min_mask_area, 1))
                                & np.isfinite(scores))
    candidates = candidates[np.argsort(-scores[candidates], kind="stable")]
    kept = greedy_overlap_removal(masks, areas, candidates, overlap_threshold)
    if not kept:
        return Detections.empty(height, width)
    index = np.asarray(kept)
    return Detections(masks[index], scores[index], clip_boxes(boxes[index], height, width))


def greedy_overlap_removal(masks: np.ndarray, areas: np.ndarray, order: np.ndarray,
                           overlap_threshold: float) -> list[int]:
    """Indices from ``order`` (best first) whose mask IoU with every earlier kept one is at most
    ``overlap_threshold``. IoU is computed on the overlap of the two masks' extents only."""
    if overlap_threshold >= 1.0:
        return [int(i) for i in order]
    extents = {int(i): mask_extent(masks[i]) for i in order}
    kept: list[int] = []
    for candidate in (int(i) for i in order):
        overlaps = (_iou(masks, areas, extents, candidate, other) for other in kept)
        if all(overlap <= overlap_threshold for overlap in overlaps):
            kept.append(candidate)
    return kept


def _iou(masks: np.ndarray, areas: np.ndarray, extents: dict, a: int, b: int) -> float:
    ay0, ay1, ax0, ax1 = extents[a]
    by0, by1, bx0, bx1 = extents[b]
    y0, y1, x0, x1 = max(ay0, by0), min(ay1, by1), max(ax0, bx0), min(ax1, bx1)
    if y0 >= y1 or x0 >= x1:
        return 0.0
    inter = int(np.count_nonzero(masks[a, y0:y1, x0:x1] & masks[b, y0:y1, x0:x1]))
    union = int(areas[a]) + int(areas[b]) - inter
    return inter / union if union > 0 else 0.0


def mask_extent(mask: np.ndarray) -> tuple[int, int, int, int]:
    """Half-open ``(y0, y1, x0, x1)`` of the mask's true pixels; ``(0, 0, 0, 0)`` when empty."""
    rows = np.flatnonzero(mask.any(axis=1))
    if rows.size == 0:
        return (0, 0, 0, 0)
    cols = np.flatnonzero(mask.any(axis=0))
    return (int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1)


def clip_boxes(boxes: np.ndarray, height: int, width: int) -> np.ndarray:
    """Clip x0 y0 x1 y1 pixel boxes to the frame; non-finite coordinates become the frame edge."""
    boxes = np.nan_to_num(np.asarray(boxes, dtype=np.float64).reshape(-1, 4), nan=0.0,
                          posinf=float(max(width, height)), neginf=0.0)
    limits = np.array([width, height, width, height], dtype=np.float64)
    return np.clip(boxes, 0.0, limits)
